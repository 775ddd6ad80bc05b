"""The engine: decides which patches apply here, waits for their targets, applies and reverts them.

Kept cheap on the ``apply()`` path: the patches are read from their generated index (declarations, no patch
module is imported), and a patch module, ``wrapping`` (which needs ``inspect``) and ``logging`` (through
``grpo_compat.core.logs``) are imported only once a target module is imported, i.e. when trl or swift has
already paid for them. Statuses need no patch module: versions, selection and whether the target modules
exist decide them until a target is imported. Even those are decided only when they can matter: at ``apply()``
when a target's package is already imported (or ``strict=True`` must refuse now), else just before the first
target package (trl, swift, transformers ...) starts loading, or when ``report()`` asks. Nothing is imported in
between, so the statuses, hooks and wrapping order are those ``apply()`` would have made; a process that never
loads upstream never pays for them.
"""

from __future__ import annotations

import os
import sys
from types import ModuleType

from grpo_compat.core import import_hooks
from grpo_compat.core.errors import PatchFailedError, UnknownPatchError
from grpo_compat.core.logs import log
from grpo_compat.core.registry import Declaration, Patch, declared_patches, declared_wrapping_order
from grpo_compat.core.report import PatchReport, Report, Status
from grpo_compat.core.versions import installed_versions, window_problem

TYPE_CHECKING = False  # typing costs milliseconds of apply(): imported by type checkers only
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

DISABLE_ENV = "GRPO_COMPAT_DISABLE"
# Statuses of a patch that should apply here and cannot (a target moved, a signature changed, the patch raised);
# strict=True refuses them. Outside its version window or for a package not installed, a patch is simply not
# applicable: every install has many such (the fixes for other releases), and they are no failure.
STRICT_FAILURES = frozenset({Status.FAILED, Status.TARGET_MISSING})


class _PatchState:
    def __init__(self, patch: Patch | Declaration, status: Status, reason: str) -> None:
        self.patch, self.status, self.reason = patch, status, reason
        self.waiting_for: set[str] = set()
        self.wrapped: list[str] = []
        self.replacements: list[Any] = []  # wrapping.Replacement, in the order they were made

    def to_report(self) -> PatchReport:
        patch = self.patch
        status, reason = self.status, self.reason
        gone = [r for r in self.replacements if not r.in_effect()]
        if status is Status.APPLIED and gone:
            # Upstream code deleted or replaced our wrapper after we installed it: say so, not "applied".
            names = ", ".join(f"{_qualified_name(r.owner)}.{r.name}" for r in gone)
            reason = f"{names} was deleted or replaced by other code after wrapping; {reason}"
            if len(gone) == len(self.replacements):
                status, reason = Status.TARGET_MISSING, f"not in effect: {reason}"
        return PatchReport(
            patch.id,
            patch.distribution,
            list(patch.requires),
            status,
            reason,
            patch.summary,
            [str(t) for t in patch.targets],
        )


def _qualified_name(owner: Any) -> str:
    module = getattr(owner, "__module__", None)
    return f"{module}.{owner.__qualname__}" if isinstance(owner, type) and module else getattr(owner, "__name__", "?")


