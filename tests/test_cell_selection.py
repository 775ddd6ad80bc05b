"""`pytest --cells`: CI runs the tests of the quick cells; a test that runs in another cell's env declares it
(pytest.mark.cells) and runs in that cell's matrix job. The selection is only as good as the declarations, so an
undeclared cell is refused where the test asks for its interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests import helpers
from tests.helpers import REPO, declared_cells


def collected(*options: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *options]
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)


def test_a_test_running_in_a_cell_it_does_not_declare_is_stopped_before_the_env_is_built(monkeypatch):
    monkeypatch.setattr(helpers, "DECLARED_CELLS", frozenset({"trl-0.19"}))
    with pytest.raises(AssertionError, match=r"add pytest.mark.cells\(.trl-0.15.\)"):
        helpers.cell_python("trl-0.15")


def test_a_quick_cell_needs_no_declaration(monkeypatch):
    from matrix import repository

    monkeypatch.setattr(helpers, "DECLARED_CELLS", frozenset())
    monkeypatch.setattr(repository.ENVS, "ensure", lambda cell: Path(f"/envs/{cell.name}/bin/python"))
    assert helpers.cell_python("trl-0.16") == "/envs/trl-0.16/bin/python"


def test_the_cells_of_a_test_are_its_marks_and_its_cell_parameter():
    marks = {"cells": [SimpleNamespace(args=("trl-0.15", "swift-3.5"))]}
    item = SimpleNamespace(
        iter_markers=lambda name: marks.get(name, []), callspec=SimpleNamespace(params={"cell": "swift-4.6"})
    )
    assert declared_cells(item) == {"trl-0.15", "swift-3.5", "swift-4.6"}
    unparametrized = SimpleNamespace(iter_markers=lambda name: [])
    assert declared_cells(unparametrized) == frozenset()


def test_quick_leaves_out_the_tests_of_other_cells_and_a_cell_name_selects_only_its_own():
    every = collected("tests/test_version_skew.py").stdout
    quick = collected("--cells", "quick", "tests/test_version_skew.py").stdout
    one = collected("--cells", "trl-0.23", "tests/test_version_skew.py").stdout
    assert every.count("::test_") == 5  # each declares a cell outside the quick ones
    assert "::test_" not in quick and "5 deselected" in quick
    assert one.count("::test_") == 1 and "test_trl_0_23_evaluates_before_training" in one


def test_an_unknown_cell_is_a_usage_error_naming_the_cells():
    result = collected("--cells", "trl-9.99", "tests/test_version_skew.py")
    assert result.returncode == 4
    assert "--cells: no cell trl-9.99" in result.stderr and "trl-0.16" in result.stderr
