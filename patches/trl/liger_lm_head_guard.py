"""Check the hidden states TRL's Liger GRPO loss projects through lm_head; logits go to the non-Liger loss.

Symptom:   with use_liger_loss / use_liger_kernel, a model whose backbone already applies the LM head
           (its `base_model` / `.model` is the causal LM itself: pre-5.0 transformers VLMs, wrappers,
           remote-code models) hands logits (B, K, V) to Liger's fused loss, which multiplies them by
           lm_head.weight (V, H) again: "TorchRuntimeError ... a and b must have same reduction dim,
           but got [s0, 32000] X [4096, 32000]" deep inside torch.compile.
Upstream:  KF-3 (unsloth#1790 is the same projection in Unsloth's loss); TRL 1.6+
           works around VLMs only (its comment: "base_model is self (re-runs lm_head)").
Versions:  trl 0.17-1.13 (GRPOTrainer._get_last_hidden_state + compute_liger_loss). trl 1.14 projects in
           `_chunked_logps`, 1.15+ in the fused lm-head forward: other code, not wrapped here.
Remove when: the oldest supported trl is >= 1.14.

The shape decision is grpo_compat.fixes.shapes.projection_input (shared with unsloth.lm-head-guard):
- last dim H (hidden): the very tensor upstream returned goes on to Liger, untouched.
- last dim V (logits): Liger cannot take logits, so this call's loss is TRL's own non-Liger
  `_compute_loss` on the same model and inputs, which is what `use_liger_*=False` computes. It runs
  the model's full forward once more (the backbone pass that produced the logits is dropped); a
  warning says so once per trainer.
- anything else: LMHeadShapeError naming both shapes.
"""

from __future__ import annotations

import contextvars
from typing import Any

from grpo_compat.core.registry import patch_each

PATCH_ID = "trl.liger-lm-head-guard"
WHERE = "GRPOTrainer._get_last_hidden_state (TRL's Liger GRPO loss)"
# Set while our compute_liger_loss wrapper runs: only it can reroute logits to the non-Liger loss.
_REROUTABLE: contextvars.ContextVar[bool] = contextvars.ContextVar("grpo_compat_liger_reroutable", default=False)


class _LogitsInsteadOfHidden(Exception):
    """Carries "these are logits" from _get_last_hidden_state up to compute_liger_loss's wrapper."""


def _head_weight(trainer: Any, model: Any) -> Any:
    unwrapped = trainer.accelerator.unwrap_model(model)
    return getattr(getattr(unwrapped, "lm_head", None), "weight", None)


def checked_hidden_state(wrapped: Any, trainer: Any, *args: Any, **kwargs: Any) -> Any:
    from grpo_compat.core.errors import LMHeadShapeError
    from grpo_compat.fixes.liger import model_argument
    from grpo_compat.fixes.shapes import LOGITS, lm_head_shape, logits_message, projection_input

    hidden = wrapped(trainer, *args, **kwargs)
    head = lm_head_shape(_head_weight(trainer, model_argument(args, kwargs)))
    if head is None or getattr(hidden, "ndim", 0) < 1:
        return hidden  # nothing to judge against: upstream's own behaviour
    if projection_input(hidden.shape, head, WHERE) == LOGITS:
        if _REROUTABLE.get():
            raise _LogitsInsteadOfHidden
        raise LMHeadShapeError(logits_message(hidden.shape, head, WHERE))  # a caller we cannot reroute
    return hidden


def liger_loss_or_fallback(wrapped: Any, trainer: Any, *args: Any, **kwargs: Any) -> Any:
    token = _REROUTABLE.set(True)
    try:
        return wrapped(trainer, *args, **kwargs)
    except _LogitsInsteadOfHidden:
        pass  # handled below, outside the except block: no chained traceback if the fallback fails
    finally:
        _REROUTABLE.reset(token)
    from grpo_compat.fixes.liger import non_liger_loss

    why = (
        "the model's backbone returned logits, not hidden states (its base_model / .model already applies lm_head), "
        "so Liger's fused loss cannot be used; computing TRL's non-Liger GRPO loss instead (one more forward per "
        "step). Set use_liger_loss / use_liger_kernel to False to skip the wasted pass."
    )
    return non_liger_loss(wrapped, trainer, args, kwargs, why, PATCH_ID)


patch_each(
    id=PATCH_ID,
    catalogue="lm-head-applied-twice",
    requires=("trl>=0.17,<1.14", "liger-kernel"),
    wrappers={
        "trl.trainer.grpo_trainer:GRPOTrainer._get_last_hidden_state": checked_hidden_state,
        "trl.trainer.grpo_trainer:GRPOTrainer.compute_liger_loss": liger_loss_or_fallback,
    },
    expects=("self",),
)
