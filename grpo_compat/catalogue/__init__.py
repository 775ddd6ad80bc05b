"""The failure catalogue: every GRPO failure grpo_compat knows, its versions, and how it is handled.

The records are data, in ``failures.toml`` beside this file (its header explains each field). Reading
it imports neither torch nor any upstream library.

    python -m grpo_compat.tools.regenerate   # docs/failures.md, with the other generated files

A record does not list its patches: each patch names its records (``catalogue=`` in its declaration),
read here from the generated patch index.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from grpo_compat.core.versions import parse_window, window_problem

KINDS = ("crash", "misleading", "silent", "hang")
HANDLINGS = ("fixed", "refused", "diagnosed", "explained")
# Where every install in a record's window stops, whatever its config, model and settings ("" where that depends on
# them): "import", the GRPO trainer's module cannot be imported. doctor and the what-if report such a record as an
# error (exit 1) where the reading of the code cannot see the failure itself (a check in compiled code).
STOPS = ("", "import")


@dataclass(frozen=True)
class Failure:
    id: str
    title: str
    kind: str
    patterns: tuple[str, ...]
    hints: tuple[str, ...]  # generic messages / settings: "possibly", and only on the versions of `affects`
    affects: tuple[tuple[str, ...], ...]  # alternatives, each a set of windows that must all hold; () = every version
    cause: str
    fix: str
    references: tuple[str, ...]
    census: tuple[int, ...]
    handling: str
    patches: tuple[str, ...]  # the patches that name this record in their declaration (catalogue=)
    reproduced: str
    confirmed: bool = True  # False: reported, but it did not reproduce here; never listed as affecting an install
    stops: str = ""  # one of STOPS: where every install in the window fails, whatever its config

    @property
    def stops_the_import(self) -> bool:
        """Every install in the window fails to import the GRPO trainer's module: an error wherever the versions
        fall in the window, with no config or model to wait for."""
        return self.stops == "import"

    def affects_versions(self, versions: dict[str, str | None] | None = None) -> bool:
        """Whether these versions (default: the installed ones) fall in one of the record's windows."""
        if not self.confirmed:
            return False
        return not self.affects or any(window_problem(windows, versions) is None for windows in self.affects)

    def may_affect(self, versions: dict[str, str]) -> bool:
        """Whether these versions may fall in one of the windows: a package of unknown version rules none out.

        For a log from another machine (``grpo-compat explain``), where an absent package means "not stated".
        """
        return not self.affects or any(
            window_problem(tuple(w for w in windows if parse_window(w)[0] in versions), versions) is None
            for windows in self.affects
        )

    def matches(self, text: str) -> bool:
        return any(re.search(pattern, text) for pattern in self.patterns)

    def to_dict(self) -> dict:
        return {name: list(value) if isinstance(value, tuple) else value for name, value in vars(self).items()}


class CatalogueError(ValueError):
    """failures.toml has a record that does not follow the format of its header."""


def _toml(text: str) -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    return tomllib.loads(text)


def read_records() -> list[dict]:
    """The records of failures.toml as written."""
    return list(_records(resources.files(__name__).joinpath("failures.toml").read_text(encoding="utf-8")))


@cache
def _records(text: str) -> tuple[dict, ...]:
    # parsed once per process for each text: doctor reads the catalogue three times (a tenth of a second each)
    return tuple(_toml(text).get("failure", []))


def load_failures(patches: Iterable[Any] | None = None) -> list[Failure]:
    """Every record of the catalogue, in file order, with the patches (default: every declared one) naming it."""
    if patches is None:
        from grpo_compat.core.registry import declared_patches

        patches = declared_patches()
    handled_by: dict[str, list[str]] = {}
    for patch in sorted(patches, key=lambda p: p.id):
        for record in patch.catalogue:
            handled_by.setdefault(record, []).append(patch.id)
    failures = []
    for record in read_records():
        try:
            failures.append(
                Failure(
                    id=record["id"],
                    title=record["title"],
                    kind=record["kind"],
                    patterns=tuple(record.get("patterns", ())),
                    hints=tuple(record.get("hints", ())),
                    affects=tuple(tuple(windows) for windows in record.get("affects", ())),
                    cause=" ".join(record["cause"].split()),
                    fix=record["fix"],
                    references=tuple(record.get("references", ())),
                    census=tuple(record.get("census", ())),
                    handling=record["handling"],
                    patches=tuple(handled_by.get(record["id"], ())),
                    reproduced=record["reproduced"],
                    confirmed=record.get("confirmed", True),
                    stops=record.get("stops", ""),
                )
            )
        except KeyError as missing:
            raise CatalogueError(f"failure {record.get('id', '?')!r} lacks the field {missing}") from None
    return failures


