"""Align TRL's per-token log-probs with the completion ids when logits_to_keep reaches the sequence length.

Symptom:   RuntimeError: Size does not match at dimension 0 expected index [269, 1] to be smaller than
           self [268, 152064] apart from dimension 1, inside _get_per_token_logps (trl 0.15-1.13);
           trl >= 1.15 returns L-1 columns for logits_to_keep = L and the loss fails against the mask.
Upstream:  KF-1; modelscope/ms-swift #3377, #3096, #6035 (ms-swift reaches this method through super()).
Versions:  trl >= 0.15: _get_per_token_logps (0.15-0.19, a tensor), _get_per_token_logps_and_entropies
           (0.20+, a 2-tuple; a 3-tuple from 1.7.1; the fused lm-head path from 1.15), compute_loss.
           Not trl 1.14.x: its method takes (model, *args), so calls pass through to upstream unchanged.
Remove when: upstream returns logits_to_keep columns and masks the ones no logit predicts.

With K = logits_to_keep >= L, the first K - (L - 1) of the K columns have no predicting logit: they get
alignment.UNPREDICTABLE_LOGP, the others are upstream's own result for K' = L - 1, and compute_loss
clears those columns in the loss mask (completion_mask; on trl >= 0.29 the loss multiplies tool_mask
with it). Aligned calls (K <= L - 1) are forwarded untouched. Only TRL's base class is wrapped:
ms-swift overrides these names with other signatures and calls TRL's through super().
"""

from __future__ import annotations

import copy
from contextvars import ContextVar
from typing import Any

from grpo_compat.core.registry import patch_each
from grpo_compat.core.wrapping import bound_arguments, call_with
from grpo_compat.fixes.alignment import call_aligned, clear_unpredictable, unpredictable_columns

# compute_loss's completion mask before its unpredictable columns were cleared. TRL builds the
# attention mask from the same tensor; the cleared token must stay visible as context, as it was
# when the old and reference log-probs were computed, or every later log-prob would change.
_UNCLEARED_MASK: ContextVar[Any] = ContextVar("grpo_compat_uncleared_completion_mask", default=None)


def aligned_log_probs(wrapped: Any, *args: Any, **kwargs: Any) -> Any:
    call = bound_arguments(wrapped, *args, **kwargs)
    input_ids, keep = call.get("input_ids"), call.get("logits_to_keep")
    if getattr(input_ids, "ndim", 0) != 2 or not isinstance(keep, int):
        return wrapped(*args, **kwargs)  # parameters not by these names (trl 1.14's *args): upstream decides
    length = input_ids.shape[1]
    if unpredictable_columns(length, keep) == 0:
        return wrapped(*args, **kwargs)
    changes = {}
    uncleared, attention_mask = _UNCLEARED_MASK.get(), call.get("attention_mask")
    if _holds_completion_mask(attention_mask, uncleared):
        import torch

        prompt_width = attention_mask.shape[1] - uncleared.shape[1]
        changes["attention_mask"] = torch.cat([attention_mask[:, :prompt_width], uncleared.to(attention_mask)], dim=1)

    def upstream(kept: int) -> Any:
        return call_with(wrapped, args, kwargs, logits_to_keep=kept, **changes)

    def nothing_to_score() -> Any:
        raise ValueError(
            f"logits_to_keep={keep} over sequences of {length} token(s): no token has a logit that predicts it, "
            "so there is no log-prob to compute. Each sequence needs at least 2 tokens (prompt + completion)."
        )

    return call_aligned(upstream, length, keep, nothing_to_score)


def _holds_completion_mask(attention_mask: Any, uncleared: Any) -> bool:
    """Whether this call's attention mask is compute_loss's prompt mask + the cleared completion mask."""
    if uncleared is None or getattr(attention_mask, "ndim", 0) != 2:
        return False
    return attention_mask.shape[0] == uncleared.shape[0] and attention_mask.shape[1] >= uncleared.shape[1]


def loss_without_unpredictable_columns(wrapped: Any, *args: Any, **kwargs: Any) -> Any:
    inputs = bound_arguments(wrapped, *args, **kwargs).get("inputs")
    columns = _unpredictable_in(inputs)
    if columns == 0:
        return wrapped(*args, **kwargs)
    uncleared = inputs["completion_mask"]
    batch = copy.copy(inputs)  # shallow: the caller's batch and its mask stay as they were
    batch["completion_mask"] = clear_unpredictable(uncleared, columns)
    token = _UNCLEARED_MASK.set(uncleared)
    try:
        return call_with(wrapped, args, kwargs, inputs=batch)
    finally:
        _UNCLEARED_MASK.reset(token)


def _unpredictable_in(inputs: Any) -> int:
    """Unpredictable completion columns of TRL's batch; 0 for another layout (ms-swift's has no prompt_ids)."""
    try:
        prompt_ids, completion_ids, _ = (inputs[key] for key in ("prompt_ids", "completion_ids", "completion_mask"))
    except (KeyError, TypeError, IndexError):
        return 0
    if getattr(prompt_ids, "ndim", 0) != 2 or getattr(completion_ids, "ndim", 0) != 2:
        return 0
    width = completion_ids.shape[1]
    return unpredictable_columns(prompt_ids.shape[1] + width, width)


# One fix in two halves that must never be applied apart: padded log-probs, and a loss that skips the padding.
patch_each(
    id="trl.logps-alignment",
    catalogue="logps-logits-to-keep-off-by-one",
    requires="trl>=0.15",
    wrappers={
        "trl.trainer.grpo_trainer:GRPOTrainer._get_per_token_logps?": aligned_log_probs,
        "trl.trainer.grpo_trainer:GRPOTrainer._get_per_token_logps_and_entropies?": aligned_log_probs,
        "trl.trainer.grpo_trainer:GRPOTrainer.compute_loss": loss_without_unpredictable_columns,
    },
    expects=("self", "model"),
)
