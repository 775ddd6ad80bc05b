"""Fixtures: a throwaway upstream package for engine mechanics, a tiny-model folder; hypothesis's CI profile."""

from __future__ import annotations

import itertools
import os
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import settings

from grpo_compat.matrix.runner import threads_per_run

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