class Engine:
    def __init__(
        self, patches: Iterable[Patch | Declaration] | None = None, order: Iterable[str] | None = None
    ) -> None:
        """``patches`` (default: every declared one, read from the index); ``order``: ids of patches sharing a target,
        outermost wrapper first (default: the registered ``WRAPPING_ORDER``; with given patches, none)."""
        self._given_patches = list(patches) if patches is not None else None
        self._given_order = tuple(order) if order is not None else None
        self._states: list[_PatchState] = []
        self._applied_order: list[_PatchState] = []
        self._active = False
        self._strict = False
        self._report_logged = False
        self._report_wanted: tuple[str, ...] = ()  # modules whose import logs the report (defer_report) ...
        self._report_after: tuple[str, ...] = ()  # ... those of them that exist, once the statuses are decided
        self._undecided: tuple[list[Patch | Declaration], _Selection] | None = None  # apply()'s, until decided
        self._report_when_decided: Report | None = None  # what apply() returned, while undecided
        self._hooks = import_hooks.PostImportFinder()

    @property
    def patches(self) -> list[Patch | Declaration]:
        return self._given_patches if self._given_patches is not None else declared_patches()

    @property
    def order(self) -> tuple[str, ...]:
        if self._given_order is not None:
            return self._given_order
        return declared_wrapping_order() if self._given_patches is None else ()

    # -- public API -------------------------------------------------------------------------------

    def apply(
        self, strict: bool = False, only: Iterable[str] | None = None, skip: Iterable[str] | None = None
    ) -> Report:
        if self._active:
            log("info", "grpo_compat.apply() was already called; nothing changed (revert() first to re-select)")
            return self.report()
        patches = self.patches
        selection = _Selection(patches, only, skip)  # unknown ids are refused now
        self._active, self._strict = True, strict
        self._undecided = (patches, selection)
        packages = self._packages_to_wait_for()
        if strict or not packages or any(name in sys.modules for name in packages):
            self._decide()
            if strict:
                _raise_on_strict_failures(self._states)
            return self.report()
        self._hooks.watch_first_start(packages, self._decide_as_upstream_loads)
        self._report_when_decided = Report.made_later(True, self._decide)
        return self._report_when_decided

    @property
    def report_deferred(self) -> bool:
        return bool(self._report_wanted)

    def defer_report(self, until_any_of: Iterable[str]) -> None:
        """Log the report when one of these modules is imported, rather than at the first patch target.

        For a caller that knows when every status is final (the ms-swift plugin: swift's GRPO trainer).
        """
        self._report_wanted = tuple(until_any_of)
        if self._undecided is not None:  # decided, with the patches, when the first upstream package loads
            self._hooks.watch_first_start(self._packages_to_wait_for(), self._decide_as_upstream_loads)
        elif self._active:
            self._report_after = tuple(name for name in self._report_wanted if import_hooks.module_exists(name))
            self._watch_report_modules()

    def revert(self) -> Report:
        self._decide()  # what apply() reported stays what it would have been
        self._hooks.clear()
        for state in reversed(self._applied_order):
            for replacement in reversed(state.replacements):
                if not replacement.restore():
                    log(
                        "warning",
                        "%s.%s was replaced by other code after patch %s; left as it is",
                        getattr(replacement.owner, "__name__", replacement.owner),
                        replacement.name,
                        state.patch.id,
                    )
        self._applied_order.clear()
        self._states = []
        self._active = self._report_logged = False
        self._report_wanted = self._report_after = ()
        return self.report()

    def report(self) -> Report:
        if self._active:
            self._decide()
            patches = [state.to_report() for state in self._states]
        else:
            patches = [
                _PatchState(p, Status.INACTIVE, "grpo_compat.apply() has not been called").to_report()
                for p in self.patches
            ]
        return Report(self._active, installed_versions(), patches, self.order)

    def plan(self, only: Iterable[str] | None = None, skip: Iterable[str] | None = None) -> Report:
        """What apply() would do in this install, without importing or patching anything."""
        patches = self.patches
        selection = _Selection(patches, only, skip)
        import_hooks.forget_found_modules()
        states = [self._initial_state(patch, selection) for patch in patches]
        for state in states:
            if state.status is Status.PENDING:
                modules = state.patch.modules
                verb = "are" if len(modules) > 1 else "is"
                state.reason = f"applies when {' and '.join(modules)} {verb} imported"
        return Report(self._active, installed_versions(), [state.to_report() for state in states], self.order)

    # -- internals --------------------------------------------------------------------------------

    def _packages_to_wait_for(self) -> set[str]:
        """The top-level packages of the selected patches' targets and of the report's modules: no patch can act,
        nor the report be logged, before one of them loads."""
        patches, selection = self._undecided
        modules = [m for p in patches if selection.reason_to_skip(p.id) is None for m in p.modules]
        return {name.partition(".")[0] for name in (*modules, *self._report_wanted)}

    def _decide_as_upstream_loads(self) -> None:
        """_decide, run by the import of upstream's first package: a failure leaves upstream unpatched, says why in
        the report and a warning, and never stops the import."""
        patches = self._undecided[0] if self._undecided is not None else []
        try:
            self._decide()
        except Exception as error:  # noqa: BLE001 - the user's import of upstream goes on, as it would unpatched
            self._hooks.clear()
            reason = f"not decided: {type(error).__name__}: {error}"
            self._states = [_PatchState(patch, Status.FAILED, reason) for patch in patches]
            self._fill_report_of_apply()
            log("warning", "grpo_compat could not decide which patches apply, none is applied (%s)", reason)

    def _decide(self) -> None:
        """What apply() decides, if it is still to be decided: each patch's status, a hook per target module of
        those pending (the innermost wrapper first), and the report's modules."""
        if self._undecided is None:
            return
        (patches, selection), self._undecided = self._undecided, None
        import_hooks.forget_found_modules()
        self._states = [self._initial_state(patch, selection) for patch in patches]
        self._report_after = tuple(name for name in self._report_wanted if import_hooks.module_exists(name))
        # The innermost wrapper is installed first: the last of the declared order, then back to the first.
        position = {patch_id: index for index, patch_id in enumerate(self.order)}
        for state in sorted(self._states, key=lambda s: -position.get(s.patch.id, -1)):
            if state.status is Status.PENDING:
                self._wait_for_targets(state)
        self._watch_report_modules()  # after the patches' hooks: a module's patches apply before its report
        self._fill_report_of_apply()

    def _fill_report_of_apply(self) -> None:
        if self._report_when_decided is not None:
            self._report_when_decided.fill(self.report())
            self._report_when_decided = None

    def _initial_state(self, patch: Patch | Declaration, selection: _Selection) -> _PatchState:
        """Pending, or why the patch will not be applied at all (selection, versions, missing module)."""
        not_selected = selection.reason_to_skip(patch.id)
        if not_selected:
            return _PatchState(patch, Status.DISABLED, not_selected)
        problem = window_problem(patch.requires)
        if problem is not None:
            kind, reason = problem
            return _PatchState(
                patch, Status.NOT_INSTALLED if kind == "not installed" else Status.OUTSIDE_WINDOW, reason
            )
        absent = [t for t in patch.targets if not t.optional and not import_hooks.module_exists(t.module)]
        if absent:
            return _PatchState(patch, Status.TARGET_MISSING, f"module {absent[0].module} not found")
        return _PatchState(patch, Status.PENDING, "waiting for " + ", ".join(patch.modules) + " to be imported")

    def _wait_for_targets(self, state: _PatchState) -> None:
        modules = [m for m in state.patch.modules if import_hooks.module_exists(m)]
        state.waiting_for = set(modules)
        if not modules:
            self._settle(state)
        for module_name in modules:
            self._hooks.watch(module_name, lambda module, s=state: self._on_import(s, module))

    def _on_import(self, state: _PatchState, module: ModuleType) -> None:
        # APPLIED too: a patch with targets in several modules is applied as soon as one is wrapped.
        if not self._active or state.status not in (Status.PENDING, Status.APPLIED):
            return
        try:
            self._apply_targets_in(state, module)
        except Exception as error:  # noqa: BLE001 - a broken patch must never break the user's import
            self._give_up(state, Status.FAILED, f"{type(error).__name__}: {error}")
        if not self._report_after:
            self._log_report_once()
        if self._strict:
            _raise_on_strict_failures([state])

    def _apply_targets_in(self, state: _PatchState, module: ModuleType) -> None:
        from grpo_compat.core import wrapping

        patch = state.patch.load()  # the patch module is imported here, once its target module is
        resolved = []
        for target in (t for t in patch.targets if t.module == module.__name__):
            try:
                owner, name, raw = wrapping.resolve(module, target)
            except wrapping.TargetNotFound as missing:
                if target.optional:
                    continue
                return self._give_up(state, Status.TARGET_MISSING, str(missing))
            expects = patch.expects if target.expects is None else target.expects
            absent = wrapping.missing_parameters(wrapping.underlying_function(raw), expects)
            if absent:
                return self._give_up(state, Status.TARGET_MISSING, f"signature of {target} changed: no {absent}")
            resolved.append((target, owner, name, raw))
        if patch.detect is not None and module.__name__ == patch.targets[0].module and state.status is Status.PENDING:
            not_needed = patch.detect(module)
            if not_needed:
                return self._give_up(state, Status.NOT_NEEDED, not_needed)
        for target, owner, name, raw in resolved:
            if wrapping.is_wrapped_by(raw, patch.id):  # by another Engine, which also owns its revert
                state.wrapped.append(f"{target.module}:{target.qualname} (already wrapped)")
            else:
                state.replacements += wrapping.wrap(owner, name, raw, target.wrapper, patch.id, patch.rebind_in)
                state.wrapped.append(f"{target.module}:{target.qualname}")
        if state.replacements and state not in self._applied_order:
            self._applied_order.append(state)
        state.waiting_for.discard(module.__name__)
        self._settle(state)

    def _settle(self, state: _PatchState) -> None:
        """Applied once any target is wrapped (saying what still waits); missing if none ever can be."""
        if state.status not in (Status.PENDING, Status.APPLIED):
            return
        if state.wrapped:
            first_time = state.status is Status.PENDING
            waiting = f"; waiting for {', '.join(sorted(state.waiting_for))}" if state.waiting_for else ""
            state.status, state.reason = Status.APPLIED, "wrapped " + ", ".join(state.wrapped) + waiting
            if first_time:
                log("debug", "applied %s (%s)", state.patch.id, state.patch.summary)
        elif not state.waiting_for:
            self._give_up(state, Status.TARGET_MISSING, "none of its targets exist in this version")

    def _give_up(self, state: _PatchState, status: Status, reason: str) -> None:
        for replacement in reversed(state.replacements):
            replacement.restore()
        state.replacements.clear()
        state.wrapped.clear()
        state.status, state.reason = status, reason
        if state in self._applied_order:
            self._applied_order.remove(state)
        log(
            "warning" if status in STRICT_FAILURES else "debug",
            "%s %s: %s",
            state.patch.id,
            status.value,
            reason,
        )

    def _watch_report_modules(self) -> None:
        for name in self._report_after:
            self._hooks.watch(name, lambda module: self._log_report_once())

    def _log_report_once(self) -> None:
        # Logged when the trainer's module loads (defer_report), else the first target module, rather than in
        # apply(): by then the statuses are real, and logging has been imported by upstream anyway. One line;
        # the table is for DEBUG, report() and doctor.
        if not self._report_logged:
            self._report_logged = True
            report = self.report()
            log("info", "%s", report.one_line())
            log("debug", "%s", report)


