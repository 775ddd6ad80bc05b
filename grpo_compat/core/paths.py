"""Where grpo_compat keeps what it derives on this machine: the user's cache folder."""

from __future__ import annotations

import os


def user_cache_folder(*parts: str) -> str:
    """``$XDG_CACHE_HOME/grpo_compat/...`` (``~/.cache`` without it): derived data, safe to delete at any time."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "grpo_compat", *parts)
