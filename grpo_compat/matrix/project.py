"""A matrix project: a cells file, the runs each cell gets (its plan), and where envs and results go.

Two kinds of project go through the same runner (grpo_compat.matrix.runner):
- this repository's own matrix (its checkout's matrix/repository.py): smoke scripts, reproducers, probes;
- a user's matrix (grpo_compat.matrix.entries.user_project): the user's cells file and entry points.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from grpo_compat.matrix.cells import Cell, CellsFile
from grpo_compat.matrix.envs import CellEnvs


class NamedRun:
    """The name and file-safe slug of a run with ``kind`` and ``mode`` (a base of each plan's run dataclass)."""

    kind: str
    mode: str

    @property
    def name(self) -> str:
        return f"{self.kind}/{self.mode}"

    @property
    def slug(self) -> str:
        return re.sub(r"[^\w.-]+", "_", self.name)


class Plan(Protocol):
    """What a project runs: its runs per cell, how each starts and how its result is judged.

    A run has ``kind``, ``mode`` (plain | patched), ``name``, ``slug``, ``expectation``, ``expect_error``,
    ``timeout_s``, ``skip`` and ``group`` (its heading in the report; None: the training runs).
    """

    def planned_runs(self, cell: Cell, versions: dict[str, str | None], quick: bool = False) -> list[Any]:
        """The runs of ``cell``, whose env has ``versions`` installed (``quick``: CI's subset)."""

    def command(self, run: Any, python: Path, model_dir: Path, output: Path, device: str, scratch: Path) -> list[str]:
        """The run's command line; it writes its JSON result to ``output``."""

    def judge(self, run: Any, result: dict | None, plain: dict | None) -> tuple[str, str]:
        """(status, outcome) of a finished run from its JSON result and its plain run's."""


@dataclass(frozen=True)
class MatrixProject:
    cells: CellsFile
    plan: Plan
    envs: CellEnvs
    results: Path  # the default results folder
    workdir: Path  # where runs start
    pythonpath: tuple[str, ...] = ()  # put first on the runs' PYTHONPATH (a checkout whose scripts the runs start)
    models: Path | None = None  # the folder each cell's tiny model is built in, if the plan's scripts build one
    workflow_file: Path | None = None  # this repository's generated GitHub workflow
