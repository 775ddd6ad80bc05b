"""After ``apply()``: an uncaught exception that is a known failure gets its explanation under the traceback.

The previous ``sys.excepthook`` prints the traceback first, unchanged; then, on rank 0 only, the
catalogue's explanation follows (what happened, why, what to change). ``GRPO_COMPAT_EXPLAIN=0`` turns
it off. Nothing is imported until a crash: the catalogue loads only when there is something to explain.
"""

from __future__ import annotations

import os
import sys

EXPLAIN_ENV = "GRPO_COMPAT_EXPLAIN"

_previous_hook = None


def install() -> None:
    global _previous_hook
    if os.environ.get(EXPLAIN_ENV, "1").strip().lower() in ("0", "false", "off", "no"):
        return
    if sys.excepthook is not _explain_after_traceback:
        _previous_hook = sys.excepthook
        sys.excepthook = _explain_after_traceback


def uninstall() -> None:
    global _previous_hook
    if sys.excepthook is _explain_after_traceback and _previous_hook is not None:
        sys.excepthook = _previous_hook
    _previous_hook = None


def _explain_after_traceback(exc_type, exc, tb) -> None:
    (_previous_hook or sys.__excepthook__)(exc_type, exc, tb)
    if not issubclass(exc_type, Exception):  # KeyboardInterrupt, SystemExit: nothing to explain
        return
    try:
        from grpo_compat.core.logs import is_main_process

        if not is_main_process():
            return
        import traceback

        from grpo_compat.catalogue.log_matching import explain, format_explanation

        explanation = explain("".join(traceback.format_exception(exc_type, exc, tb)))
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
