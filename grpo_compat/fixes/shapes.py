"""Is a tensor about to be projected through the LM head hidden states, or already logits? (KF-3)

Fused and compiled GRPO losses (TRL's Liger path, Unsloth's) take the model's last hidden states
(B, T, H) and multiply them by the LM head weight (V, H) themselves. A model whose forward already
applied the head (it ignores ``UNSLOTH_RETURN_HIDDEN_STATES``, or its "backbone" is the causal LM
itself) hands them logits (B, T, V) instead, and the projection fails deep inside a compiled kernel:
"a and b must have same reduction dim, but got [s0, 32000] X [4096, 32000]". Every guard patch
decides here, from shapes alone (no torch import, nothing allocated), what it was given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grpo_compat.core.errors import LMHeadShapeError

HIDDEN = "hidden"
LOGITS = "logits"

LOGITS_CAUSE = (
    "The model returned logits where hidden states were expected: its forward ignores "
    "UNSLOTH_RETURN_HIDDEN_STATES, or its backbone (base_model / .model) is the causal LM itself and "
    "already applied lm_head"
)


def lm_head_shape(weight: Any) -> tuple[int, int] | None:
    """(V, H) of an LM head weight; None when this process cannot know it.

    Under DeepSpeed ZeRO-3 the local weight is an empty shard and its real shape is ``ds_shape``;
    a flattened (FSDP1) or empty weight says nothing, and the guard then stays out of the way.
    """
    shape = getattr(weight, "ds_shape", None)
    if shape is None:
        shape = getattr(weight, "shape", None)
    if shape is None or len(shape) != 2 or 0 in tuple(shape):
        return None
    return int(shape[0]), int(shape[1])


def projection_input(shape: Sequence[int], head_shape: tuple[int, int], where: str) -> str:
    """``HIDDEN`` or ``LOGITS`` for a tensor of ``shape`` meant for an LM head of ``head_shape`` (V, H).

    Raises LMHeadShapeError, naming both shapes, when the last dim is neither H nor V.
    """
    vocab, hidden = head_shape
    width = int(shape[-1])
    # H == V is ambiguous: both readings fit. Hidden is what the caller asked for, so the tensor goes
    # on untouched, as upstream would have used it; treating it as logits could silently change the loss.
    if width == hidden:
        return HIDDEN
    if width == vocab:
        return LOGITS
    raise LMHeadShapeError(
        f"{where}: expected hidden states of width {hidden} for the LM head weight {list(head_shape)} "
        f"([vocab, hidden]), got a tensor of shape {list(shape)}, whose last dim {width} is neither the "
        f"hidden size {hidden} nor the vocabulary size {vocab}. The model's output does not belong to "
        "this LM head: check that the model, its lm_head and any adapter or wrapper around them match."
    )


def logits_message(shape: Sequence[int], head_shape: tuple[int, int], where: str) -> str:
    """Why a tensor of logits cannot go where hidden states were expected, for guards that cannot reroute it."""
    return (
        f"{where}: expected hidden states of width {head_shape[1]} for the LM head weight {list(head_shape)} "
        f"([vocab, hidden]), got a tensor of shape {list(shape)}, i.e. logits. {LOGITS_CAUSE}."
    )
