"""A grpo_compat refusal's traceback shows the user's frames and upstream's, not grpo_compat's own.

A refusal (a :class:`GRPOCompatError`) is raised from inside the engine: a wrapper per patch on the target
(``wrapping.patched`` and the patch function, up to a dozen frames on ``GRPOTrainer.__init__``), then the
check in ``grpo_compat.fixes``. None of those frames helps a user: the message says what to change. So the
wrappers re-raise a refusal with a traceback that holds no grpo_compat frame (:func:`without_own_frames`) but
their own raising one, and the ``sys.excepthook`` that ``apply()`` installs drops that one too, so the
traceback Python prints for an uncaught refusal, under any launcher, ends at the user's (or upstream's) call.

``GRPO_COMPAT_TRACEBACK=full`` keeps every frame (debugging grpo_compat itself). Exceptions that are not
grpo_compat's are never touched: an upstream error keeps every frame, ours included.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType

from grpo_compat.core.errors import GRPOCompatError

TRACEBACK_ENV = "GRPO_COMPAT_TRACEBACK"


def _own_folders() -> tuple[str, ...]:
    """grpo_compat's source folders: the package, and its patches (inside it in a wheel, ``patches/`` beside it in a
    checkout installed editable); found without importing a patch module, on the error path only."""
    import importlib.util

    folders = {Path(__file__).resolve().parents[1]}
    spec = importlib.util.find_spec("grpo_compat.patches")
    for location in (spec and spec.submodule_search_locations) or ():
        folders.add(Path(location).resolve())
    return tuple(str(folder) + os.sep for folder in folders)


def full_tracebacks_asked() -> bool:
    return os.environ.get(TRACEBACK_ENV, "").strip().lower() == "full"


def is_own_frame(filename: str, own_folders: tuple[str, ...]) -> bool:
    try:
        path = str(Path(filename).resolve())
    except (OSError, ValueError):
        return False
    return path.startswith(own_folders)


def without_own_frames(tb: TracebackType | None) -> TracebackType | None:
    """The traceback chain ``tb`` less grpo_compat's frames (None when it holds nothing else)."""
    own_folders = _own_folders()
    kept = []
    entry = tb
    while entry is not None:
        if not is_own_frame(entry.tb_frame.f_code.co_filename, own_folders):
            kept.append(entry)
        entry = entry.tb_next
    rebuilt = None
    for entry in reversed(kept):
        rebuilt = TracebackType(rebuilt, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return rebuilt


def is_refusal(error: BaseException | None) -> bool:
    return isinstance(error, GRPOCompatError) and not full_tracebacks_asked()


def trim_refusals(error: BaseException) -> None:
    """Drop grpo_compat's frames from ``error`` and the refusals it was raised from or during (printed too)."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if is_refusal(current):
            # raised by grpo_compat with no caller outside it (its own command line): kept as it was
            current.__traceback__ = without_own_frames(current.__traceback__) or current.__traceback__
        pending += [current.__cause__, current.__context__]
