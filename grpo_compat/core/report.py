"""What grpo_compat did in this process: per patch status and reason, plus the upstream versions."""

from __future__ import annotations

import enum

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


class Status(str, enum.Enum):
    APPLIED = "applied"
    PENDING = "pending"  # in its window, waiting for its module to be imported
    NOT_NEEDED = "not needed"
    OUTSIDE_WINDOW = "outside version window"
    NOT_INSTALLED = "not installed"
    TARGET_MISSING = "target missing"
    DISABLED = "disabled"
    FAILED = "failed"
    INACTIVE = "inactive"  # apply() has not been called

    def __str__(self) -> str:
        return self.value


class PatchReport:
    __slots__ = ("distribution", "id", "reason", "requires", "status", "summary", "targets")

    def __init__(
        self,
        id: str,  # noqa: A002 - the patch id, as everywhere else
        distribution: str,
        requires: list[str],
        status: Status,
        reason: str,
        summary: str,
        targets: list[str],
    ) -> None:
        self.id, self.distribution, self.requires = id, distribution, requires
        self.status, self.reason, self.summary, self.targets = status, reason, summary, targets

    def to_dict(self) -> dict:
        return {
            name: getattr(self, name) if name != "status" else self.status.value
            for name in ("id", "distribution", "requires", "status", "reason", "summary", "targets")
        }


# How the one line a patched run logs ends: the mark a test or a log reader counts the reports by.
ONE_LINE_MARK = "(grpo_compat.report() or grpo-compat doctor for details)"

# The patches whose wrappers are (or, before their module is imported, will be) in place.
_WRAPPING = (Status.APPLIED, Status.PENDING)


class Report:
    """Returned by ``apply()``, ``revert()`` and ``report()``; ``str()`` gives the table, ``to_dict()`` JSON."""

    def __init__(
        self,
        active: bool,
        versions: dict[str, str | None],
        patches: list[PatchReport],
        order: tuple[str, ...] = (),
    ) -> None:
        self.active, self.versions, self.patches = active, versions, patches
        self._order = order

    @classmethod
    def made_later(cls, active: bool, decide: Callable[[], None]) -> Report:
        """A report filled in (:meth:`fill`) when its statuses are decided; read before then, it calls ``decide()``.

        What ``apply()`` returns while nothing upstream has loaded: the statuses are decided when it does.
        """
        report = cls.__new__(cls)
        report.active, report._decide = active, decide
        return report

    def fill(self, made: Report) -> None:
        self.versions, self.patches, self._order = made.versions, made.patches, made._order
        self.__dict__.pop("_decide", None)

    def __getattr__(self, name: str):
        # Reached only for an attribute not set: the content of a report made later, before it was decided.
        decide = self.__dict__.pop("_decide", None)
        if decide is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        decide()
        return object.__getattribute__(self, name)

    @property
    def wrapping_order(self) -> dict[str, list[str]]:
        """Target -> ids of the patches wrapping it, outermost first, where more than one does."""
        position = {patch_id: index for index, patch_id in enumerate(self._order)}
        wrappers: dict[str, list[str]] = {}
        for patch in self.patches:
            if patch.status in _WRAPPING:
                for target in patch.targets:
                    wrappers.setdefault(target.rstrip("?"), []).append(patch.id)
        return {
            target: sorted(ids, key=lambda i: position.get(i, len(position)))
            for target, ids in wrappers.items()
            if len(ids) > 1
        }

    def status_of(self, patch_id: str) -> Status:
        return self[patch_id].status

    def __getitem__(self, patch_id: str) -> PatchReport:
        for patch in self.patches:
            if patch.id == patch_id:
                return patch
        raise KeyError(f"no patch {patch_id!r}; patches: {', '.join(p.id for p in self.patches)}")

    @property
    def newer_than_tested(self) -> list[dict]:
        """Installed packages newer than the newest release the version matrix has proven, each with the patches
        acting here through a window with no upper bound (grpo_compat.core.tested)."""
        from grpo_compat.core.tested import newer_than_tested
        from grpo_compat.core.versions import window_problem

        acting = [
            patch
            for patch in self.patches
            if patch.status in _WRAPPING
            or (patch.status is Status.INACTIVE and window_problem(tuple(patch.requires), self.versions) is None)
        ]
        return newer_than_tested(self.versions, acting)

    def to_dict(self) -> dict:
        return {
            "active": self.active,
            "versions": dict(self.versions),
            "newer_than_tested": self.newer_than_tested,
            "patches": [p.to_dict() for p in self.patches],
            "wrapping_order": self.wrapping_order,
        }

    def to_json(self) -> str:
        import json

        return json.dumps(self.to_dict(), indent=2)

    def one_line(self) -> str:
        """What a patched run logs when nothing is wrong: how many patches act, on which versions, where to look."""
        from grpo_compat.core.versions import GRPO_COMPAT_VERSION

        applied = sum(patch.status is Status.APPLIED for patch in self.patches)
        waiting = sum(patch.status is Status.PENDING for patch in self.patches)
        count = f"{applied} patch{'' if applied == 1 else 'es'} active"
        if waiting:
            count += f" ({waiting} more when {'its module is' if waiting == 1 else 'their modules are'} imported)"
        stack = ", ".join(
            f"{name} {self.versions[name]}" for name in ("trl", "ms-swift", "transformers") if self.versions.get(name)
        )
        from grpo_compat.core.tested import short_note

        newer = short_note(self.newer_than_tested)
        newer = f"; {newer}" if newer else ""
        return f"grpo_compat {GRPO_COMPAT_VERSION}: {count} for {stack or 'this install'}{newer} {ONE_LINE_MARK}"

    def __str__(self) -> str:
        versions = ", ".join(f"{name} {version}" for name, version in self.versions.items() if version)
        lines = [f"grpo_compat report ({'active' if self.active else 'not applied'}): {versions}"]
        width = max((len(p.id) for p in self.patches), default=0)
        for patch in self.patches:
            lines.append(f"  {patch.id:<{width}}  {patch.status.value:<22}  {patch.reason}")
        for target, ids in self.wrapping_order.items():
            lines.append(f"  wrapping order of {target}: {' > '.join(ids)} > upstream")
        from grpo_compat.core.tested import describe

        lines += describe(self.newer_than_tested)
        return "\n".join(lines)

    __repr__ = __str__
