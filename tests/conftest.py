"""Fixtures: a throwaway upstream package for engine mechanics, a tiny-model folder; hypothesis's CI profile."""

from __future__ import annotations

import itertools
import os
import resource
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import settings

from grpo_compat.matrix.runner import threads_per_run
from tests import helpers
from tests.helpers import declared_cells

# `pytest -n N` runs N test files at a time, and each starts GRPO runs that would spread over every core: each
# worker's runs get their share of the cores, as the matrix runner gives its runs (set before anything imports torch).
_threads = threads_per_run(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
if _threads:
    os.environ["OMP_NUM_THREADS"] = str(_threads)

# CI must be reproducible: the same examples every run. Locally each run explores new ones.
settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

_counter = itertools.count()


def pytest_addoption(parser):
    parser.addoption(
        "--cpu-durations",
        type=int,
        metavar="N",
        help="list the N tests that used the most CPU (their own and their subprocesses', user + system); 0: all",
    )
    parser.addoption(
        "--cells",
        default="all",
        metavar="CELLS",
        help="all (default): every test; quick: the tests that run only in the quick cells' envs (what CI runs); "
        "NAME[,NAME]: only the tests declaring one of these cells (pytest.mark.cells), as that cell's matrix job runs",
    )


def pytest_report_header(config):
    choice = config.getoption("--cells")
    if choice == "quick":
        return "cells: quick (tests that run in other cells' envs are deselected: --cells all runs every test)"
    if choice != "all":
        return f"cells: only the tests declaring {choice}"
    return None


def pytest_collection_modifyitems(config, items):
    choice = config.getoption("--cells")
    if choice == "all":
        return
    from matrix.repository import cells_file

    cells = cells_file()
    if choice == "quick":
        wanted = None
    else:
        wanted = {name for name in choice.split(",") if name}
        unknown = sorted(wanted - set(cells.cells))
        if unknown:
            raise pytest.UsageError(
                f"--cells: no cell {', '.join(unknown)} in {cells.path}; cells: {', '.join(cells.cells)}"
            )
    for item in items:
        for name in declared_cells(item) - set(cells.cells):
            raise pytest.UsageError(f"{item.nodeid}: pytest.mark.cells names {name!r}, which {cells.path} lacks")
    if wanted is None:
        keep = [item for item in items if declared_cells(item) <= set(cells.quick)]
    else:
        keep = [item for item in items if declared_cells(item) & wanted]
    dropped = [item for item in items if item not in keep]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    # before the test's fixtures: a module fixture that builds a cell env runs inside its first test's setup
    helpers.DECLARED_CELLS = declared_cells(item)


def _cpu_seconds() -> float:
    """CPU of this process and of the subprocesses it waited for (a run's ranks count through their launcher)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    # CI is CPU-bound on 2 cores: wall times of tests side by side hide which ones cost the CPU.
    item.cpu_started = _cpu_seconds()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.when == "teardown":
        report.user_properties.append(("cpu_s", round(_cpu_seconds() - item.cpu_started, 1)))


def pytest_terminal_summary(terminalreporter, config):
    count = config.getoption("--cpu-durations")
    if count is None:
        return
    spent = [
        (dict(report.user_properties)["cpu_s"], report.nodeid)
        for reports in terminalreporter.stats.values()
        for report in reports
        if getattr(report, "when", None) == "teardown" and "cpu_s" in dict(getattr(report, "user_properties", ()))
    ]
    spent.sort(reverse=True)
    terminalreporter.write_sep("=", f"CPU of the tests: {sum(s for s, _ in spent):.0f} s in all, the most first")
    for seconds, nodeid in spent[: count or None]:
        terminalreporter.write_line(f"{seconds:8.1f}s cpu  {nodeid}")


@pytest.fixture
def upstream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Write a small, uniquely named package to disk and put it on sys.path.

    The engine's mechanics (hooks, wrapping, revert) are tested on this package; the shipped
    patches are tested against the real upstream libraries.
    """
    name = f"fake_upstream_{next(_counter)}"
    package = tmp_path / name
    package.mkdir()
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(module: str, source: str) -> str:
        (package / f"{module}.py").write_text(textwrap.dedent(source))
        return f"{name}.{module}"

    (package / "__init__.py").write_text("")
    write.package = name  # type: ignore[attr-defined]
    yield write
    for module in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[module]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A folder for the tiny model, built by the first smoke run that uses it, shared by a module's tests."""
    return tmp_path_factory.mktemp("tiny-qwen2")


@pytest.fixture
def config_file(tmp_path):
    """Writes a config file (grpo-compat check's input) into the test's folder and gives its path."""

    def write(text: str, name: str = "grpo.yaml"):
        path = tmp_path / name
        path.write_text(text)
        return str(path)

    return write
