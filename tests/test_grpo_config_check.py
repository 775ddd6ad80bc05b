"""trl.grpo-config-check and trl.grpo-trainer-check on the installed trl (real GRPOConfig / GRPOTrainer).

The same checks run on trl 0.16.1 ... 1.16 and ms-swift 3.x cells through matrix/reproducers.py.
"""

from __future__ import annotations

import re

import pytest

import grpo_compat
from grpo_compat.core.errors import GRPOSettingsError

CPU = {"output_dir": "unused", "use_cpu": True, "bf16": False, "report_to": "none"}


@pytest.fixture
def trl_patched():
    grpo_compat.revert()
    grpo_compat.apply(only=["trl.grpo-config-check", "trl.grpo-trainer-check"])
    import trl

    yield trl
    grpo_compat.revert()


def suggested_settings(message: str) -> list[dict[str, int]]:
    """The settings of each '(--a 1 --b 2)' fix in a message."""
    return [
        {k: int(v) for k, v in re.findall(r"--(\w+) (\d+)", flags)} for flags in re.findall(r"\((--[^)]*)\)", message)
    ]


@pytest.mark.parametrize(
    "settings",
    [
        {"num_generations": 1, "per_device_train_batch_size": 1},
        {"num_generations": 1, "per_device_train_batch_size": 3},
        {"num_generations": 4, "per_device_train_batch_size": 3},
        {"num_generations": 8, "per_device_train_batch_size": 2},
        {
            "num_generations": 4,
            "per_device_train_batch_size": 4,
            "eval_strategy": "steps",
            "per_device_eval_batch_size": 3,
        },
    ],
)
def test_refusal_names_the_rule_and_every_suggested_setting_builds_upstreams_config(trl_patched, settings):
    with pytest.raises(GRPOSettingsError) as refused:
        trl_patched.GRPOConfig(**CPU, **settings)
    message = str(refused.value)
    assert "Valid values: []" not in message and "Set " in message
    fixes = suggested_settings(message)
    assert fixes
    grpo_compat.revert()  # each fix must satisfy upstream itself, not only grpo_compat
    for fix in fixes:
        trl_patched.GRPOConfig(**CPU, **{**settings, **fix})


def test_single_generation_says_why_nothing_would_train(trl_patched):
    with pytest.raises(ValueError, match="in a group of one every advantage is 0 and nothing trains"):
        trl_patched.GRPOConfig(**CPU, num_generations=1, per_device_train_batch_size=2)


@pytest.mark.parametrize("bad", [None, "4", 0, -2, 2.5])
def test_bad_values_get_a_clear_message_not_a_traceback_from_inside(trl_patched, bad):
    with pytest.raises(GRPOSettingsError, match=r"num_generations must be a positive integer, got"):
        trl_patched.GRPOConfig(**CPU, num_generations=bad, per_device_train_batch_size=4)


def test_valid_settings_build_the_same_config_as_upstream(trl_patched):
    settings = {**CPU, "num_generations": 4, "per_device_train_batch_size": 4, "seed": 7}
    with_patch = trl_patched.GRPOConfig(**settings).to_dict()
    grpo_compat.revert()
    assert trl_patched.GRPOConfig(**settings).to_dict() == with_patch


def test_the_launch_world_size_is_counted(trl_patched, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(GRPOSettingsError, match=r"per_device_train_batch_size 1 x 2 process\(es\)"):
        trl_patched.GRPOConfig(**CPU, num_generations=3, per_device_train_batch_size=1)


def test_trainer_refuses_a_config_it_cannot_train_before_loading_the_model(trl_patched, monkeypatch):
    config = trl_patched.GRPOConfig(**CPU, num_generations=2, per_device_train_batch_size=2)
    config.num_generations = 3  # after the config check, as a config built before apply() would be
    import transformers

    loads = []
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", lambda *a, **k: loads.append(a))
    with pytest.raises(GRPOSettingsError, match="not a multiple of num_generations 3"):
        trl_patched.GRPOTrainer(model="tiny", reward_funcs=lambda completions, **kw: [0.0], args=config)
    assert loads == []
