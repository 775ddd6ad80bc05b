"""A GRPO run that cannot change a weight is refused before its first generation (grpo_compat.fixes.weights_move),
and the watchdog names why the weights did not move after the first step where the optimizer cannot move them.

The pre-flight's inputs are what a trainer holds (model, args, optimizer): the fast tests give it real torch models
and optimizers; the slow ones run trl 1.16.0 + peft 0.21.2 (cell trl-1.16-peft), N14 / trl #6700 itself.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from grpo_compat.fixes.watchdog import Evidence, WatchdogSettings, diagnose
from grpo_compat.fixes.weights_move import CANNOT_TRAIN, why_no_weight_can_move
from tests.helpers import smoke

torch = pytest.importorskip("torch")

PEFT_CELL = "trl-1.16-peft"


def trainer_holding(model, learning_rate=1e-5, optimizer=None, scheduler=None):
    return SimpleNamespace(
        model=model,
        args=SimpleNamespace(learning_rate=learning_rate),
        optimizer=optimizer,
        lr_scheduler=scheduler,
        optimizer_cls_and_kwargs=None,
    )


def test_a_trainable_model_with_a_learning_rate_is_let_through():
    assert why_no_weight_can_move(trainer_holding(torch.nn.Linear(4, 4))) is None


def test_a_model_with_every_parameter_frozen_is_refused_naming_the_freeze():
    model = torch.nn.Linear(4, 4).requires_grad_(False)
    found = why_no_weight_can_move(trainer_holding(model))
    finding = found.finding
    assert finding.headline == CANNOT_TRAIN and not found.may_be_meant
    assert "every parameter is frozen" in finding.problem and "requires_grad_(True)" in finding.fix


def test_learning_rate_zero_is_found_before_any_step_as_a_run_that_may_mean_it():
    found = why_no_weight_can_move(trainer_holding(torch.nn.Linear(4, 4), learning_rate=0))
    assert found.finding.problem.startswith("learning_rate=0") and found.finding.fix == "set learning_rate > 0"
    assert found.may_be_meant  # measuring rewards or gradients: refused in stop mode only


def test_an_optimizer_of_other_parameters_is_refused_and_one_of_the_policy_is_not():
    model = torch.nn.Linear(4, 4)
    elsewhere = torch.optim.AdamW(torch.nn.Linear(4, 4).parameters(), lr=1e-3)
    finding = why_no_weight_can_move(trainer_holding(model, optimizer=elsewhere)).finding
    assert "holds 2 parameters, none of the policy's 2 trainable ones" in finding.problem
    assert why_no_weight_can_move(trainer_holding(model, optimizer=torch.optim.AdamW(model.parameters()))) is None


def test_a_given_optimizer_at_learning_rate_zero_is_refused_unless_a_scheduler_drives_it():
    model = torch.nn.Linear(4, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    assert "learning rate 0" in why_no_weight_can_move(trainer_holding(model, optimizer=optimizer)).finding.problem
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    assert why_no_weight_can_move(trainer_holding(model, optimizer=optimizer, scheduler=scheduler)) is None


def evidence(**fields) -> Evidence:
    seen = dict(trainable_elements=100, sampled_elements=100, changed_elements=0, optimizer_steps=1, trainer_steps=1)
    seen.update(learning_rates=[1e-5], grad_norms=[0.3])
    return Evidence(**{**seen, **fields})


def test_no_trainable_parameter_with_an_adapter_loaded_for_inference_names_is_trainable():
    finding = diagnose(evidence(trainable_elements=0, frozen_adapters=["default", "ref"]), WatchdogSettings())
    assert "PEFT adapter 'default', 'ref' was loaded for inference" in finding.problem
    assert finding.fix == "load it with PeftModel.from_pretrained(model, path, is_trainable=True)"


def test_an_empty_optimizer_is_named_before_the_gradients():
    finding = diagnose(evidence(optimizer_parameters=0, grad_norms=[0.0]), WatchdogSettings())
    assert finding.problem.endswith("the optimizer holds no parameter") and "is_trainable" in finding.cause


def test_an_optimizer_holding_other_parameters_is_named_when_nothing_moved():
    settings = WatchdogSettings()
    finding = diagnose(evidence(optimizer_parameters=6, sample_outside_optimizer=True), settings)
    assert "the optimizer holds 6 parameters, none of the sampled trainable ones" in finding.problem
    assert (
        diagnose(evidence(optimizer_parameters=6, sample_outside_optimizer=True, changed_elements=100), settings)
        is None
    )


def test_every_step_skipped_by_the_loss_scaler_is_named_as_such_not_as_accumulation():
    finding = diagnose(evidence(optimizer_steps=0, trainer_steps=2, skipped_steps=2), WatchdogSettings())
    assert "fp16 loss scaler skipped every one" in finding.problem and "bf16" in finding.fix
    unstepped = diagnose(evidence(optimizer_steps=0, trainer_steps=2), WatchdogSettings())
    assert "accumulation" in unstepped.cause


@pytest.mark.slow
@pytest.mark.cells(PEFT_CELL)
def test_an_adapter_loaded_for_inference_trains_nothing_plain_and_is_refused_patched(model_dir, tmp_path):
    # N14: beta 0.04, PeftModel.from_pretrained(model, path) with peft's default is_trainable=False.
    flags = ("--lora-adapter", "inference")
    plain = smoke(PEFT_CELL, "plain", model_dir, tmp_path, flags=flags)
    assert plain["status"] == "ok" and plain["steps"] == 3, plain["error"]
    assert plain["trainable_params"] == [] and min(plain["grad_norms"]) > 0  # silent: grad_norm moves
    assert plain["adapter_file_identical"] is True
    patched = smoke(PEFT_CELL, "patched", model_dir, tmp_path, flags=flags)
    first_line = patched["error"].splitlines()[0]
    assert first_line.startswith(
        "GRPOSettingsError: GRPO cannot change a weight: the policy has no trainable parameter"
    )
    assert "PeftModel.from_pretrained(model, path, is_trainable=True)" in first_line
    assert patched["phase"] == "train" and patched["train_time_s"] is None  # refused when train() was called


@pytest.mark.slow
@pytest.mark.cells(PEFT_CELL)
def test_a_trainable_adapter_trains_to_the_same_weights_patched_without_a_word(model_dir, tmp_path):
    flags = ("--lora-adapter", "trainable")
    plain = smoke(PEFT_CELL, "plain", model_dir, tmp_path, flags=flags)
    patched = smoke(PEFT_CELL, "patched", model_dir, tmp_path, flags=flags)
    assert plain["status"] == patched["status"] == "ok", (plain["error"], patched["error"])
    assert plain["adapter_file_identical"] is False and plain["all_trainable_params_changed"]
    assert patched["weights_sha256"] == plain["weights_sha256"] and patched["watchdog_warnings"] == []
