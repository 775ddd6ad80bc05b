"""A grpo_compat refusal's traceback, as Python prints it under every launcher: the user's and upstream's frames,
the message, and no frame of grpo_compat's engine (its wrappers, its checks). Real runs on the tiny model.

The settings refusal (GRPOSettingsError) is checked the same way under every launcher, DeepSpeed's and
`trl grpo --config` included, by tests/test_zero_code_run.py's refusals.
"""

from __future__ import annotations

import sys

import pytest

from tests import test_zero_code_run
from tests.helpers import TRACEBACK_FRAME, grpo_compat_frames, run_python
from tests.test_zero_code_run import USER_SCRIPT, launch_command, run

tiny_model = test_zero_code_run.tiny_model  # its module fixture, built once per file here
SHORT_REWARD = "RewardFunctionError: reward function 'short_reward' returned 1 rewards for"
TOO_FEW_GENERATIONS = "GRPOSettingsError: GRPO needs at least 2 completions per prompt"


@pytest.mark.slow
@pytest.mark.parametrize("launcher", ["python", "torchrun-2", "accelerate-2"])
def test_a_short_reward_refusal_shows_no_grpo_compat_frame_under_every_launcher(launcher, tiny_model, tmp_path):
    script = [str(USER_SCRIPT), "--model", tiny_model, "--output", str(tmp_path / "r.json"), "--short-reward"]
    refused = run(*launch_command(launcher), *script, cwd=tmp_path)
    assert refused.returncode != 0 and SHORT_REWARD in refused.stderr, refused.stderr[-3000:]
    assert not grpo_compat_frames(refused.stderr), refused.stderr[-6000:]
    assert f'{USER_SCRIPT.name}", line' in refused.stderr  # the user's own frame stays


@pytest.mark.slow
def test_grpo_compat_traceback_full_keeps_grpo_compats_frames(tiny_model, tmp_path):
    script = [str(USER_SCRIPT), "--model", tiny_model, "--output", str(tmp_path / "r.json"), "--num-generations", "1"]
    debugging = run(sys.executable, *script, env={"GRPO_COMPAT_TRACEBACK": "full"}, cwd=tmp_path)
    assert TOO_FEW_GENERATIONS in debugging.stderr and grpo_compat_frames(debugging.stderr)


def test_a_refusal_caught_in_process_keeps_the_users_frame_and_its_message_only():
    """Without the excepthook (a notebook, a logger): the wrappers already re-raise without grpo_compat's frames."""
    result = run_python(
        """
        import traceback
        import grpo_compat

        grpo_compat.apply(only=["trl.grpo-config-check"])
        from trl import GRPOConfig

        def users_config():
            return GRPOConfig(output_dir="out", num_generations=1, use_cpu=True, report_to="none")

        try:
            users_config()
        except grpo_compat.GRPOSettingsError:
            traceback.print_exc()
        """
    )
    assert TOO_FEW_GENERATIONS.split(": ", 1)[1] in result.stderr, result.stderr[-3000:]
    assert "users_config" in result.stderr
    # at most the outermost wrapper's own raise remains (the excepthook drops it when Python prints the crash)
    assert len(grpo_compat_frames(result.stderr)) <= 1 and len(TRACEBACK_FRAME.findall(result.stderr)) <= 4