def affecting_this_install(versions: dict[str, str | None] | None = None) -> list[Failure]:
    """The records whose windows the installed versions (or ``versions``) fall in."""
    return [failure for failure in load_failures() if failure.affects_versions(versions)]


def window_distributions(failures: Iterable[Failure]) -> list[str]:
    """Every distribution the records' windows name (pyarrow, numpy, ...), in the order first named: what a reader
    of the installed versions must look up for the windows to be judged."""
    return list(dict.fromkeys(parse_window(window)[0] for f in failures for windows in f.affects for window in windows))


EVIDENCE_PAGE = "developing/failure-evidence.md"


def to_markdown(failures: list[Failure]) -> str:
    """docs/failures.md, for users: each record's cause, fix, how it is recognised, upstream's threads. How each
    was reproduced, and the project's census rows it covers, are the developer page's (evidence_markdown)."""
    lines = [
        "# Known GRPO failures",
        "",
        "Generated from `grpo_compat/catalogue/failures.toml` and the patches' declarations",
        "(`python -m grpo_compat.tools.regenerate`); edit those, not this file. Handling: fixed (a patch makes the",
        "run train), refused (before any model loads, with the fix), diagnosed (the learning watchdog names it),",
        "explained (recorded; nothing prevents it).",
        "Longer write-ups of KF-1 to KF-5: [known_failures.md](known_failures.md). How each record was reproduced:",
        f"[the evidence]({EVIDENCE_PAGE}). `grpo-compat doctor --failure ID` prints one record.",
        "",
        "| id | kind | versions | handling | patches |",
        "|---|---|---|---|---|",
    ]
    for failure in failures:
        versions = " or ".join(" + ".join(windows) for windows in failure.affects) or "all"
        lines.append(
            f"| [{failure.id}](#{failure.id.replace('.', '')}) | {failure.kind} | {versions} | {failure.handling} "
            f"| {', '.join(failure.patches) or '-'} |"
        )
    for failure in failures:
        lines += ["", *record_markdown(failure, evidence=False)]
    return "\n".join(lines) + "\n"


def evidence_markdown(failures: list[Failure]) -> str:
    """docs/developing/failure-evidence.md: how each record was reproduced (cells, reproducers, numbers) and the
    rows of the project's field-report census it covers."""
    lines = [
        "# How each known failure was reproduced",
        "",
        "Generated from `grpo_compat/catalogue/failures.toml` (`python -m grpo_compat.tools.regenerate`): each",
        "record's `reproduced` field and the census rows it covers. The records themselves, for users:",
        "[Known failures](../failures.md).",
    ]
    for failure in failures:
        lines += ["", f"## {failure.id}", "", f"- Reproduced: {failure.reproduced}"]
        if failure.census:
            lines.append(f"- Census rows: {', '.join(map(str, failure.census))}")
    return "\n".join(lines) + "\n"


def record_markdown(failure: Failure, evidence: bool = True) -> list[str]:
    """One record's section of docs/failures.md (without ``evidence``: how it was reproduced, its census rows), also
    what `grpo-compat doctor --failure ID` prints."""
    lines = [f"## {failure.id}", "", f"**{failure.title}**", ""]
    lines += [f"- Cause: {failure.cause}", f"- Fix: {failure.fix}"]
    if evidence:
        lines.append(f"- Reproduced: {failure.reproduced}")
    if failure.patterns:
        lines.append("- Identified by: " + "; ".join(f"`{pattern}`" for pattern in failure.patterns))
    if failure.hints:
        lines.append("- Possibly, on its versions: " + "; ".join(f"`{hint}`" for hint in failure.hints))
    if failure.references:
        lines.append(f"- Upstream: {', '.join(failure.references)}")
    if evidence and failure.census:
        lines.append(f"- Census rows: {', '.join(map(str, failure.census))}")
    return lines


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="python -m grpo_compat.catalogue", description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="the docs page (docs/failures.md)")
    args = parser.parse_args(argv)
    failures = load_failures()
    print(to_markdown(failures) if args.markdown else json.dumps([f.to_dict() for f in failures], indent=2), end="")
    return 0
