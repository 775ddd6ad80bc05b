"""trl.logps-alignment and trl.logps-trim-logits (KF-1) against real TRL installs: 1.16 (fused lm-head path,
3-tuple), 0.16 (tensor) and 0.19 (tensor; the window where trl dropped the logits trim, TRL #3681).

Each env runs tests/logps_cases.py once in a subprocess: TRL's own method on a tiny Qwen2 with a stand-in
trainer, and TRL's compute_loss on a real GRPOTrainer, plain first, then with grpo_compat applied.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from grpo_compat.fixes.alignment import UNPREDICTABLE_LOGP
from tests.helpers import REPO, cell_python

pytestmark = pytest.mark.slow  # probes trl's log-prob method in cell envs

LENGTH = 7  # tests/logps_cases.py: sequences of 7 tokens
ALIGNMENT_CELLS = ["trl-1.16", "trl-0.16", pytest.param("trl-0.19", marks=pytest.mark.cells("trl-0.19"))]
RESULT_KIND = {"trl-1.16": "3-tuple", "trl-0.16": "tensor", "trl-0.19": "tensor"}
PLAIN_FULL_LENGTH = {
    # trl 0.15-1.13: the gather error of the field reports; 1.15+: L - 1 columns instead of K.
    "trl-0.16": "expected index [2, 7, 1] to be no larger than self [2, 6, 97]",
    "trl-0.19": "expected index [2, 7, 1] to be no larger than self [2, 6, 97]",
    "trl-1.16": "returned (2, 6)",
}


def observe(cell: str, *args: str) -> dict:
    completed = subprocess.run(
        [cell_python(cell), str(REPO / "tests" / "logps_cases.py"), *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])  # DeepSpeed may print to stdout first


@pytest.fixture(scope="module", params=ALIGNMENT_CELLS)
def seen(request, tmp_path_factory) -> tuple[str, dict]:
    cell = request.param
    return cell, observe(cell, "alignment", str(tmp_path_factory.mktemp(f"tiny-{cell}")))


@pytest.fixture(scope="module")
def trim_seen() -> dict:
    return observe("trl-0.19", "trim")


def test_upstream_fails_when_logits_to_keep_equals_the_length(seen):
    cell, seen = seen
    assert PLAIN_FULL_LENGTH[cell] in seen["plain K=L"]
    assert seen["status"] == "applied"


@pytest.mark.parametrize("keep", [LENGTH, LENGTH + 2])
@pytest.mark.parametrize("how", ["positional", "keyword"])
def test_logits_to_keep_reaching_the_length_gives_k_columns_aligned_to_upstreams_result(seen, keep, how):
    cell, seen = seen
    result = seen[f"K={keep} {how}"]
    assert result["kind"] == RESULT_KIND[cell]
    assert result["shapes"][0] == [2, keep]
    # the last L-1 columns are upstream's own K = L-1 result; the ones no logit predicts hold the defined value
    assert result["predictable_equal"]
    assert result["unpredictable_values"] == [UNPREDICTABLE_LOGP]


def test_every_per_token_tensor_of_a_tuple_result_is_padded_and_the_rest_passes_through(seen):
    cell, seen = seen
    if RESULT_KIND[cell] == "tensor":
        pytest.skip("trl < 0.20 returns the log-probs alone")
    for keep in (LENGTH, LENGTH + 2):
        assert seen[f"K={keep} positional"]["shapes"] == [[2, keep], [2, keep], None]  # log-probs, entropies, aux
        assert seen[f"K={keep} entropies_equal"]


def test_aligned_calls_are_bit_identical_and_just_forwarded(seen):
    _, seen = seen
    assert seen[f"aligned K={LENGTH - 3} equal"]
    assert seen[f"aligned K={LENGTH - 1} equal"]
    # one upstream call, with the caller's very arguments, and upstream's own result object: nothing allocated
    assert seen["aligned call forwarded as is"]


def test_upstream_computes_the_predictable_columns_itself(seen):
    _, seen = seen
    assert seen["K=L upstream calls"] == [LENGTH - 1]


def test_a_sequence_with_nothing_to_predict_gets_a_clear_error(seen):
    _, seen = seen
    assert seen["one token"].startswith(
        "ValueError: logits_to_keep=1 over sequences of 1 token(s): no token has a logit"
    )


def test_loss_leaves_out_the_unpredictable_columns_and_keeps_the_attention(seen):
    _, seen = seen
    # Empty prompts: K = L. Upstream's compute_loss fails (gather error, or (B, L-1) against the mask).
    assert isinstance(seen["plain loss"], str) and "RuntimeError" in seen["plain loss"]
    patched = seen["patched loss"]
    # bnpo: -(sum of advantages over counted tokens) / count. Column 0 counted: -(5 - 2) / 7; left out: -(4 - 1) / 5.
    assert patched["loss"] == pytest.approx(-0.6)
    # the model still attended to the first completion token, as when the old log-probs were computed
    assert patched["attention_masks"] == [[[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]]]
    assert patched["caller_mask_untouched"]


def test_revert_puts_back_the_original_method(seen):
    _, seen = seen
    assert seen["reverted"]


@pytest.mark.cells("trl-0.19")
def test_model_ignoring_logits_to_keep_breaks_trl_0_19_plain(trim_seen):
    assert "must match the size of tensor b" in trim_seen["plain aligned"]


@pytest.mark.cells("trl-0.19")
def test_trim_patch_gives_the_log_probs_of_a_model_that_honours_logits_to_keep(trim_seen):
    assert trim_seen["statuses"] == {"trl.logps-alignment": "applied", "trl.logps-trim-logits": "applied"}
    assert trim_seen["trim alone aligned equal"]
    # alone it restores the trim only; K = L still needs trl.logps-alignment
    assert "Size does not match" in trim_seen["trim alone K=L"]
    expected = {
        "aligned_equal": True,
        "full_shape": [2, LENGTH],
        "full_predictable_equal": True,
        "full_unpredictable": [UNPREDICTABLE_LOGP],
    }
    assert trim_seen["all patches"] == expected


@pytest.mark.parametrize(
    "order", ["trl.logps-trim-logits then trl.logps-alignment", "trl.logps-alignment then trl.logps-trim-logits"]
)
@pytest.mark.cells("trl-0.19")
def test_trim_and_alignment_stack_in_either_order_and_revert_to_the_original(trim_seen, order):
    assert trim_seen[f"stacked {order}"] == trim_seen["all patches"]
    assert trim_seen[f"reverted {order}"]
    assert trim_seen["reverted all"]
