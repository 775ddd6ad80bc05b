"""trl.learning-watchdog on real GRPO runs (trl 1.16 in this env): runs built to learn nothing are named
with the right cause; a healthy run is never flagged and trains to the same weights as without it.

ZeRO-3 (2 processes) and ms-swift runs of the same cases are matrix reproducers (watchdog-*).
"""

from __future__ import annotations

import pytest

from tests.helpers import smoke

pytestmark = pytest.mark.slow  # real GRPO runs in a cell env

CELL = "trl-1.16"


def patched_run(model_dir, tmp_path, *settings: str, flags: tuple = ()) -> dict:
    return smoke(CELL, "patched", model_dir, tmp_path, *settings, flags=flags)


@pytest.mark.parametrize(
    ("flags", "settings", "cause"),
    [
        (("--reward", "constant"), (), "every completion of a prompt got the same reward"),
        ((), ("learning_rate=0",), "the learning rate is 0"),
        (("--weights-dtype", "bfloat16"), ("learning_rate=1e-6",), "held in bf16/fp16 without fp32 master weights"),
    ],
    ids=["constant-reward", "lr-zero", "bf16-weights-lr-1e-6"],
)
def test_a_run_that_learns_nothing_is_named_once_with_its_cause(flags, settings, cause, model_dir, tmp_path):
    result = patched_run(model_dir, tmp_path, *settings, flags=flags)
    assert result["status"] == "ok", result["error"]
    warnings = result["watchdog_warnings"]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("GRPO is not learning: ") and cause in warnings[0]


def test_stop_mode_ends_the_run_with_the_diagnosis(model_dir, tmp_path):
    result = patched_run(model_dir, tmp_path, flags=("--reward", "constant", "--watchdog", "stop"))
    first_line = result["error"].splitlines()[0]
    assert first_line.startswith("TrainingStalledError: GRPO is not learning: after 2 optimizer steps 0 of ")
    assert result["steps"] is None  # stopped inside train()


def test_a_healthy_run_is_never_flagged_and_the_watchdog_changes_no_weight(model_dir, tmp_path):
    plain = smoke(CELL, "plain", model_dir, tmp_path)
    watched = patched_run(model_dir, tmp_path)
    unwatched = patched_run(model_dir, tmp_path, flags=("--watchdog", "off"))
    assert watched["watchdog_warnings"] == [] and watched["all_trainable_params_changed"]
    assert plain["weights_sha256"] == watched["weights_sha256"] == unwatched["weights_sha256"]
    statuses = {p["id"]: p["status"] for p in watched["grpo_compat"]["patches"]}
    assert statuses["trl.learning-watchdog"] == "applied"
