"""trl.learning-watchdog on real GRPO runs (trl 1.16 in this env): runs built to learn nothing are named
with the right cause; a healthy run is never flagged and trains to the same weights as without it.

Stop mode (GRPO_COMPAT_WATCHDOG=stop) on these cases, on 1 and 2 processes (ZeRO-3) and in ms-swift, is the
matrix reproducers' (watchdog-*): the run ends with the diagnosis, in every cell of their windows.
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
        (("--weights-dtype", "bfloat16"), ("learning_rate=1e-6",), "held in bf16/fp16 without fp32 master weights"),
    ],
    ids=["constant-reward", "bf16-weights-lr-1e-6"],
)
def test_a_run_that_learns_nothing_is_named_once_with_its_cause(flags, settings, cause, model_dir, tmp_path):
    result = patched_run(model_dir, tmp_path, *settings, flags=flags)
    assert result["status"] == "ok", result["error"]
    warnings = result["watchdog_warnings"]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("GRPO is not learning: ") and cause in warnings[0]


def test_learning_rate_zero_is_warned_of_once_in_warn_mode(model_dir, tmp_path):
    # stop mode refuses it when train() is called: the matrix reproducer watchdog-lr-zero (this cell's and others')
    # warn (the default): a run measuring rewards or gradients may mean it; said once, before the first generation
    warned = patched_run(model_dir, tmp_path, "learning_rate=0")
    assert warned["status"] == "ok" and warned["steps"] == 3, warned["error"]
    (warning,) = warned["watchdog_warnings"]
    assert warning.startswith("GRPO cannot change a weight: learning_rate=0") and "the run goes on" in warning


def test_a_healthy_run_is_never_flagged_and_the_watchdog_changes_no_weight(model_dir, tmp_path):
    # The plain run's weights are the watched run's: this cell's matrix pair `single` (its judge also fails a run
    # the watchdog warned on); here, the same run with the watchdog off.
    watched = patched_run(model_dir, tmp_path)
    unwatched = patched_run(model_dir, tmp_path, flags=("--watchdog", "off"))
    assert watched["watchdog_warnings"] == [] and watched["all_trainable_params_changed"]
    assert watched["weights_sha256"] == unwatched["weights_sha256"]
    statuses = {p["id"]: p["status"] for p in watched["grpo_compat"]["patches"]}
    assert statuses["trl.learning-watchdog"] == "applied"


def test_completions_cut_at_the_limit_for_five_steps_are_named_with_the_limit(model_dir, tmp_path):
    result = patched_run(model_dir, tmp_path, "max_completion_length=2", flags=("--steps", "6"))
    assert result["status"] == "ok", result["error"]
    assert result["watchdog_warnings"] == [
        "GRPO completions are truncated: at least 95% of completions hit max_completion_length=2 in every batch of "
        "5 optimizer steps in a row. Likely cause: the model does not finish within the limit, so every reward "
        "judges cut-off text. What to change: raise max_completion_length, or reward (or "
        "mask_truncated_completions) completions that stop early."
    ]


def test_a_constant_reward_with_every_completion_cut_is_blamed_on_the_reward_not_the_limit(model_dir, tmp_path):
    # The dry run saw the reward give different texts one value: a longer max_completion_length cannot help.
    result = patched_run(model_dir, tmp_path, "max_completion_length=2", flags=("--reward", "constant"))
    (warning,) = result["watchdog_warnings"]
    assert "Likely cause: every completion of a prompt got the same reward" in warning
    assert "reward function 'constant_reward' gave different completions" in warning
    assert "raise max_completion_length" not in warning


def test_every_completion_cut_and_masked_is_blamed_on_the_masking_not_on_peft(model_dir, tmp_path):
    result = patched_run(model_dir, tmp_path, "max_completion_length=2", "mask_truncated_completions=True")
    assert result["status"] == "ok", result["error"]
    (warning,) = result["watchdog_warnings"]
    assert "mask_truncated_completions=True leaves truncated completions out of the loss" in warning
    assert "PEFT" not in warning


def test_rewards_that_are_all_none_are_named_as_unscored_not_as_an_optimizer_fault(model_dir, tmp_path):
    # trl 1.16 masks rows no reward function scored: nothing moves, and the reward logged is NaN.
    result = patched_run(model_dir, tmp_path, flags=("--reward", "none"))
    (warning,) = result["watchdog_warnings"]
    assert "no completion was scored: every reward function returned None" in warning


def test_trls_sampling_error_after_an_infinite_reward_is_followed_by_the_diagnosis(model_dir, tmp_path):
    # trl 0.16: the inf reward's NaN advantages reach the weights at step 1; the next generation cannot sample.
    result = smoke("trl-0.16", "patched", model_dir, tmp_path, flags=("--reward", "inf"))
    assert result["error"].startswith("RuntimeError: probability tensor contains either `inf`, `nan`")
    diverged, follows = result["watchdog_warnings"]
    assert diverged.startswith("GRPO training diverged: inf / NaN at optimizer step 1: the gradients, the sampled")
    assert "Likely cause: a reward function returned inf" in diverged
    sampling = "Generation failed to sample (probability tensor contains either inf, nan or element < 0)"
    assert follows == f"{sampling}; it follows from this: {diverged}"
