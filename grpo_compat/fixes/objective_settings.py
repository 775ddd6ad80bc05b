"""Settings that quietly change what GRPO optimises, named before the model loads.

Each is a combination upstream accepts and trains, but whose objective is not the one its names suggest, on the
releases listed with it (read from trl's sources of every release; trl later warns or refuses itself):

- GSPO (``importance_sampling_level="sequence"``) with a loss type that sums per-token terms (bnpo, dr_grpo, dapo,
  cispo): each sequence's clipped ratio is repeated on every token and summed, so a sequence weighs as much as it is
  long, not one (trl #3823; trl 1.7.0, PR #6042, warns). The GSPO paper's objective is loss_type="grpo".
- ms-swift 3.2.1-3.3.x GRPO with ``--use_vllm true --sleep_level 1`` (or 2): RLHFArguments sets
  gradient_accumulation_steps to 1 while it parses, over the user's value (and over ms-swift's own default, which
  would have been ceil(16 / batch / processes)), so each optimizer step sees fewer completions than asked
  (ms-swift #3943; 3.4.0, PR #3969, keeps the value).
"""

from __future__ import annotations

from typing import Any

from grpo_compat.fixes.validation import field_getter  # plain Python: imports no torch

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


# ms-swift 3.2.1 (RLHFArguments._init_grpo) to 3.3.x; 3.4.0 removed the override (PR #3969).
SLEEP_LEVEL_FORCES_ACCUMULATION = "ms-swift>=3.2.1,<3.4"


def sleep_level_forces_accumulation(arguments: Any, swift_version: str) -> str | None:
    """Why ms-swift will train these GRPO arguments with gradient_accumulation_steps 1 instead of the one asked for;
    None when it keeps it (no colocated vLLM with sleep_level > 0, or gradient_accumulation_steps 1 asked)."""
    get = field_getter(arguments)
    use_vllm = str(get("use_vllm", False)).lower() in ("true", "1")
    sleep_level = get("sleep_level", 0) or 0
    if get("rlhf_type", None) != "grpo" or not use_vllm or get("async_generate", False) or int(sleep_level) <= 0:
        return None
    asked = get("gradient_accumulation_steps", None)
    if asked is not None and int(asked) == 1:
        return None
    what = f"gradient_accumulation_steps={asked}" if asked is not None else "its default gradient_accumulation_steps"
    return (
        f"ms-swift {swift_version} GRPO with use_vllm and sleep_level={sleep_level} replaces {what} with 1 while it "
        "parses its arguments, without a word: every optimizer step accumulates fewer completions than asked, and "
        "the learning rate acts on a smaller batch (ms-swift #3943; 3.4 keeps the value). Fix: "
        "per_device_train_batch_size x gradient_accumulation_steps as one larger per_device_train_batch_size with "
        'gradient_accumulation_steps=1, or --sleep_level 0, or pip install "ms-swift>=3.4".'
    )
