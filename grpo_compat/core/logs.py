"""grpo_compat's one way to print: the `grpo_compat` logger, on rank 0 only.

Everything that tells the user something (the engine's report, validation warnings, patches, the
watchdog, the swift plugin) calls ``log()``, so a message is printed once per launch however many
processes it has, and ``GRPO_COMPAT_LOG_LEVEL`` quietens all of it. ``logging`` is imported on the
first message, not on ``import grpo_compat``.
"""

from __future__ import annotations

import os

LOG_LEVEL_ENV = "GRPO_COMPAT_LOG_LEVEL"


def is_main_process() -> bool:
    """Rank 0 of torchrun / accelerate / deepspeed launches, or a plain single process."""
    return all(os.environ.get(name, "0") == "0" for name in ("RANK", "LOCAL_RANK"))


def log(level: str, message: str, *args: object) -> None:
    """Log through the `grpo_compat` logger, on rank 0 only (a default handler, as transformers does)."""
    if is_main_process():
        import logging

        logger = logging.getLogger("grpo_compat")
        if not getattr(logger, "grpo_compat_configured", False):  # not `handlers`: callers may add their own
            logger.grpo_compat_configured = True  # type: ignore[attr-defined]
            # As transformers does for its own logger: visible by default, not duplicated through root.
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter("[grpo_compat] %(levelname)s %(message)s"))
            logger.addHandler(handler)
            logger.setLevel(os.environ.get(LOG_LEVEL_ENV, "INFO").upper())
            logger.propagate = False
        getattr(logger, level)(message, *args)
