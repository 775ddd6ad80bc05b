"""After ``apply()``: the ``sys.excepthook`` of an uncaught exception, under any launcher.

A grpo_compat refusal is printed without grpo_compat's frames (``core/tracebacks.py``: the user's and
upstream's stay; ``GRPO_COMPAT_TRACEBACK=full`` keeps all). The previous ``sys.excepthook`` prints the
traceback; then, when the exception is a known failure, on rank 0 only, the catalogue's explanation follows
(what happened, why, what to change; ``GRPO_COMPAT_EXPLAIN=0`` turns that off). Nothing is imported until a
crash: the catalogue loads only when there is something to explain.
"""

from __future__ import annotations

import os
import sys

EXPLAIN_ENV = "GRPO_COMPAT_EXPLAIN"

_previous_hook = None


def _explanation_wanted() -> bool:
    return os.environ.get(EXPLAIN_ENV, "1").strip().lower() not in ("0", "false", "off", "no")


def install() -> None:
    global _previous_hook
    if sys.excepthook is not _explain_after_traceback:
        _previous_hook = sys.excepthook
        sys.excepthook = _explain_after_traceback


def uninstall() -> None:
    global _previous_hook
    if sys.excepthook is _explain_after_traceback and _previous_hook is not None:
        sys.excepthook = _previous_hook
    _previous_hook = None


def _explain_after_traceback(exc_type, exc, tb) -> None:
    if exc is not None:
        try:
            from grpo_compat.core.tracebacks import trim_refusals

            exc.__traceback__ = tb
            trim_refusals(exc)
            tb = exc.__traceback__
        except Exception:  # noqa: BLE001 - printing the crash comes first, trimmed or not
            pass
    (_previous_hook or sys.__excepthook__)(exc_type, exc, tb)
    if not issubclass(exc_type, Exception) or not _explanation_wanted():  # KeyboardInterrupt, SystemExit: nothing
        return
    try:
        from grpo_compat.core.logs import is_main_process

        if not is_main_process():
            return
        import traceback

        from grpo_compat.catalogue.log_matching import explain, format_explanation

        explanation = explain("".join(traceback.format_exception(exc_type, exc, tb)), from_here=True)
        explanation.matches = [match for match in explanation.matches if match.certain and match.expected_here]
        explanation.reasoned = [finding for finding in explanation.reasoned if finding.confident]
        if explanation.matches or explanation.reasoned:
            print(
                "\n" + format_explanation(explanation, "[grpo_compat] this crash").replace("\n", "\n[grpo_compat] "),
                file=sys.stderr,
                flush=True,
            )
    except Exception:  # noqa: BLE001 - the explanation must never hide or replace the crash itself
        pass
