"""trl.num-generations-check on the installed trl: num_generations=1 is refused at config time.

The same reproducer runs on trl 0.16.1 in tests/test_smoke_runs.py (real cell env).
"""

from __future__ import annotations

import pytest

import grpo_compat
from grpo_compat.errors import GRPOSettingsError
from grpo_compat.validation import single_generation_problem

CPU = {"output_dir": "unused", "use_cpu": True, "bf16": False, "report_to": "none"}


@pytest.fixture
def patched():
    grpo_compat.revert()
    grpo_compat.apply(only=["trl.num-generations-check"])
    from trl import GRPOConfig

    yield GRPOConfig
    grpo_compat.revert()


@pytest.mark.parametrize("batch", [1, 2, 3, 8])
def test_single_generation_is_refused_with_the_reason_and_a_setting_that_works(patched, batch):
    with pytest.raises(GRPOSettingsError) as refused:
        patched(**CPU, num_generations=1, per_device_train_batch_size=batch)
    message = str(refused.value)
    assert "at least 2 completions per prompt" in message
    assert "advantage is 0" in message
    suggested = int(message.split("--per_device_train_batch_size ")[1].rstrip(").").split()[0])
    assert "--num_generations 2" in message
    config = patched(**CPU, num_generations=2, per_device_train_batch_size=suggested)  # the suggestion trains
    assert config.num_generations == 2


def test_the_refusal_is_a_value_error_so_upstream_handlers_still_catch_it(patched):
    with pytest.raises(ValueError):
        patched(**CPU, num_generations=0, per_device_train_batch_size=2)


def test_valid_settings_build_the_same_config_as_upstream(patched):
    settings = {**CPU, "num_generations": 4, "per_device_train_batch_size": 4, "seed": 7}
    with_patch = patched(**settings).to_dict()
    grpo_compat.revert()
    from trl import GRPOConfig

    assert GRPOConfig(**settings).to_dict() == with_patch


@pytest.mark.parametrize("value", [None, "2", 2.0, True, 5])
def test_validator_ignores_what_is_not_a_too_small_int(value):
    assert single_generation_problem(value, 2) is None


@pytest.mark.parametrize("batch", [None, "x", -3, 0, 1, 7])
def test_suggested_batch_is_always_an_even_count_of_at_least_two(batch):
    message = single_generation_problem(1, batch)
    suggested = int(message.split("per_device_train_batch_size=")[1].split()[0])
    assert suggested >= 2 and suggested % 2 == 0
