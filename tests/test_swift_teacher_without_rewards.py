"""GRPO with a teacher and no reward function on ms-swift < 4.4 is refused before any model loads (ms-swift #9928).

ms-swift 4.4 (#9641) trains it as on-policy distillation; before, swift's GRPOTrainer refuses it for want of a
reward after the policy and reference models loaded. swift.grpo-arguments-check refuses it while swift parses its
arguments, naming the upgrade. The plain failure and the refusal of both ways in (RLHFArguments in Python, `swift rlhf
--external_plugins`) are the matrix reproducers swift-teacher-without-rewards(-cli); 4.4's training is the pair
swift-opd-no-rewards.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from grpo_compat.core.errors import GRPOSettingsError
from grpo_compat.fixes.swift_settings import swift_settings, swift_settings_to_check
from grpo_compat.fixes.validation import GRPOSettings, refuse_unless_valid, rules_for, validate
from tests.helpers import cell_python, run_python

TEACHER_ONLY = GRPOSettings(has_teacher=True, has_rewards=False)


@pytest.mark.parametrize(("trl", "swift"), [("0.19.0", "3.6.0"), ("0.24.0", "3.12.6"), (None, "4.3.2")])
def test_a_teacher_without_rewards_before_ms_swift_4_4_is_an_error_naming_the_upgrade(trl, swift):
    findings = validate(TEACHER_ONLY, rules_for(trl, swift))
    assert [f.rule for f in findings] == ["teacher-without-rewards"]
    assert f"cannot train on ms-swift {swift}" in findings[0].message
    assert 'pip install "ms-swift>=4.4"' in findings[0].message
    assert "--reward_funcs" in findings[0].message


@pytest.mark.parametrize("swift", ["4.4.0", "4.6.0"])
def test_a_teacher_without_rewards_from_ms_swift_4_4_trains(swift):
    assert validate(TEACHER_ONLY, rules_for(None, swift)) == []


def test_before_ms_swift_3_6_there_is_no_teacher_to_check():
    # --teacher_model came with GKD in 3.6.0: swift's own parser refuses it before (swift.arguments-not-taken names it)
    assert validate(TEACHER_ONLY, rules_for("0.19.0", "3.5.3")) == []


@pytest.mark.parametrize(
    "arguments",
    [
        {"reward_funcs": ["accuracy"]},
        {"reward_model": ["/models/rm"]},
        {"use_vllm": True, "vllm_mode": "server"},  # the server's gym environment may score
        {"use_gym_env": True},  # ms-swift 4.3's explicit gym environment
    ],
)
def test_on_ms_swift_3_a_teacher_with_something_that_scores_is_accepted(arguments):
    swift_arguments = SimpleNamespace(rlhf_type="grpo", teacher_model="/models/teacher", **arguments)
    settings = swift_settings_to_check(swift_arguments, "3.12.6")
    assert settings.has_teacher and settings.has_rewards
    assert validate(settings, rules_for("0.24.0", "3.12.6")) == []


def test_on_ms_swift_3_the_check_reads_the_teacher_and_rewards_from_swifts_arguments():
    arguments = SimpleNamespace(rlhf_type="grpo", teacher_model="/models/teacher", reward_funcs=[], reward_model=None)
    settings = swift_settings_to_check(arguments, "3.12.6")
    assert settings == GRPOSettings(has_teacher=True, has_rewards=False)
    with pytest.raises(GRPOSettingsError, match=r"teacher_model and no reward function cannot train on ms-swift 3"):
        refuse_unless_valid(settings, rules_for("0.24.0", "3.12.6"))
    # Without a teacher the same arguments are swift's own plain GRPO failure, which grpo_compat leaves to swift.
    no_teacher = swift_settings_to_check(SimpleNamespace(rlhf_type="grpo", reward_funcs=[]), "3.12.6")
    assert validate(no_teacher, rules_for("0.24.0", "3.12.6")) == []


def test_the_refusal_does_not_hide_the_batch_rules_and_their_fix():
    # `grpo-compat check --swift` reads a mapping: both problems are named, the batch one with settings that pass.
    arguments = {"rlhf_type": "grpo", "teacher_model": "t", "num_generations": 3, "per_device_train_batch_size": 4}
    findings = validate(swift_settings(arguments, 1, "4.3.2"), rules_for(None, "4.3.2"))
    assert [f.rule for f in findings] == ["train-divisibility", "teacher-without-rewards"]
    assert findings[0].suggestions and not findings[1].suggestions


REAL_ARGUMENTS = """
import grpo_compat
grpo_compat.apply()
from swift.llm import RLHFArguments
for rewards in ({}, {"reward_funcs": ["format"]}):
    try:
        RLHFArguments(rlhf_type="grpo", model="/nonexistent/model", teacher_model="/nonexistent/teacher", **rewards)
    except Exception as error:
        print(type(error).__name__ + ": " + (str(error).splitlines() or [""])[0])
"""


@pytest.mark.slow
@pytest.mark.cells("swift-3.12")
def test_real_ms_swift_3_12_arguments_are_refused_before_the_model_lookup():
    env = {"MODELSCOPE_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": ""}
    result = run_python(REAL_ARGUMENTS, env=env, python=cell_python("swift-3.12"))
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 2, result.stdout + result.stderr[-3000:]
    assert lines[0].startswith(
        "GRPOSettingsError: GRPO with teacher_model and no reward function cannot train on ms-swift 3.12.6"
    )
    # With a reward function grpo_compat stands back: what fails is swift's own lookup of the missing model.
    assert "GRPOSettingsError" not in lines[1]


def test_the_matrix_plans_the_refusal_before_4_4_and_the_distillation_pair_from_4_4():
    from matrix.runs import planned_runs

    def kinds(swift: str) -> set[str]:
        return {run.kind for run in planned_runs({"trl": "0.24.0", "ms-swift": swift}, "cpu")}

    reproducers = {"repro:swift-teacher-without-rewards", "repro:swift-teacher-without-rewards-cli"}
    assert reproducers <= kinds("3.12.6") and not reproducers & (kinds("4.6.0") | kinds("3.5.3"))
    assert "swift-opd-no-rewards" in kinds("4.6.0") and "swift-opd-no-rewards" not in kinds("3.12.6")