class _Selection:
    """Which patches the caller and GRPO_COMPAT_DISABLE switched off; unknown ids are an error."""

    def __init__(
        self, patches: list[Patch | Declaration], only: Iterable[str] | None, skip: Iterable[str] | None
    ) -> None:
        known = [p.id for p in patches]
        self.disabled = _ids_from_env(known)
        self.only = _checked_ids(only, known, "only") if only is not None else None
        self.skip = _checked_ids(skip, known, "skip") if skip is not None else set()

    def reason_to_skip(self, patch_id: str) -> str | None:
        if patch_id in self.disabled:
            return f"switched off by {DISABLE_ENV}"
        if self.only is not None and patch_id not in self.only:
            return "not selected by only="
        if patch_id in self.skip:
            return "skipped by skip="
        return None


def _checked_ids(ids: Iterable[str], known: list[str], source: str) -> set[str]:
    wanted = {ids} if isinstance(ids, str) else set(ids)
    unknown = sorted(str(i) for i in wanted - set(known))
    if unknown:
        raise UnknownPatchError(f"unknown patch id(s) in {source}: {', '.join(unknown)}. Valid ids: {', '.join(known)}")
    return wanted


def _ids_from_env(known: list[str]) -> set[str]:
    value = os.environ.get(DISABLE_ENV, "").strip()
    if value.lower() == "all":
        return set(known)
    return _checked_ids([part.strip() for part in value.split(",") if part.strip()], known, DISABLE_ENV)


def _raise_on_strict_failures(states: Iterable[_PatchState]) -> None:
    failed = [s for s in states if s.status in STRICT_FAILURES]
    if failed:
        raise PatchFailedError(
            "grpo_compat.apply(strict=True): " + "; ".join(f"{s.patch.id} {s.status.value}: {s.reason}" for s in failed)
        )
