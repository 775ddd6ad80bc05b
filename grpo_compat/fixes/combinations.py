"""Refusals of installed versions (and settings) that cannot train, shared by the refusal patches.

A refusal patch's ``requires`` is the window where upstream fails; its wrapper, on the trainer's
``__init__``, calls :func:`refuse` before upstream loads anything. The message follows the settings
checks' style: what breaks, on which versions, at most two fixes, and the catalogue record.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn

from grpo_compat.core.errors import UnsupportedCombinationError
from grpo_compat.core.versions import installed_version


def installed(*distributions: str) -> str:
    """``"trl 0.14.0 with transformers 4.52.4"``: the versions a refusal is about, as installed."""
    return " with ".join(f"{name} {installed_version(name) or '(not installed)'}" for name in distributions)


def refuse(failure: str, problem: str, fixes: Sequence[str]) -> NoReturn:
    """Raise UnsupportedCombinationError: ``problem`` (naming the versions), then at most two fixes."""
    if not 1 <= len(fixes) <= 2:
        raise ValueError("a refusal names one or two fixes")
    raise UnsupportedCombinationError(
        f"{problem} Fix: {' or '.join(fixes)}. "
        f"Refused before the model loads (grpo_compat catalogue: {failure}; `grpo-compat doctor` lists it)."
    )
