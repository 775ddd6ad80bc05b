"""The watchdog's diagnosis (a pure function of the evidence) and its settings from the environment.

The real runs that trigger it (constant reward, lr 0, bf16 weights at lr 1e-6, ZeRO-3) are in
tests/test_learning_watchdog.py and the matrix.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grpo_compat.catalogue.log_matching import explain
from grpo_compat.core.errors import GRPOSettingsError
from grpo_compat.fixes.watchdog import Evidence, WatchdogSettings, diagnose, diverged, truncation

SETTINGS = WatchdogSettings()


def healthy(**changes) -> Evidence:
    evidence = Evidence(
        trainable_elements=1000,
        sampled_elements=100,
        changed_elements=99,
        optimizer_steps=2,
        trainer_steps=2,
        learning_rates=[1e-5, 1e-5],
        grad_norms=[0.3, 0.2],
        kls=[0.0, 0.01],
        zero_spread=[False, False],
    )
    for name, value in changes.items():
        setattr(evidence, name, value)
    return evidence


def test_a_healthy_run_gets_no_finding():
    assert diagnose(healthy(), SETTINGS) is None


def test_unchanged_weights_with_constant_rewards_blame_zero_advantages():
    finding = diagnose(healthy(changed_elements=0, grad_norms=[0.0, 0.0], zero_spread=[True, True]), SETTINGS)
    assert "same reward" in finding.cause and "advantage" in finding.cause
    assert "0 of 100 sampled weight elements changed" in finding.problem


def test_learning_rate_zero_is_named_before_anything_else():
    finding = diagnose(healthy(changed_elements=0, learning_rates=[0.0, 0.0]), SETTINGS)
    assert finding.cause == "the learning rate is 0"


def test_bf16_weights_moving_too_little_blame_precision():
    finding = diagnose(healthy(changed_elements=24, low_precision_weights=True), SETTINGS)
    assert "bf16" in finding.cause and "float32" in finding.fix


def test_optimizer_that_never_stepped_blames_the_accumulation_boundary():
    finding = diagnose(healthy(changed_elements=0, optimizer_steps=0), SETTINGS)
    assert "accumulation" in finding.cause and "GradientAccumulationPlugin" in finding.cause


def test_no_trainable_parameters_is_reported_as_frozen():
    assert "frozen" in diagnose(healthy(trainable_elements=0), SETTINGS).cause


def test_a_run_of_zero_spread_steps_is_reported_even_when_weights_move():
    settings = WatchdogSettings(zero_spread_steps=3)
    assert diagnose(healthy(zero_spread=[False, True, True]), settings) is None
    finding = diagnose(healthy(zero_spread=[False, True, True, True]), settings)
    assert "3 optimizer steps in a row" in finding.problem


def test_zero_reward_spread_is_no_stall_where_a_teacher_gives_the_advantage():
    # ms-swift >= 4.4 OPD-RL (--teacher_model on GRPO): rewards are 0 by design, the teacher's log-ratio teaches.
    spreadless = dict(zero_spread=[True] * SETTINGS.zero_spread_steps, optimizer_steps=4, trainer_steps=4)
    assert diagnose(healthy(**spreadless), SETTINGS) is not None  # without a teacher: a stall
    assert diagnose(healthy(teacher_signal=True, **spreadless), SETTINGS) is None
    # Weights that did not move are still reported, without blaming the reward spread.
    finding = diagnose(healthy(teacher_signal=True, changed_elements=0, **spreadless), SETTINGS)
    assert finding is not None and "same reward" not in finding.cause


def test_weights_moved_by_the_moe_router_loss_alone_are_named_with_its_coefficient():
    # trl >= 1.7 adds the router load-balancing loss on a mixture of experts (census row 41): with zero advantages
    # the weights still move, and that is no learning from the rewards.
    spreadless = dict(zero_spread=[True] * SETTINGS.zero_spread_steps, optimizer_steps=4, trainer_steps=4)
    finding = diagnose(healthy(router_aux_loss_coef=0.001, **spreadless), SETTINGS)
    assert "router load-balancing loss" in finding.problem and "router_aux_loss_coef=0.001" in finding.problem
    assert "same reward" in finding.cause and "KL stays 0" not in finding.cause
    # The same evidence without the router loss: the reward is blamed, the router is not named.
    plain = diagnose(healthy(**spreadless), SETTINGS)
    assert "router" not in plain.message() and "KL stays 0" in plain.cause
    # A mixture of experts whose rewards spread is no stall.
    assert diagnose(healthy(router_aux_loss_coef=0.001), SETTINGS) is None


def test_unchanged_weights_after_real_optimizer_steps_name_no_cause_the_evidence_does_not_show():
    # trl's own tests: the optimizer stepped, nothing was logged, and the watchdog saw no reward metrics.
    finding = diagnose(healthy(changed_elements=0, grad_norms=[], zero_spread=[], learning_rates=[]), SETTINGS)
    assert "accumulation" not in finding.cause and "DeepSpeed" not in finding.fix
    assert finding.cause == "not determined from what the watchdog could see"
    assert "seen: the optimizer stepped 2 times" in finding.problem
    assert "not seen: the learning rate, the gradients, the rewards" in finding.problem


ZERO_GRADIENTS = {"changed_elements": 0, "grad_norms": [0.0, 0.0]}
ALL_CUT = {"truncated": [1.0, 1.0], "max_completion_length": 2}


def test_zero_gradients_with_reward_spread_blame_peft_checkpointing_only_on_a_peft_run_with_it():
    peft = diagnose(healthy(**ZERO_GRADIENTS, zero_spread=[False, False], peft_with_checkpointing=True), SETTINGS)
    assert peft.cause.startswith("the loss does not reach the trainable parameters (PEFT")
    for other in ({}, {"masks_truncated": True, **ALL_CUT}):
        finding = diagnose(healthy(**ZERO_GRADIENTS, zero_spread=[False, False], **other), SETTINGS)
        assert "PEFT" not in finding.cause + finding.fix, finding


def test_zero_gradients_with_every_completion_cut_and_masked_blame_the_masking():
    masked = diagnose(healthy(**ZERO_GRADIENTS, zero_spread=[False, False], masks_truncated=True, **ALL_CUT), SETTINGS)
    assert "mask_truncated_completions=True leaves truncated completions out of the loss" in masked.cause
    assert "max_completion_length=2" in masked.cause and "mask_truncated_completions=False" in masked.fix
    # Whatever the rewards did: flat rewards too leave no token in the loss.
    flat = diagnose(healthy(**ZERO_GRADIENTS, zero_spread=[True, True], masks_truncated=True, **ALL_CUT), SETTINGS)
    assert "mask_truncated_completions=True" in flat.cause
    for other in ({"masks_truncated": False, **ALL_CUT}, {"masks_truncated": True, "truncated": [0.2, 0.3]}):
        finding = diagnose(healthy(**ZERO_GRADIENTS, zero_spread=[False, False], **other), SETTINGS)
        assert "mask_truncated_completions" not in finding.cause, finding


def test_zero_gradients_with_reward_spread_and_no_other_evidence_blame_nothing_and_say_what_was_seen():
    finding = diagnose(healthy(**ZERO_GRADIENTS, zero_spread=[False, False]), SETTINGS)
    assert finding.cause == "not determined from what the watchdog could see"
    assert "reward spread in 2 of 2 batches" in finding.problem


def test_all_none_rewards_are_named_as_unscored():
    finding = diagnose(healthy(changed_elements=0, zero_spread=[], unscored=[True, True]), SETTINGS)
    assert finding.cause.startswith("no completion was scored")


def test_inf_nan_is_named_at_its_step_with_the_reward_as_cause_only_when_a_reward_was_inf():
    assert diverged(healthy()) is None
    from_reward = diverged(
        healthy(nonfinite=["the gradients", "the rewards"], nonfinite_step=3, infinite_rewards=[True])
    )
    assert from_reward.message().startswith("GRPO training diverged: inf / NaN at optimizer step 3: the gradients")
    assert "a reward function returned inf" in from_reward.cause
    from_update = diverged(healthy(nonfinite=["the sampled weights"], nonfinite_step=1, learning_rates=[0.5]))
    assert "learning rate too high for this model (learning_rate 0.5)" in from_update.cause


def test_truncation_is_named_after_five_steps_in_a_row_of_nearly_all_completions_cut():
    assert truncation(healthy(truncated=[1.0, 1.0, 0.5, 1.0, 1.0, 1.0, 1.0]), SETTINGS) is None
    finding = truncation(healthy(truncated=[0.96] * 5, max_completion_length=256), SETTINGS)
    assert "hit max_completion_length=256 in every batch of 5 optimizer steps in a row" in finding.problem


def test_zero_advantages_while_every_completion_is_cut_blame_the_cut_when_the_dry_run_saw_rewards_vary():
    finding = diagnose(healthy(changed_elements=0, zero_spread=[True, True], constant_rewards=[], **ALL_CUT), SETTINGS)
    assert finding.cause.startswith("every completion was cut at max_completion_length=2")
    assert finding.fix.startswith("raise max_completion_length")


def test_zero_advantages_of_a_reward_constant_on_the_dry_run_blame_the_reward_not_the_cut():
    evidence = healthy(changed_elements=0, zero_spread=[True, True], constant_rewards=["constant_reward"], **ALL_CUT)
    finding = diagnose(evidence, SETTINGS)
    assert finding.cause.startswith("every completion of a prompt got the same reward")
    assert "'constant_reward'" in finding.cause and "max_completion_length" not in finding.fix


def test_zero_advantages_while_every_completion_is_cut_without_a_dry_run_name_both_causes():
    finding = diagnose(healthy(changed_elements=0, zero_spread=[True, True], **ALL_CUT), SETTINGS)
    assert finding.cause.startswith("either every completion was cut at max_completion_length=2")
    assert "or the reward gives every completion the same value whatever its text" in finding.cause


def test_zero_advantages_with_completions_that_finish_blame_the_reward_alone():
    for constant in (None, [], ["r"]):
        evidence = healthy(changed_elements=0, zero_spread=[True, True], constant_rewards=constant, truncated=[0.1])
        finding = diagnose(evidence, SETTINGS)
        assert finding.cause.startswith("every completion of a prompt got the same reward")
        assert "max_completion_length" not in finding.cause


@given(
    st.builds(
        Evidence,
        trainable_elements=st.integers(0, 10**9),
        sampled_elements=st.integers(0, 10**4),
        changed_elements=st.integers(0, 10**4),
        low_precision_weights=st.booleans(),
        optimizer_steps=st.none() | st.integers(0, 10),
        trainer_steps=st.integers(0, 10),
        learning_rates=st.lists(st.floats(allow_nan=True)),
        grad_norms=st.lists(st.floats(allow_nan=True)),
        zero_spread=st.lists(st.booleans()),
        truncated=st.lists(st.floats(0, 1)),
        unscored=st.lists(st.booleans()),
        infinite_rewards=st.lists(st.booleans()),
    )
)
def test_diagnosis_never_raises_and_every_finding_says_what_to_change(evidence):
    finding = diagnose(evidence, SETTINGS)
    if finding is not None:
        assert finding.problem and finding.cause and finding.fix
        assert finding.message().startswith("GRPO is not learning: ")
    for other in (diverged(evidence), truncation(evidence, SETTINGS)):
        assert other is None or (other.problem and other.cause and other.fix)


def test_settings_come_from_the_environment_and_bad_values_are_named():
    settings = WatchdogSettings.from_env({"GRPO_COMPAT_WATCHDOG": "stop", "GRPO_COMPAT_WATCHDOG_STEPS": "4"})
    assert (settings.mode, settings.check_after_steps) == ("stop", 4)
    with pytest.raises(GRPOSettingsError, match="GRPO_COMPAT_WATCHDOG='loud' is not one of warn, stop, off"):
        WatchdogSettings.from_env({"GRPO_COMPAT_WATCHDOG": "loud"})
    with pytest.raises(GRPOSettingsError, match=r"GRPO_COMPAT_WATCHDOG_MIN_CHANGED='2'.*between 0.0 and 1.0"):
        WatchdogSettings.from_env({"GRPO_COMPAT_WATCHDOG_MIN_CHANGED": "2"})


def test_explain_names_the_moe_router_record_from_the_watchdogs_message_and_not_on_a_dense_model():
    spreadless = dict(zero_spread=[True] * SETTINGS.zero_spread_steps, optimizer_steps=4, trainer_steps=4)
    versions = {"trl": "1.16.0"}
    for coefficient, named in ((0.001, True), (0.0, False)):
        message = diagnose(healthy(router_aux_loss_coef=coefficient, **spreadless), SETTINGS).message()
        found = {m.failure.id for m in explain(f"TrainingStalledError: {message}", versions, installed={}).matches}
        assert ("moe-router-aux-loss-default" in found) is named and "no-learning" in found
