"""grpo_compat: make GRPO training with TRL and ms-swift work across the versions people run.

    import grpo_compat
    grpo_compat.apply()     # before or after importing trl / swift
    print(grpo_compat.report())

Importing this package or calling apply() imports neither torch nor trl nor swift: each patch
waits for its upstream module to be imported and is applied then.
"""

from __future__ import annotations

from grpo_compat.core.errors import GRPOCompatError, GRPOSettingsError, LaunchError, PatchFailedError, UnknownPatchError
from grpo_compat.core.report import Report, Status
from grpo_compat.core.versions import GRPO_COMPAT_VERSION as __version__

__all__ = [
    "GRPOCompatError",
    "GRPOSettingsError",
    "LaunchError",
    "PatchFailedError",
    "Report",
    "Status",
    "UnknownPatchError",
    "__version__",
    "apply",
    "report",
    "revert",
]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from grpo_compat.core.engine import Engine


def _engine_here() -> Engine:
    """The process's engine, built on first use: importing the package (grpo-compat's commands do) stays cheap."""
    engine = globals().get("_engine")
    if engine is None:
        from grpo_compat.core.engine import Engine

        engine = globals()["_engine"] = Engine()
    return engine


def __getattr__(name: str):
    if name == "_engine":  # grpo_compat._engine: the ms-swift plugin and the startup hook of `grpo-compat run`
        return _engine_here()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def apply(strict: bool = False, only: Iterable[str] | None = None, skip: Iterable[str] | None = None) -> Report:
    """Apply every patch needed by this install (idempotent); returns the report.

    ``only`` / ``skip`` select patches by id; ``GRPO_COMPAT_DISABLE=id1,id2`` (or ``all``) switches
    patches off from the environment. With ``strict=True`` a patch that should apply here and cannot (a
    target moved, a signature changed) raises :class:`PatchFailedError` instead of being skipped and reported;
    a patch outside its version window, or for a package not installed, is not applicable and never raises.
    """
    from grpo_compat import crash_explanation
    from grpo_compat.fixes.detectors import GRPO_TRAINER_MODULES

    engine = _engine_here()
    if not engine.report_deferred:  # the zero-code hook and the swift plugin say when themselves
        # The report is logged once the GRPO trainer's module is imported: every patch on the training path
        # has applied by then, so the one line never counts one as waiting that is applied a moment later.
        engine.defer_report(GRPO_TRAINER_MODULES)
    report = engine.apply(strict=strict, only=only, skip=skip)
    # What loading trl's / ms-swift's GRPO trainer would trip over in this install, read from its files: a warning
    # per finding, once per launch (cached by the installed versions; never a refusal).
    from grpo_compat.static_check import log_findings_once

    log_findings_once()
    crash_explanation.install()  # a crash that is a known failure gets its explanation (GRPO_COMPAT_EXPLAIN=0: off)
    return report


def revert() -> Report:
    """Undo every applied patch, in reverse order, restoring the exact original objects."""
    from grpo_compat import crash_explanation

    crash_explanation.uninstall()
    return _engine_here().revert()


def report() -> Report:
    """Per patch: status and reason; plus the installed versions of the upstream stack."""
    return _engine_here().report()
