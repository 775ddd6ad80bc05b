"""Checks of GRPO settings that need no torch and no model: messages that say what to change.

The argument-validation work grows this into the full per-version validator; every check returns
a message (or None) so the patches and the ``grpo-compat`` command share one wording.
"""

from __future__ import annotations


def _even_at_least_two(value: object) -> int:
    number = value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1
    return max(2, number + number % 2)


def single_generation_problem(num_generations: object, per_device_train_batch_size: object) -> str | None:
    """GRPO with fewer than 2 completions per prompt trains nothing; say why and what to set."""
    if not isinstance(num_generations, int) or isinstance(num_generations, bool) or num_generations >= 2:
        return None
    batch = _even_at_least_two(per_device_train_batch_size)
    return (
        f"GRPO needs at least 2 completions per prompt, got num_generations={num_generations}. "
        "A completion's advantage is its reward minus the mean reward of its group, so in a group of "
        "one every advantage is 0 and nothing trains. per_device_train_batch_size counts completions, "
        f"not prompts. Set num_generations=2 and per_device_train_batch_size={batch} "
        f"(--num_generations 2 --per_device_train_batch_size {batch})."
    )
