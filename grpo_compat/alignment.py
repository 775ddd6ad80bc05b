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


def pad_result(result: Any, columns: int, kept: int) -> Any:
    """Pad every (B, ``kept``) tensor of a log-prob method's result (a tensor or a tuple of them).

    Tuples hold the log-probs, the entropies (or None) and, on trl >= 1.7, an auxiliary loss: only
    the per-token tensors (dim 1 of size ``kept``) get columns; anything else passes through.
    """
    if columns <= 0:
        return result
    if isinstance(result, tuple):
        return tuple(pad_result(item, columns, kept) for item in result)
    if getattr(result, "ndim", 0) >= 2 and result.shape[1] == kept:
        return pad_front(result, columns)
    return result


def call_aligned(
    compute: Callable[[int], Any], sequence_length: int, logits_to_keep: int, empty: Callable[[], Any]
) -> Any:
    """``compute(K)`` for the columns a logit predicts, padded to ``logits_to_keep`` columns.

    ``compute`` is the upstream computation for a given K. ``empty()`` builds the result when no
    column at all is predictable (a row of one token). Aligned calls are passed through untouched.
    """
    missing = unpredictable_columns(sequence_length, logits_to_keep)
    if missing == 0:
        return compute(logits_to_keep)
    kept = int(logits_to_keep) - missing
    if kept == 0:
        return empty()
    return pad_result(compute(kept), missing, kept)


def clear_unpredictable(mask: Any, columns: int) -> Any:
    """A copy of the (B, K) loss mask with its first ``columns`` columns cleared; ``mask`` itself when 0."""
    if columns <= 0 or mask is None:
        return mask
    cleared = mask.clone()
    cleared[:, :columns] = 0
    return cleared


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
