"""What every rank of a multi-process smoke run saw: its own parameters, and DeepSpeed's step accounting.

KF-5's field report is "weights do not change, KL stays 0" under DeepSpeed with gradient accumulation.
A digest gathered on rank 0 cannot show that one rank's partition never moved, so each rank compares
the values it holds itself (its ZeRO-3 partition, not a gathered copy), and rank 0 records every answer.
"""

from __future__ import annotations

from typing import Any


def local_parameters(model: Any) -> dict[str, Any]:
    """CPU copies of the trainable values this rank holds: its ZeRO-3 partition, else the whole parameter."""
    held = {}
    for name, parameter in model.named_parameters():
        if parameter.requires_grad:
            local = parameter.ds_tensor if hasattr(parameter, "ds_tensor") else parameter  # no collective
            held[name] = local.detach().to("cpu", copy=True).reshape(-1)
    return held


def changed_locally(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Every trainable parameter this rank holds values of has moved (an empty ZeRO-3 partition holds none)."""
    import torch

    held = [name for name, values in before.items() if values.numel()]
    return bool(held) and not any(torch.equal(before[name], after[name]) for name in held)


def answers_of_all_ranks(value: Any) -> list[Any]:
    """``value`` from every rank, in rank order (collective: every rank calls it); [value] without a group."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return [value]
    answers: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(answers, value)
    return answers


def deepspeed_accounting(trainer: Any) -> dict[str, Any]:
    """The DeepSpeed engine's accumulation and optimizer step count next to the trainer's; {} without DeepSpeed."""
    engine = getattr(getattr(trainer.accelerator, "deepspeed_engine_wrapped", None), "engine", None)
    if engine is None:
        return {}
    return {
        "engine_gradient_accumulation_steps": int(engine.gradient_accumulation_steps()),
        "engine_optimizer_steps": int(engine.global_steps),
    }
