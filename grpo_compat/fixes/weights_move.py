"""The weights can move: a GRPO run that cannot change a weight is refused before its first generation.

Read from what the trainer holds when ``train()`` is called, before any compute (trl #6700, #3031; peft #282):

- the policy's trainable parameters: none, because a PEFT adapter was loaded for inference
  (``PeftModel.from_pretrained(model, path)``: peft's ``is_trainable`` defaults to False, which freezes the adapter
  and sets its config's ``inference_mode``), or because every parameter is frozen;
- the learning rate the optimizer will get: ``learning_rate=0`` (a scheduler scales it, so it stays 0); a run may
  mean it (measuring rewards or gradients), so the watchdog's warn mode warns and goes on, stop mode refuses;
- an optimizer passed to the trainer that holds none of the policy's trainable parameters.

trl trains such a run to the end without a word: reward and grad_norm move (trl's reference adapter switch turns
gradients on for the forward pass), and the adapter it saves is byte-identical to the one it loaded. What the weights
do after the first optimizer step is the learning watchdog's (grpo_compat.fixes.watchdog); both read
:func:`frozen_adapters` to name the adapter.

Only reads: no parameter, flag or RNG is touched, so a run that can train is untouched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grpo_compat.fixes.watchdog import CANNOT_TRAIN, Finding

ADAPTER_FIX = (
    "load the adapter to train with PeftModel.from_pretrained(model, path, is_trainable=True) (or pass a "
    "peft_config to train a new adapter)"
)
# How the refusal ends, and how the warning of a run that may mean it ends (GRPO_COMPAT_WATCHDOG=warn).
STILL_RUN = "refused before the first generation; GRPO_COMPAT_WATCHDOG=off runs it anyway"
STILL_TRAINS = (
    "found before the first generation; the run goes on, as a run measuring rewards or gradients may mean it; "
    "GRPO_COMPAT_WATCHDOG=stop refuses it"
)


@dataclass(frozen=True)
class CannotTrain:
    """Why no weight can change, and whether a run may mean it (learning rate 0: measuring rewards or gradients
    without moving the weights, as matrix/probe_token_normalisation.py does). One that may is refused in the
    watchdog's stop mode and warned of in warn mode; the others are refused in both."""

    finding: Finding
    may_be_meant: bool = False


def frozen_adapters(model: Any) -> list[str]:
    """The PEFT adapters of ``model`` loaded for inference (their config's ``inference_mode`` is set)."""
    configs = getattr(model, "peft_config", None)
    if not isinstance(configs, dict):
        return []
    return [name for name, config in configs.items() if getattr(config, "inference_mode", False) is True]


def active_adapters(model: Any) -> list[str]:
    """The adapters a PEFT model computes with (peft: ``active_adapters``, a property or a method by version)."""
    active = getattr(model, "active_adapters", None)
    if callable(active):
        try:
            active = active()
        except Exception:  # noqa: BLE001 - a model without adapters raises here in some peft versions
            active = None
    if isinstance(active, str):
        return [active]
    return list(active) if isinstance(active, (list, tuple)) else []


def trainable_parameters(model: Any) -> list[Any]:
    return [parameter for parameter in model.parameters() if parameter.requires_grad]


def optimizer_parameters(optimizer: Any) -> list[Any] | None:
    """The parameters a torch optimizer holds (None: not an optimizer whose parameters can be read)."""
    groups = getattr(optimizer, "param_groups", None)
    if not isinstance(groups, list):
        return None
    return [parameter for group in groups for parameter in group.get("params", [])]


def _no_trainable_parameter(model: Any) -> Finding:
    frozen = frozen_adapters(model)
    active = active_adapters(model)
    loaded_for_inference = [name for name in frozen if name in active] or frozen
    if loaded_for_inference:
        names = ", ".join(repr(name) for name in loaded_for_inference)
        return Finding(
            f"the policy has no trainable parameter: PEFT adapter {names} was loaded for inference "
            "(inference_mode=True, every parameter frozen), so the optimizer would get none and the adapter saved "
            "after training would be the one loaded, byte for byte",
            "PeftModel.from_pretrained(model, path) loads an adapter frozen unless is_trainable=True (peft's default "
            "is False); trl trains it without a word, reward and grad_norm moving (trl #6700)",
            ADAPTER_FIX,
            CANNOT_TRAIN,
        )
    peft = isinstance(getattr(model, "peft_config", None), dict)
    return Finding(
        "the policy has no trainable parameter: every parameter is frozen (requires_grad=False), so the optimizer "
        "would get none",
        "the PEFT adapters' parameters were frozen after loading"
        if peft
        else "the model's parameters were frozen (requires_grad_(False), or a loader that freezes them)",
        "unfreeze the adapter to train (model.set_requires_grad or requires_grad_(True) on its parameters)"
        if peft
        else "unfreeze the parameters you mean to train (requires_grad_(True)), or pass a peft_config to train an "
        "adapter",
        CANNOT_TRAIN,
    )


def why_no_weight_can_move(trainer: Any) -> CannotTrain | None:
    """Why no weight of ``trainer``'s policy can change in this run, or None when one can (before ``train()``)."""
    model = getattr(trainer, "model", None)
    if model is None or not hasattr(model, "parameters"):
        return None
    trainable = trainable_parameters(model)
    if not trainable:
        return CannotTrain(_no_trainable_parameter(model))
    optimizer = getattr(trainer, "optimizer", None)  # given to the trainer (optimizers=...); else built in train()
    args = getattr(trainer, "args", None)
    if optimizer is None:
        # Trainer.create_optimizer takes args.learning_rate, unless the trainer was given its own optimizer class
        # and arguments (optimizer_cls_and_kwargs), whose lr may differ.
        rate = getattr(args, "learning_rate", None)
        if rate == 0 and getattr(trainer, "optimizer_cls_and_kwargs", None) is None:
            finding = Finding(
                "learning_rate=0: every update is 0, whatever the gradients, so no weight can change",
                "the learning rate is 0 (a scheduler scales it, so it stays 0 at every step)",
                "set learning_rate > 0",
                CANNOT_TRAIN,
            )
            return CannotTrain(finding, may_be_meant=True)
        return None
    held = optimizer_parameters(optimizer)
    if held is None:
        return None
    held_ids = {id(parameter) for parameter in held}
    if not any(id(parameter) in held_ids for parameter in trainable):
        return CannotTrain(
            Finding(
                f"the optimizer given to the trainer holds {len(held)} parameters, none of the policy's "
                f"{len(trainable)} trainable ones, so no weight of the policy can change",
                "the optimizer was built from other parameters: before the model was wrapped (e.g. by get_peft_model), "
                "or from another model",
                "build the optimizer from the trainable parameters of the model the trainer trains "
                "([p for p in model.parameters() if p.requires_grad]), or let the trainer build it",
                CANNOT_TRAIN,
            )
        )
    rates = [group.get("lr") for group in optimizer.param_groups]
    if rates and all(rate == 0 for rate in rates) and getattr(trainer, "lr_scheduler", None) is None:
        finding = Finding(
            "the optimizer given to the trainer has learning rate 0 in every parameter group, so no weight can change",
            "the learning rate is 0 (the trainer's scheduler scales it, so it stays 0)",
            "give the optimizer a learning rate > 0",
            CANNOT_TRAIN,
        )
        return CannotTrain(finding, may_be_meant=True)
    return None
