"""grpo_compat's one way to print: the `grpo_compat` logger, on rank 0 only.

Everything that tells the user something (the engine's report, validation warnings, patches, the
watchdog, the swift plugin) calls ``log()``, so a message is printed once per launch however many
processes it has, and ``GRPO_COMPAT_LOG_LEVEL`` quietens all of it. ``logging`` is imported on the
first message, not on ``import grpo_compat``.
"""

from __future__ import annotations

import os
import sys

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
            handler = _handler_above_progress_bars(logging)
            handler.setFormatter(logging.Formatter("[grpo_compat] %(levelname)s %(message)s"))
            logger.addHandler(handler)
            logger.setLevel(os.environ.get(LOG_LEVEL_ENV, "INFO").upper())
            logger.propagate = False
        getattr(logger, level)(message, *args)


def log_once(owner: object, level: str, message: str, patch_id: str, *args: object) -> None:
    """``log`` "<patch_id>: <message>" the first time the patch says it of ``owner`` (a trainer), not every step."""
    said = f"_grpo_compat_{patch_id}_logged"
    if not getattr(owner, said, False):
        setattr(owner, said, True)
        log(level, "%s: " + message, patch_id, *args)


def _handler_above_progress_bars(logging):
    """A stderr handler that prints above a running tqdm bar (the Trainer's), never onto the bar's line."""

    class ProgressBarAwareHandler(logging.StreamHandler):
        def emit(self, record: logging.LogRecord) -> None:
            tqdm = sys.modules.get("tqdm")  # a bar exists only if upstream imported tqdm; never import it here
            bar_class = getattr(tqdm, "tqdm", None)
            if not getattr(bar_class, "_instances", None):
                return super().emit(record)
            try:
                bar_class.write(self.format(record), file=self.stream)  # clears the bars, writes, redraws them
            except Exception:  # noqa: BLE001 - as logging does: a handler's failure is reported, never raised
                self.handleError(record)
            return None

    return ProgressBarAwareHandler()
