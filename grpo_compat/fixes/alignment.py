"""Causal alignment of per-token log-probs with completion ids, shared by the TRL and ms-swift patches.

A causal LM's logit at position t predicts token t+1, so a row of L tokens has only L-1 predicting
positions. When a caller asks for the last K columns with K >= L (``logits_to_keep`` reaching the
sequence length: an empty prompt, labels starting at column 0, a padded sequence-parallel shard),
the first ``K - (L - 1)`` completion columns have no predicting logit. Upstream then either fails
in the gather (KF-1: "expected index [269, 1] to be smaller than self [268, 152064]") or returns
fewer columns than the completion mask has.

The fix, in one place: compute the K' = L-1 columns that do have a logit with the upstream code
itself, put a defined value (0.0) in front for the unpredictable ones, and clear those columns in
the loss mask so they never reach the loss. Aligned calls (K <= L-1) go straight to upstream: the
same tensors, no extra allocation. torch is imported by the caller's code, never here at import.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# The log-prob given to a column no logit predicts. It is masked out of the loss; 0.0 (probability 1)
# keeps ratios exp(logp - old_logp) at 1 and KL terms at 0 should a caller forget the mask.
UNPREDICTABLE_LOGP = 0.0


def unpredictable_columns(sequence_length: int, logits_to_keep: int) -> int:
    """How many of the last ``logits_to_keep`` columns of an L-token row no logit predicts."""
    return max(0, int(logits_to_keep) - max(int(sequence_length) - 1, 0))


def pad_front(tensor: Any, columns: int, value: float = UNPREDICTABLE_LOGP) -> Any:
    """``tensor`` (B, K', ...) with ``columns`` columns of ``value`` put in front along dim 1."""
    if columns <= 0:
        return tensor
    import torch

    shape = (tensor.shape[0], columns, *tensor.shape[2:])
    return torch.cat([tensor.new_full(shape, value), tensor], dim=1)


def unpredictable_cells(width: int, columns: int, first_length: Any = None) -> tuple[Any, slice]:
    """Index of the cells of a (B, ``width``) log-prob result or loss mask that no logit predicts.

    Batch layout (``first_length`` None): the first ``columns`` columns of every row. Padding-free
    layout (ms-swift packs the rows into one and re-batches the result right-aligned, each row as long
    as its kept tokens; ``first_length`` is the first row's): the packed row's first ``columns``
    tokens, all in the first row, at its first columns.
    """
    if first_length is None:
        return slice(None), slice(0, columns)
    start = width - int(first_length)
    return 0, slice(start, start + columns)


def pad_result(result: Any, columns: int, kept: int, first_length: Any = None) -> Any:
    """Pad every (B, ``kept``) tensor of a log-prob method's result (a tensor or a tuple of them).

    Tuples hold the log-probs, the entropies (or None) and, on trl >= 1.7, an auxiliary loss: only
    the per-token tensors (dim 1 of size ``kept``) get columns; anything else passes through. With
    ``first_length`` (padding-free layout, see :func:`unpredictable_cells`) the unpredictable tokens
    of the first row get the defined value too; the new front columns of other rows are padding.
    """
    if columns <= 0:
        return result
    if isinstance(result, tuple):
        return tuple(pad_result(item, columns, kept, first_length) for item in result)
    if getattr(result, "ndim", 0) >= 2 and result.shape[1] == kept:
        padded = pad_front(result, columns)
        if first_length is not None:
            padded[unpredictable_cells(padded.shape[1], columns, first_length)] = UNPREDICTABLE_LOGP
        return padded
    return result


def call_aligned(
    compute: Callable[[int], Any],
    sequence_length: int,
    logits_to_keep: int,
    empty: Callable[[], Any],
    first_length: Any = None,
) -> Any:
    """``compute(K)`` for the columns a logit predicts, padded to ``logits_to_keep`` columns.

    ``compute`` is the upstream computation for a given K. ``empty()`` builds the result when no
    column at all is predictable (a row of one token). Aligned calls are passed through untouched.
    ``first_length``: see :func:`unpredictable_cells` (padding-free layouts).
    """
    missing = unpredictable_columns(sequence_length, logits_to_keep)
    if missing == 0:
        return compute(logits_to_keep)
    kept = int(logits_to_keep) - missing
    if kept == 0:
        return empty()
    return pad_result(compute(kept), missing, kept, first_length)


def clear_unpredictable(mask: Any, columns: int, first_length: Any = None) -> Any:
    """A copy of the (B, K) loss mask with its unpredictable cells cleared; ``mask`` itself when none.

    The first ``columns`` columns, or in a padding-free layout the first row's first ``columns``
    tokens (``first_length``, see :func:`unpredictable_cells`).
    """
    if columns <= 0 or mask is None:
        return mask
    cleared = mask.clone()
    cleared[unpredictable_cells(cleared.shape[1], columns, first_length)] = 0
    return cleared


def first_row_shortened(lengths: Any, columns: int) -> Any:
    """Per-row kept lengths of a padding-free batch (first row first) without its ``columns`` unpredictable tokens."""
    shortened = lengths.clone()
    shortened[0] -= columns
    return shortened


def call_unshifted(compute: Callable[[int], Any], logits_to_keep: int, end_padding: int) -> Any:
    """``compute(K)`` for an upstream that takes the last K columns of a sequence still padded at its end.

    ms-swift's sequence-parallel gather keeps the padding that made the sequence divisible by the
    number of ranks, then slices the last K + 1 positions: every column lands ``end_padding`` tokens
    late. Asking for K + ``end_padding`` columns and keeping the first K gives the right ones.
    """
    if end_padding <= 0:
        return compute(logits_to_keep)
    result = compute(logits_to_keep + end_padding)
    return (
        tuple(_first(item, logits_to_keep) for item in result)
        if isinstance(result, tuple)
        else _first(result, logits_to_keep)
    )


def _first(tensor: Any, columns: int) -> Any:
    return tensor[:, :columns] if getattr(tensor, "ndim", 0) >= 2 else tensor


def call_swift_sequence_parallel(
    wrapped: Any, args: tuple, kwargs: dict, sequence_parallel: Any, padding_free: bool
) -> Any:
    """ms-swift's ``_get_logps_via_sp`` (3.11+, 4.x) without the shift of its end padding (:func:`call_unshifted`).

    Only the batch layout slices from the padded end: padding-free batches slice from the real
    length, and ring attention (rp > 1) exists only padding-free. The padding is swift's own
    (``sequence_parallel.pad`` of one row of ids: no vocabulary-sized tensor).
    """
    from grpo_compat.core.wrapping import bound_arguments, call_with

    call = bound_arguments(wrapped, *args, **kwargs)
    input_ids, keep = call.get("input_ids"), call.get("logits_to_keep")
    ring = getattr(sequence_parallel, "rp_world_size", 1) > 1
    if padding_free or ring or getattr(input_ids, "ndim", 0) != 2 or not isinstance(keep, int):
        return wrapped(*args, **kwargs)
    end_padding = sequence_parallel.pad(input_ids[:1], padding_value=0).shape[-1] - input_ids.shape[-1]
    return call_unshifted(lambda kept: call_with(wrapped, args, kwargs, logits_to_keep=kept), keep, end_padding)


class KeepLastLogits:
    """A model proxy whose output keeps only the last ``keep`` logits, as if it honoured ``logits_to_keep``.

    For models that ignore ``logits_to_keep`` and return all L positions (TRL #3681: trl 0.19.0-0.19.1
    dropped the trim that protected them). The slice is a view: no copy, and models that do honour
    it are unaffected (their logits already have ``keep`` rows).
    """

    def __init__(self, model: Any, keep: int) -> None:
        self._model, self._keep = model, keep

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        output = self._model(*args, **kwargs)
        logits = getattr(output, "logits", None)
        if logits is not None and logits.shape[1] > self._keep:
            output.logits = logits[:, -self._keep :]
        return output

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)
