"""swift.logps-alignment on a real ms-swift 4.6 install (the swift-4.6 cell env); swift.logps-alignment-3x's window.

A GRPO batch whose first row is labelled from column 0 makes ms-swift's logits_to_keep equal the sequence
length L: upstream fails in the log-prob gather. Patched, the K columns come back aligned, the token no
logit predicts holds alignment.UNPREDICTABLE_LOGP and leaves the loss mask, and aligned batches run
exactly upstream's tensor ops. With sequence parallel upstream also shifts every log-prob by the padding
it adds for the ranks; patched they equal the local forward's. ms-swift 3.x (swift.logps-alignment-3x)
is proven by the swift-3.5 and swift-3.12 matrix reproducers (matrix/reproducers.py), which CI's quick
matrix does not run.
"""

from __future__ import annotations

import json
import re

import pytest

from matrix.reproducers import REPRODUCERS
from tests.helpers import cell_python, run_script, smoke

CELL = "swift-4.6"
pytestmark = [pytest.mark.slow, pytest.mark.cells(CELL)]  # probes and rollouts in the swift-4.6 cell


@pytest.fixture(scope="module")
def checks(model_dir) -> dict:
    """tests/swift_logps_checks.py's measurements: swift's own batches, before and after apply()."""
    completed = run_script(cell_python(CELL), "tests/swift_logps_checks.py", str(model_dir))
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _upstream_pattern(reproducer_id: str) -> str:
    return next(r.upstream for r in REPRODUCERS if r.id == reproducer_id)


@pytest.mark.parametrize("layout", ["batch", "padding_free"])
def test_aligned_batches_run_exactly_upstreams_tensor_ops(checks, layout):
    aligned = checks[f"aligned_{layout}"]
    assert aligned["logits_to_keep_below_length"]
    assert aligned["ops"] > 0
    assert aligned == {**aligned, "mask_identical": True, "seq_lengths_identical": True, "log_probs_identical": True}
    assert aligned["same_tensor_ops"], "patched log-prob call ran other tensor ops than upstream's (allocations)"


@pytest.mark.parametrize("layout", ["batch", "padding_free"])
def test_full_length_row_gets_keep_columns_and_leaves_the_loss_mask(checks, layout):
    full = checks[f"full_length_{layout}"]
    assert full["logits_to_keep_is_length"] and full["upstream_mask_counts_the_token"]
    rows, keep = full["shape"]
    assert full["entropies_shape"] == [rows, keep]
    assert full["token_holds"] in (0.0, [0.0] * rows)
    assert full["rest_equals_shorter_keep"], "columns a logit predicts differ from upstream's K = L - 1 result"
    assert full["mask_is_swifts_minus_the_token"]


def test_upstream_fails_the_gather_on_the_same_batch(checks):
    error = checks["upstream_full_length_error"]
    assert error and re.search(_upstream_pattern("labels-from-column-0-swift4"), error), error


def test_rollout_logprobs_are_placed_before_the_token_is_cleared(checks):
    # vLLM's log-probs count every completion token; clearing the mask first would make swift drop them.
    assert checks["upstream_rollout_logps_placed"]
    assert checks["patched_rollout_logps_placed"] and checks["patched_rollout_mask_cleared"]


def test_only_the_4x_patch_applies_on_ms_swift_4(checks):
    assert checks["statuses"]["swift.logps-alignment"] == "applied"
    assert checks["statuses"]["swift.logps-alignment-3x"] == "outside version window"


@pytest.mark.parametrize(
    ("reproducer_id", "settings"),
    [
        ("labels-from-column-0-swift4", ()),
        ("padding-free-bf16-swift4", ("torch_dtype=bfloat16", "bf16=false", "padding_free=true")),
        # 2 CPU processes; upstream's log-probs come back shifted by the padding for the 2 ranks.
        ("sequence-parallel-padding-swift4", ("sequence_parallel_size=2",)),
    ],
)
def test_probe_through_swifts_rollout_fails_upstream_and_passes_patched(model_dir, tmp_path, reproducer_id, settings):
    plain = smoke(CELL, "plain", model_dir, tmp_path, *settings, script="probe_logps_swift.py")
    assert plain["status"] == "error"
    assert re.search(_upstream_pattern(reproducer_id), plain["error"]), plain["error"][:2000]
    patched = smoke(CELL, "patched", model_dir, tmp_path, *settings, script="probe_logps_swift.py")
    assert patched["status"] == "ok", patched["error"]
    assert "cleared from the loss mask" in patched["summary"]
