"""trl.resume-generation-buffer on a real trl 0.16.1 install: a resume between two generation steps trains, and a
resume at a generation step gives upstream's weights, which are the uninterrupted run's (trl #3247)."""

from __future__ import annotations

import pytest

from tests.helpers import smoke

CELL = "trl-0.16"
RESUME = ("num_iterations=2",)


def resumed(mode: str, step: int, model_dir, tmp_path) -> dict:
    flags = ("--steps", "4", "--resume-from-step", str(step))
    return smoke(CELL, mode, model_dir, tmp_path, *RESUME, flags=flags)


@pytest.mark.slow
def test_a_resume_between_two_generation_steps_trains_the_remaining_steps_patched(model_dir, tmp_path):
    plain = resumed("plain", 1, model_dir, tmp_path)
    assert plain["status"] == "error"
    assert "TypeError: 'NoneType' object is not subscriptable" in plain["error"]
    patched = resumed("patched", 1, model_dir, tmp_path)
    assert patched["status"] == "ok", patched["error"]
    assert (patched["steps"], patched["resumed_steps_run"]) == (4, 3)


@pytest.mark.slow
def test_a_resume_at_a_generation_step_gives_the_uninterrupted_runs_weights_plain_and_patched(model_dir, tmp_path):
    plain = resumed("plain", 2, model_dir, tmp_path)
    patched = resumed("patched", 2, model_dir, tmp_path)
    for result in (plain, patched):
        assert result["status"] == "ok", result["error"]
        assert (result["steps"], result["resumed_steps_run"]) == (4, 2)
        assert result["weights_sha256"] == result["uninterrupted_weights_sha256"]
    assert patched["weights_sha256"] == plain["weights_sha256"]
