"""This repository's own matrix: matrix/cells.toml, the runs of matrix/runs.py, envs and results in .matrix/.

    python matrix/repository.py ensure trl-0.16          # build the cell's env if needed; print its python
    python matrix/repository.py ensure trl-1.16 --path .venv --extras dev     # the development env (setup.sh)
    grpo-compat matrix wheels --cell trl-1.16-cuda --out wh --target-python 3.12 --target-freeze freeze.txt  # GPU

    python matrix/repository.py matrix run --quick    # the same as grpo-compat matrix run --quick, here

``grpo-compat matrix`` without --cells-file hands over to ``python -m matrix.repository matrix`` in this checkout,
which runs :func:`repository_project` through the package's runner: one runner for this matrix and users' matrices.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script by matrix/setup.sh, before anything is installed
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grpo_compat.matrix.cells import Cell, CellsFile, load_cells_file
from grpo_compat.matrix.envs import CellEnvs, EnvBuildError, GrpoCompatSource
from grpo_compat.matrix.project import MatrixProject

REPO = Path(__file__).resolve().parent.parent
CELLS_FILE = REPO / "matrix" / "cells.toml"
DEVELOPMENT_ENV = REPO / ".venv"  # matrix/setup.sh builds it from the default cell's pins, with the dev extras


def cells_file() -> CellsFile:
    return load_cells_file(CELLS_FILE)


class RepositoryEnvs(CellEnvs):
    """The default cell's runs use .venv while .venv holds that cell's pins.

    The two envs differ only by the dev extras (pytest, hypothesis, ruff), which no run imports; a second env
    of the same pins cost CI an env build, a DeepSpeed op build and the bytecode of every module a run reads.
    A .venv built from other pins is left alone: the cell gets its own env, as every other cell does.
    """

    def _development_env(self, cell: Cell, path: Path | None, extras: str) -> bool:
        return (
            path is None
            and not extras
            and cell.name == cells_file().default
            and super().is_ready(cell, DEVELOPMENT_ENV, "dev")
        )

    def is_ready(self, cell: Cell, path: Path | None = None, extras: str = "") -> bool:
        if self._development_env(cell, path, extras):
            return True
        return super().is_ready(cell, path, extras)

    def ensure(self, cell: Cell, path: Path | None = None, extras: str = "", wheelhouse=None, progress=None) -> Path:
        if wheelhouse is None and self._development_env(cell, path, extras):
            path, extras = DEVELOPMENT_ENV, "dev"
        return super().ensure(cell, path, extras, wheelhouse, progress)


ENVS = RepositoryEnvs(REPO / ".matrix" / "envs", GrpoCompatSource(str(REPO), editable=True))


class RepositoryPlan:
    """matrix/runs.py as the runner's plan: which runs a cell gets depends on its versions and device."""

    @staticmethod
    def planned_runs(cell: Cell, versions: dict[str, str | None], quick: bool = False) -> list:
        from matrix import runs

        return runs.planned_runs(versions, cell.device, quick)

    @staticmethod
    def command(run, python: Path, model_dir: Path, output: Path, device: str, scratch: Path) -> list[str]:
        from matrix import runs

        return runs.command(run, python, model_dir, output, device, scratch)

    @staticmethod
    def judge(run, result: dict | None, plain: dict | None) -> tuple[str, str]:
        from matrix import runs

        return runs.judge(run, result, plain)


def repository_project() -> MatrixProject:
    return MatrixProject(
        cells=cells_file(),
        plan=RepositoryPlan(),
        envs=ENVS,
        results=REPO / ".matrix" / "results",
        workdir=REPO,
        pythonpath=(str(REPO),),
        models=REPO / ".matrix" / "models",
        workflow_file=REPO / ".github" / "workflows" / "matrix.yml",
    )


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["matrix"]:  # the package's runner (grpo-compat matrix) on this repository's project
        from grpo_compat.matrix.cli import main as run_matrix_command

        return run_matrix_command(argv[1:], repository=repository_project)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    commands = "grpo-compat matrix's commands (run, wheels, report, workflow) on this repository's matrix"
    sub.add_parser("matrix", help=commands)
    ensure = sub.add_parser("ensure", help="build the cell's env if needed and print its python")
    ensure.add_argument("cell", nargs="?", help="cell name (default: the default cell)")
    ensure.add_argument("--path", type=Path, help="where to put the env instead of .matrix/envs")
    ensure.add_argument("--extras", default="", help="extras of grpo-compat to install, e.g. dev")
    ensure.add_argument("--wheelhouse", type=Path, help="install offline from this folder (grpo-compat matrix wheels)")
    args = parser.parse_args(argv)
    cells = cells_file()
    name = args.cell or cells.default
    if name not in cells.cells:
        parser.error(f"unknown cell {name!r}; cells: {', '.join(cells.cells)}")
    try:
        print(ENVS.ensure(cells.cells[name], args.path, args.extras, args.wheelhouse))
    except EnvBuildError as error:
        print(f"error: cell {name}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
