"""Which top-level modules each distribution provides: what a set of distributions can import at all.

``data/top-level-modules.json.gz`` is written by ``python -m matrix.module_providers`` from the ``RECORD`` of every
distribution found in the environments and wheel caches it is given (never by hand), and holds, per distribution,
the top-level modules any release read provides and the releases read:

    {"distributions": {canonical name: {"modules": [top-level module, ...], "releases": [version, ...]}}}

The what-if (grpo_compat.static_check.hypothetical) uses it to tell a module no distribution of a set provides
(ms-swift 3.10 imports ``msgspec`` without declaring it) from one it cannot place: a distribution it knows nothing of
might provide any module, so one such distribution in the set is enough for silence.
"""

from __future__ import annotations

import csv
import gzip
import json
import os
import re
from collections.abc import Iterable
from functools import cache

from grpo_compat.histories import DATA, IMPORT_NAMES

PATH = DATA / "top-level-modules.json.gz"
_RECORD_HEADS = re.compile(r"^[^/,\r\n]*/?", re.MULTILINE)
_RECORD_DATA = re.compile(r"^[^/,\r\n]*\.data/(?:purelib|platlib)/[^,\r\n]*", re.MULTILINE)
_COMPILED = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\..*(so|pyd)$")  # name.cpython-312-x86_64-linux-gnu.so


def top_level_of_paths(paths: Iterable[str]) -> set[str]:
    """The top-level modules a distribution's installed files make importable (its ``RECORD`` paths): packages
    (``msgspec/__init__.py``; a folder without one is a namespace package, importable too), modules
    (``six.py``), compiled modules (``_cffi_backend.cpython-312-x86_64-linux-gnu.so``). Scripts (``../../bin``),
    metadata and ``.pth`` files are not modules; ``name.data/purelib/...`` installs into the site folder."""
    found: set[str] = set()
    seen: set[tuple[str, bool]] = set()  # a RECORD lists thousands of files under a few top-level names
    for path in paths:
        first, slash, rest = path.replace("\\", "/").partition("/")
        if first.endswith(".data") and rest.startswith(("purelib/", "platlib/")):
            first, slash, rest = rest.partition("/")[2].partition("/")
        key = (first, bool(slash))
        if key in seen:
            continue
        seen.add(key)
        if first in ("", "..", "__pycache__") or first.endswith((".dist-info", ".egg-info", ".data")):
            continue
        if slash:
            if first.isidentifier():
                found.add(first)
        elif first.endswith(".py") and first[:-3].isidentifier():
            found.add(first[:-3])
        elif match := _COMPILED.match(first):
            found.add(match.group(1))
    return found


def top_level_of_metadata(folder: str) -> set[str] | None:
    """The top-level modules of an installed distribution, from its metadata folder's ``RECORD``, else its
    ``top_level.txt``; None when neither names one (an editable install's ``RECORD`` lists only a ``.pth`` file:
    what it makes importable is not written down)."""
    try:
        with open(os.path.join(folder, "direct_url.json"), encoding="utf-8") as handle:
            if json.load(handle).get("dir_info", {}).get("editable"):
                return None
    except (OSError, ValueError, AttributeError):
        pass
    modules: set[str] = set()
    try:
        with open(os.path.join(folder, "RECORD"), encoding="utf-8", newline="") as handle:
            text = handle.read()
        if '"' in text or "\\" in text:  # quoted paths (a comma in one), or Windows separators
            modules = top_level_of_paths(row[0] for row in csv.reader(text.splitlines()) if row and row[0])
        else:  # the first part of each path, and whole paths under name.data/purelib|platlib
            modules = top_level_of_paths({*_RECORD_HEADS.findall(text), *_RECORD_DATA.findall(text)})
    except OSError:
        pass
    if not modules:
        try:
            with open(os.path.join(folder, "top_level.txt"), encoding="utf-8") as handle:
                modules = {line.strip().split("/")[0] for line in handle if line.strip()}
        except OSError:
            pass
    return modules or None


@cache
def known() -> dict[str, frozenset[str]]:
    """Canonical distribution name -> the top-level modules its releases read provide (the histories' own import
    names added)."""
    table: dict[str, set[str]] = {}
    if PATH.exists():
        with gzip.open(PATH, "rt", encoding="utf-8") as stream:
            for name, entry in json.load(stream)["distributions"].items():
                table[name] = set(entry["modules"])
    for name, modules in IMPORT_NAMES.items():
        table.setdefault(name, set()).update(modules)
    return {name: frozenset(modules) for name, modules in table.items()}


def distributions_providing(module: str) -> list[str]:
    """The known distributions that provide a top-level module (``msgspec`` -> ``["msgspec"]``), sorted."""
    return sorted(name for name, modules in known().items() if module in modules)
