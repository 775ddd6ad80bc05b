"""TRL's own GRPO loss in place of Liger's fused one, for a step the fused loss cannot compute.

Used by the Liger patches (trl.liger-lm-head-guard, trl.liger-zero3-lm-head-route): the non-Liger loss is the same
objective, computed through the model's forward instead of from the last hidden state and lm_head's weight.
"""

from __future__ import annotations

from typing import Any


def model_argument(args: tuple, kwargs: dict) -> Any:
    """The model given to compute_liger_loss: trl 0.17 names it `model` (and unwraps it), 0.18+ `unwrapped_model`."""
    return args[0] if args else kwargs.get("unwrapped_model", kwargs.get("model"))


def non_liger_loss(wrapped: Any, trainer: Any, args: tuple, kwargs: dict, why: str, patch_id: str) -> Any:
    """TRL's non-Liger loss for the inputs of ``wrapped`` (compute_liger_loss); ``why`` is logged once per trainer."""
    from grpo_compat.core.logs import log_once
    from grpo_compat.core.wrapping import bound_arguments

    log_once(trainer, "warning", why, patch_id)
    return trainer._compute_loss(
        model_argument(args, kwargs), bound_arguments(wrapped, trainer, *args, **kwargs).get("inputs")
    )
