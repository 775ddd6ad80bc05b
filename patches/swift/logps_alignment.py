"""Align ms-swift 4.x GRPO log-probs with the completion: logits_to_keep = L, sequence-parallel padding.

Symptom:   RuntimeError: Size does not match at dimension 1 expected index [4, 90, 1] to be no larger
           than self [4, 89, 504] apart from dimension 2, in _get_logps_via_local_forward, when one row's
           labels start at column 0 (all -100, or a whole-row completion); padding_free in bf16 raises
           "ValueError: zip() argument 2 is longer than argument 1". Sequence parallel (no padding_free):
           when L is not a multiple of the ranks, every log-prob is shifted by swift's padding, no error.
Upstream:  KF-1; modelscope/ms-swift #3377, #3096, #6035.
Versions:  ms-swift >= 4.4 (GRPOBatch): collate_to_grpo_micro_batch sets logits_to_keep =
           (L - argmax(labels != -100)).max(), which is L for such a row. Run on 4.6.0; 4.4-4.5 read in the
           source. 4.0-4.3 keep 3.12's dict layout and are not covered.
Remove when: ms-swift keeps logits_to_keep below L or masks what no logit predicts, and slices its
           sequence-parallel log-probs before its padding.

_get_per_token_logps_and_entropies_single (every path: local forward, sequence parallel, padding-free)
is called for K' = L - 1 (grpo_batch copied with that logits_to_keep and, padding-free, the first
sequence's seq_lengths entry one shorter) and its columns are put behind one column of
alignment.UNPREDICTABLE_LOGP. collate_to_grpo_micro_batch clears that column in grpo_batch.completion_mask
once swift has placed rollout log-probs with the full mask, before the mask is counted for
num_items_in_batch or used by the loss. _get_logps_via_sp is asked for K + padding columns and keeps the
first K (alignment.call_swift_sequence_parallel). Aligned, unpadded batches are not touched.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from grpo_compat.core.registry import patch_each
from grpo_compat.core.wrapping import bound_arguments
from grpo_compat.fixes.alignment import (
    call_aligned,
    call_swift_sequence_parallel,
    clear_unpredictable,
    first_row_shortened,
    unpredictable_columns,
)

TRAINER = "swift.rlhf_trainers.grpo_trainer:GRPOTrainer"


def cleared_collate(wrapped: Any, *args: Any, **kwargs: Any) -> Any:
    """``collate_to_grpo_micro_batch``: the completion mask without the columns no logit predicts."""
    template = bound_arguments(wrapped, *args, **kwargs).get("template")
    return _without_unpredictable(wrapped(*args, **kwargs), template)


def aligned_sequence_parallel_logps(wrapped: Any, *args: Any, **kwargs: Any) -> Any:
    call = bound_arguments(wrapped, *args, **kwargs)
    if "self" not in call:
        return wrapped(*args, **kwargs)  # a bad call: upstream's own error says what is wrong
    from swift.sequence_parallel import sequence_parallel

    padding_free = call["self"].template.padding_free
    return call_swift_sequence_parallel(wrapped, args, kwargs, sequence_parallel, padding_free)


def aligned_logps(wrapped: Any, *args: Any, **kwargs: Any) -> Any:
    call = bound_arguments(wrapped, *args, **kwargs)
    batch, model_inputs = call.get("grpo_batch"), call.get("model_inputs")
    length, keep = _length_and_keep(model_inputs, batch)
    missing = unpredictable_columns(length, keep)
    if missing == 0:
        return wrapped(*args, **kwargs)
    trainer = call["self"]
    lengths = batch.seq_lengths if trainer.template.padding_free else None

    def upstream(kept: int) -> Any:
        changes: dict[str, Any] = {"logits_to_keep": kept}
        if lengths is not None:
            changes["seq_lengths"] = first_row_shortened(lengths, missing)
        aligned = {**call, "grpo_batch": dataclasses.replace(batch, **changes)}
        return wrapped(**aligned)

    def nothing_to_score() -> Any:
        raise ValueError(
            f"logits_to_keep={keep} over a sequence of {length} token(s): no token has a logit that predicts it. "
            "Each GRPO sample needs a prompt of at least one token before its completion."
        )

    return call_aligned(upstream, length, keep, nothing_to_score, None if lengths is None else lengths[0])


def _length_and_keep(model_inputs: Any, batch: Any) -> tuple[int, int]:
    """(L, K) of a batch in swift's logits_to_keep layout; (0, 0), nothing to align, for any other."""
    keep = getattr(batch, "logits_to_keep", None)
    input_ids = model_inputs.get("input_ids") if isinstance(model_inputs, dict) else None
    if not isinstance(keep, int) or getattr(input_ids, "ndim", 0) != 2:
        return 0, 0
    return input_ids.shape[-1], keep


def _without_unpredictable(collated: Any, template: Any) -> Any:
    if not (isinstance(collated, tuple) and len(collated) == 2):
        return collated  # not swift's (model_inputs, grpo_batch): nothing this patch knows to clear
    model_inputs, batch = collated
    length, keep = _length_and_keep(model_inputs, batch)  # logits_to_keep is None for Megatron / Ray
    missing = unpredictable_columns(length, keep)
    if missing:
        first = batch.seq_lengths[0] if getattr(template, "padding_free", False) else None
        batch.completion_mask = clear_unpredictable(batch.completion_mask, missing, first)
    return collated


patch_each(
    id="swift.logps-alignment",
    catalogue="logps-logits-to-keep-off-by-one",
    requires="ms-swift>=4.4",
    wrappers={
        "swift.rlhf_trainers.utils:collate_to_grpo_micro_batch": cleared_collate,
        f"{TRAINER}._get_per_token_logps_and_entropies_single": aligned_logps,
        f"{TRAINER}._get_logps_via_sp": aligned_sequence_parallel_logps,
    },
)
