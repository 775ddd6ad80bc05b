"""Settings that quietly change what GRPO optimises, named before the model loads.

Each is a combination upstream accepts and trains, but whose objective is not the one its names suggest, on the
releases listed with it (read from trl's sources of every release; trl later warns or refuses itself):

- GSPO (``importance_sampling_level="sequence"``) with a loss type that sums per-token terms (bnpo, dr_grpo, dapo,
  cispo): each sequence's clipped ratio is repeated on every token and summed, so a sequence weighs as much as it is
  long, not one (trl #3823; trl 1.7.0, PR #6042, warns). The GSPO paper's objective is loss_type="grpo".
"""

from __future__ import annotations

from typing import Any

HEADLINE = "These settings change the GRPO objective"
# trl 1.7's own list (PR #6042): the loss types whose per-token sum length-weights a sequence-level ratio.
TOKEN_SUMMED = ("bnpo", "dr_grpo", "dapo", "cispo")


def sequence_level_token_summed(config: Any) -> str | None:
    """The warning for GSPO with a token-summed loss type; None for any other settings."""
    level = getattr(config, "importance_sampling_level", "token")
    loss_type = getattr(config, "loss_type", None)
    if level != "sequence" or loss_type not in TOKEN_SUMMED:
        return None
    return (
        f"{HEADLINE}: importance_sampling_level='sequence' (GSPO) with loss_type={loss_type!r} sums each sequence's "
        "ratio over its tokens, so every sequence is weighted by its completion length instead of once, which is not "
        "GSPO's per-sequence objective (trl #3823; trl 1.7 warns of it too). What to change: loss_type='grpo' for the "
        "GSPO paper's objective; keep this loss type only if length weighting is what you want."
    )
