"""The shipped API histories are what the generator's reader gives for the installed releases' own files.

The same reader (grpo_compat.histories.reader, the same scope as the data states) runs on each installed
distribution's folder and its facts must equal the shipped data's for that release: a reader change that the
data was not regenerated with, or data written from other files, fails here.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

import pytest

from grpo_compat import histories
from grpo_compat.histories import reader
from grpo_compat.settings import extract
from matrix import api_history

# transformers is read in part: the modules trl's trainers reach, so that the test stays fast (the whole
# scope is some 300 files); their module facts are compared in full.
TRANSFORMERS_MODULES = [
    "transformers.trainer",
    "transformers.training_args",
    "transformers.trainer_utils",
    "transformers.utils.import_utils",
    "transformers.integrations.deepspeed",
]


def installed_site(top_level: str) -> Path:
    spec = importlib.util.find_spec(top_level)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{top_level} is not installed")  # the CI envs install every distribution compared here
    return Path(next(iter(spec.submodule_search_locations))).parent


def shipped_facts(history: histories.ApiHistory, version: str, modules: set[str] | None) -> dict[tuple, object]:
    """The shipped data of one release as the reader's flat facts (grpo_compat.histories.reader's keys)."""
    data = history._data
    i = history.releases.index(version)

    def holds(pairs):
        return any(first <= i <= last for first, last in pairs)

    def wanted(module):
        return modules is None or module in modules

    facts: dict[tuple, object] = {}
    for module, pairs in data["modules"].items():
        if wanted(module) and holds(pairs):
            facts[("m", module)] = 1
    for module, names in data["names"].items():
        facts.update({("n", module, n): 1 for n, pairs in names.items() if wanted(module) and holds(pairs)})
    for module, rows in data["imports"].items():
        facts.update({("i", module, *row[:4]): 1 for row in rows if wanted(module) and holds(row[4])})
    for kind, table in (("s", "signatures"), ("b", "bases"), ("f", "fields")):
        for qualname, runs in data[table].items():
            for first, last, value in runs:
                if first <= i <= last and wanted(owner_module(qualname, facts)):
                    facts[(kind, qualname)] = value
    for qualname, attributes in data.get("attributes", {}).items():
        if wanted(owner_module(qualname, facts)):
            facts.update({("a", qualname, a): 1 for a, pairs in attributes.items() if holds(pairs)})
    # per class and method, per module and name, per class and argument read
    for kind, table in (("c", "calls"), ("k", "kernels"), ("o", "argument_reads"), ("g", "guards")):
        for owner, entries in data.get(table, {}).items():
            for key, runs in entries.items():
                for first, last, value in runs:
                    if first <= i <= last and wanted(owner if kind in "kg" else owner_module(owner, facts)):
                        facts[(kind, owner, key)] = value
    return facts


def owner_module(qualname: str, facts: dict) -> str:
    """The module a qualified name lives in: its longest prefix that is a module."""
    parts = qualname.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        if ("m", ".".join(parts[:cut])) in facts:
            return ".".join(parts[:cut])
    return ""


@pytest.mark.parametrize(
    "distribution", ["trl", "transformers", "accelerate", "deepspeed", "datasets", "huggingface-hub"]
)
def test_the_shipped_history_of_the_installed_release_is_what_the_reader_reads_from_its_files(distribution):
    history = histories.load(distribution)
    if history is None:
        pytest.fail(f"no shipped data for {distribution}: python -m matrix.api_history --dist {distribution}")
    (package,) = histories.IMPORT_NAMES[distribution]
    site = installed_site(package)  # skips, saying so, where this env lacks the distribution
    version = importlib.metadata.version(distribution)
    assert history.knows(version), f"{distribution} {version} is not in the data: regenerate it"
    modules = TRANSFORMERS_MODULES if distribution == "transformers" else history.scope
    include = reader.scope_filter(package, modules, api_history.EXCLUDE.get(distribution))
    source = extract.Source(site, package, include)
    bodies, checks = distribution in api_history.READ_BODIES, distribution in api_history.READ_GUARD_CHECKS
    read, _ = reader.read_release(source, None, bodies, checks)
    read.pop(("r",), None)
    compared = set(TRANSFORMERS_MODULES) if distribution == "transformers" else None
    shipped = shipped_facts(history, version, compared)
    if compared is not None:
        read = {k: v for k, v in read.items() if (k[1] if k[0] in "mnikg" else owner_module(k[1], read)) in compared}
    assert sorted(set(read) - set(shipped)) == [] and sorted(set(shipped) - set(read)) == []
    assert {k: v for k, v in read.items() if v != shipped[k]} == {}
    # Requires-Dist as the installed metadata declares them (in any order: deepspeed's, built here from its sdist,
    # lists its extras in another order than the sdist's PKG-INFO)
    declared = [" ".join(line.split()) for line in importlib.metadata.requires(distribution) or []]
    assert sorted(history.requires(version)) == sorted(declared)
