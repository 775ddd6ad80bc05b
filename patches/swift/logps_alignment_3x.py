"""Align ms-swift 3.x GRPO log-probs with the completion: logits_to_keep = L, sequence-parallel padding.

Symptom:   RuntimeError: Size does not match at dimension 1 expected index [4, 92, 1] to be no larger
           than self [4, 91, 504] apart from dimension 2 (bf16: KF-1's 2-D "[99, 1] ... [98, 504]"), in
           swift's log-prob method, when one row's labels start at column 0 (all -100, or a whole-row
           completion); padding_free in bf16 (3.12) returns log-probs shifted by one token, no error.
           Sequence parallel (3.11+, no padding_free): when L is not a multiple of the ranks, every
           log-prob is shifted by swift's padding, no error.
Upstream:  KF-1; modelscope/ms-swift #3377, #3096, #6035.
Versions:  ms-swift 3.5-3.12 (not 3.7, whose log-prob method has another form): logits_to_keep =
           (L - argmax(labels != -100)).max() is L for such a row, one more column than there are logits.
           Run on 3.5.3 (trl 0.19.0) and 3.12.6 (trl 0.24.0); 3.5.0-3.6.x and 3.8-3.12.5 read in the source.
Remove when: ms-swift keeps logits_to_keep below L or masks what no logit predicts, and slices its
           sequence-parallel log-probs before its padding.

Swift's own log-prob method (3.5-3.6 _get_per_token_logps, 3.8+ _get_per_token_logps_and_entropies_single,
and on 3.5-3.6 with Ulysses sequence parallel the module function that SwiftMixin.__init__ binds onto the
trainer instance) is called for K' = L - 1 and its columns are put behind one column of
alignment.UNPREDICTABLE_LOGP; in padding-free batches the first sequence loses that token (its
seq_lengths entry shrinks by one). _prepare_batch_inputs then clears that column in inputs['completion_mask'],
after swift used the full mask to place rollout log-probs (num_items_in_batch, swift's DAPO normaliser
gathered inside that method, still counts it). _get_logps_via_sp is asked for K + padding columns and
keeps the first K (alignment.call_swift_sequence_parallel). Aligned, unpadded batches are not touched.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch_each
from grpo_compat.fixes.alignment import (
    call_aligned,
    call_swift_sequence_parallel,
    clear_unpredictable,
    first_row_shortened,
    unpredictable_columns,
)

TRAINER = "swift.trainers.rlhf_trainer.grpo_trainer:GRPOTrainer"


def _swift_own(wrapped: Any) -> bool:
    # trl's method inherited under swift's name is not this layout: it passes through untouched.
    return wrapped.__module__.startswith("swift.")


def cleared_batches(wrapped: Any, trainer: Any, *args: Any, **kwargs: Any) -> Any:
    """``_prepare_batch_inputs``: each batch's completion mask without the columns no logit predicts."""
    batches = wrapped(trainer, *args, **kwargs)
    return [_without_unpredictable(batch) for batch in batches] if _swift_own(wrapped) else batches


def aligned_sequence_parallel_logps(wrapped: Any, trainer: Any, *args: Any, **kwargs: Any) -> Any:
    if not _swift_own(wrapped):
        return wrapped(trainer, *args, **kwargs)
    from swift.trainers.sequence_parallel import sequence_parallel

    padding_free = trainer.template.padding_free
    return call_swift_sequence_parallel(wrapped, (trainer, *args), kwargs, sequence_parallel, padding_free)


def aligned_logps(wrapped: Any, trainer: Any, *args: Any, **kwargs: Any) -> Any:
    if not _swift_own(wrapped) or len(args) < 2:
        return wrapped(trainer, *args, **kwargs)  # not swift's (model, inputs, ...) call: upstream decides
    model, inputs, *rest = args
    return _aligned(wrapped, trainer, model, inputs, rest, kwargs)


def _kept_lengths(inputs: dict) -> Any:
    # Only padding-free batches of 3.10+ carry seq_lengths (3.5's padding_free re-pads to the batch layout).
    return inputs.get("seq_lengths")


def _aligned(wrapped: Any, trainer: Any, model: Any, inputs: Any, rest: list, kwargs: dict) -> Any:
    input_ids, keep = _ids_and_keep(inputs)
    if input_ids is None:
        return wrapped(trainer, model, inputs, *rest, **kwargs)
    length = input_ids.shape[-1]
    missing = unpredictable_columns(length, keep)
    if missing == 0:
        return wrapped(trainer, model, inputs, *rest, **kwargs)
    lengths = _kept_lengths(inputs)

    def upstream(kept: int) -> Any:
        aligned = {**inputs, "logits_to_keep": kept}
        if lengths is not None:
            aligned["seq_lengths"] = first_row_shortened(lengths, missing)
        return wrapped(trainer, model, aligned, *rest, **kwargs)

    def nothing_to_score() -> Any:
        raise ValueError(
            f"logits_to_keep={keep} over a sequence of {length} token(s): no token has a logit that predicts it. "
            "Each GRPO sample needs a prompt of at least one token before its completion."
        )

    first = None if lengths is None else lengths[0]
    return call_aligned(upstream, length, keep, nothing_to_score, first)


def _ids_and_keep(inputs: Any) -> tuple[Any, int]:
    try:
        input_ids, keep = inputs["input_ids"], inputs["logits_to_keep"]
    except (KeyError, TypeError):
        return None, 0
    if getattr(input_ids, "ndim", 0) != 2 or not isinstance(keep, int):
        return None, 0
    return input_ids, keep


def _without_unpredictable(batch: Any) -> Any:
    input_ids, keep = _ids_and_keep(batch)
    if input_ids is None or "completion_mask" not in batch:
        return batch
    missing = unpredictable_columns(input_ids.shape[-1], keep)
    if missing:
        lengths = _kept_lengths(batch)
        first = None if lengths is None else lengths[0]
        batch["completion_mask"] = clear_unpredictable(batch["completion_mask"], missing, first)
    return batch


patch_each(
    id="swift.logps-alignment-3x",
    catalogue="logps-logits-to-keep-off-by-one",
    requires="ms-swift>=3.5,<4,!=3.7.*",
    wrappers={
        f"{TRAINER}._prepare_batch_inputs": cleared_batches,
        f"{TRAINER}._get_per_token_logps?": aligned_logps,  # 3.5-3.6
        f"{TRAINER}._get_per_token_logps_and_entropies_single?": aligned_logps,  # 3.8+
        f"{TRAINER}._get_logps_via_sp?": aligned_sequence_parallel_logps,  # 3.11+
        "swift.trainers.sequence_parallel.ulysses:_get_per_token_logps?": aligned_logps,  # 3.5-3.6 sequence parallel
    },
    expects=("self",),
)
