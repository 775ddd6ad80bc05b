"""``grpo-compat matrix``: the version matrix's command line (init, run, wheels, report, workflow).

With ``--cells-file FILE`` it runs a user's matrix (grpo_compat.matrix.entries.user_project); without, this
repository's own, whose checkout hands its project in (``python -m matrix.repository matrix ...`` in a checkout;
the installed package never imports anything from a checkout).
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from grpo_compat.core.versions import is_version
from grpo_compat.matrix.cells import Cell, CellsFileError
from grpo_compat.matrix.entries import user_project
from grpo_compat.matrix.envs import CellEnvs
from grpo_compat.matrix.project import MatrixProject
from grpo_compat.tools.arguments import USAGE_MISTAKE, ArgumentParser, InputError

NO_PROJECT = (
    "give --cells-file FILE (write a starter one with `grpo-compat matrix init DIR`); "
    "without it, `grpo-compat matrix` runs this project's own matrix from a grpo_compat source checkout"
)


def _project(args: argparse.Namespace, repository: Callable[[], MatrixProject] | None) -> MatrixProject:
    envs = Path(args.envs) if getattr(args, "envs", None) else None
    if args.cells_file:
        return user_project(Path(args.cells_file), envs)
    if repository is None:
        raise InputError(NO_PROJECT)
    project = repository()
    if envs is not None:
        project = replace(project, envs=CellEnvs(envs.resolve(), project.envs.source))
    return project


def _selected_cells(args: argparse.Namespace, project: MatrixProject) -> list[Cell]:
    cells = project.cells
    if args.quick and args.cells:
        raise InputError("--quick and --cells together: give one (--quick: the cells file's quick cells)")
    if args.quick and not cells.quick:
        raise InputError(f"--quick: {cells.path} names no quick cells (quick = [...])")
    names = list(cells.quick) if args.quick else [n for n in (args.cells or "").split(",") if n] or list(cells.cells)
    chosen = [cell for cell in cells.select(names) if cell.device == args.device]
    if not chosen:
        raise InputError(f"--cells: none of {', '.join(names)} is a {args.device} cell")
    return chosen


def _folder(option: str, value: str | None, default: Path, must_exist: bool = False) -> Path:
    folder = Path(value).resolve() if value else default
    if not folder.is_dir() and (must_exist or folder.exists()):
        raise InputError(f"{option} {value or folder}: expected a folder")
    return folder


def _output_file(option: str, value: str) -> Path:
    """A file the command writes, checked before any work: not a folder, and its folder made (as writing would)."""
    path = Path(value).resolve()
    if path.is_dir():
        raise InputError(f"{option} {value}: is a folder, expected a file to write")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(f"{option} {value}: cannot make its folder: {error.strerror or error}") from None
    return path


def _run(args: argparse.Namespace, project: MatrixProject) -> int:
    from grpo_compat.matrix.runner import run_matrix

    if args.jobs < 1:
        raise InputError(f"--jobs {args.jobs}: expected 1 or more runs at a time")
    wheelhouse = _folder("--wheelhouse", args.wheelhouse, Path(), must_exist=True) if args.wheelhouse else None
    results = _folder("--results", args.results, project.results)
    junit = _output_file("--junit", args.junit) if args.junit else None
    return run_matrix(
        _selected_cells(args, project),
        project,
        results,
        jobs=args.jobs,
        wheelhouse=wheelhouse,
        quick=args.quick,
        only=args.runs,
        junit=junit,
    )


def _wheels(args: argparse.Namespace, project: MatrixProject) -> int:
    from grpo_compat.matrix.envs import EnvBuildError, TargetMachine, uv_error
    from grpo_compat.matrix.runner import progress

    if args.target_python and not re.fullmatch(r"3\.\d+", args.target_python):
        raise InputError(f"--target-python {args.target_python!r}: expected the machine's Python as X.Y, e.g. 3.11")
    if args.torch_version and not is_version(args.torch_version):
        raise InputError(f"--torch-version {args.torch_version!r}: expected a version such as 2.7.1")
    (cell,) = project.cells.select([args.cell], "--cell")
    freeze = ""
    if args.target_freeze:
        path = Path(args.target_freeze)
        if not path.is_file():
            raise InputError(f"--target-freeze {path}: no such file (write it on the target with `pip freeze`)")
        freeze = path.read_text(errors="replace")
    out = _folder("--out", args.out, Path(args.out))
    try:
        if cell.newest:
            cell = project.envs.resolve_newest(cell, progress)
        target = TargetMachine.from_freeze(freeze, args.target_python)
        project.envs.fill_wheelhouse(cell, out, args.torch_version, target, progress)
    except EnvBuildError as error:
        print(f"grpo-compat matrix wheels: cell {cell.name}: {uv_error(error)}", file=sys.stderr)
        return 1
    wheels = sorted(out.glob("*.whl"))
    size = sum(wheel.stat().st_size for wheel in wheels) / 2**20
    print(f"{out}: {len(wheels)} wheels, {size:.0f} MiB, for cell {cell.name}")
    print(f"there: python3 -m pip install --no-index --find-links {out.name} uv grpo-compat  (or -e . in a checkout)")
    print(f"       grpo-compat matrix run --device {cell.device} --cells {cell.name} --wheelhouse {out.name}")
    return 0


def _report(args: argparse.Namespace, project: MatrixProject | None) -> int:
    from grpo_compat.matrix.report import write_reports

    default = project.results if project else Path("grpo-matrix-results").resolve()
    junit = _output_file("--junit", args.junit) if args.junit else None
    for path in write_reports(_folder("--results", args.results, default, must_exist=True), junit):
        print(path)
    if junit:
        print(junit)
    return 0


def _workflow(args: argparse.Namespace, project: MatrixProject) -> int:
    from grpo_compat.matrix import workflow

    if args.cells_file:
        cells_file = Path(args.cells_file)
        # The job runs from the repository's root (here: the working folder), as the workflow's paths are.
        requirement, origin = workflow.install_requirement(project.cells, Path.cwd())
        print(f"the workflow installs {requirement} ({origin})")
        flavour = workflow.user_flavour(cells_file.as_posix(), f"pip install {shlex.quote(requirement)}")
        target = Path(args.output or ".github/workflows/grpo-matrix.yml")
    else:
        flavour = workflow.REPOSITORY
        if project.workflow_file is None:
            raise InputError("this project has no workflow file")
        target = Path(args.output) if args.output else project.workflow_file
    if not args.check:
        _output_file("--output", str(target))
    text = workflow.render_workflow(project.cells, flavour)
    if args.check:
        diff = workflow.stale_diff(target, text)
        if diff:
            sys.stdout.write(diff)
            print(f"\n{target} is stale: run `grpo-compat matrix workflow`", file=sys.stderr)
            return 1
        print(f"{target} is current")
        return 0
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    print(f"wrote {target}")
    return 0


def _init(args: argparse.Namespace) -> int:
    from grpo_compat.matrix.init import write_starter

    if args.era:
        from datetime import date

        try:
            date.fromisoformat(args.era)
        except ValueError:
            raise InputError(f"--era {args.era!r}: expected a date, YYYY-MM-DD") from None
    try:
        paths = write_starter(Path(args.folder), args.era, args.force)
    except FileExistsError as error:
        raise InputError(str(error)) from None
    except OSError as error:
        raise InputError(f"{args.folder}: {error.strerror or error}") from None
    for path in paths:
        print(f"wrote {path}")
    print(f"next: grpo-compat matrix run --cells-file {paths[0]} --cells current")
    return 0


def build_parser() -> ArgumentParser:
    # Each action's exit statuses, declared here once: its --help shows them, docs/cli.md is generated from them.
    interrupted = (130, "interrupted (Ctrl-C)")
    parser = ArgumentParser(
        prog="grpo-compat matrix",
        description="The version matrix: your cells and entry points (--cells-file), or this project's own.",
        exit_statuses=((0, "--help printed"), USAGE_MISTAKE),
    )
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    init = actions.add_parser(
        "init",
        help="write a starter cells file and entry point into a folder",
        exit_statuses=((0, "the files were written"), USAGE_MISTAKE),
    )
    init.add_argument("folder", help="where to write grpo-matrix.toml and grpo_smoke.py")
    init.add_argument("--era", metavar="YYYY-MM-DD", help="also a cell of the newest releases as of this date")
    init.add_argument("--force", action="store_true", help="overwrite existing files")
    init.set_defaults(run=lambda args, repository: _init(args))
    cells_help = "your cells file (grpo-compat matrix init writes one); default: this checkout's matrix/cells.toml"
    run = actions.add_parser(
        "run",
        help="build cell envs and run every entry, plainly and patched",
        exit_statuses=((0, "every run passed"), (1, "a run did not pass"), USAGE_MISTAKE, interrupted),
    )
    run.add_argument("--cells-file", metavar="FILE", help=cells_help)
    run.add_argument("--cells", help="comma-separated cell names (default: every cell of --device)")
    run.add_argument("--quick", action="store_true", help="only the cells file's quick cells (and quick variants)")
    run.add_argument("--runs", default="*", help="only run kinds matching this glob, e.g. 'harm:*' (default: all)")
    run.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="run the cells of this device")
    run.add_argument("--jobs", type=int, default=1, help="runs at the same time, across all cells (default 1)")
    run.add_argument("--results", help="results folder (default: ./grpo-matrix-results, here .matrix/results)")
    run.add_argument("--envs", help="where cell envs are built (default: ~/.cache/grpo-compat/matrix/envs)")
    run.add_argument("--wheelhouse", help="offline: install every package from this folder of wheels")
    run.add_argument("--junit", metavar="FILE", help="also write JUnit XML: a test case per cell x run")
    run.set_defaults(run=lambda args, repository: _run(args, _project(args, repository)))
    wheels = actions.add_parser(
        "wheels",
        help="fill a folder of wheels for a machine without network: one cell's env",
        exit_statuses=(
            (0, "the folder was filled"),
            (1, "the cell's packages could not be resolved or downloaded"),
            USAGE_MISTAKE,
            interrupted,
        ),
    )
    wheels.add_argument("--cells-file", metavar="FILE", help=cells_help)
    wheels.add_argument("--cell", required=True, help="the cell whose env the wheels build")
    wheels.add_argument("--out", required=True, metavar="FOLDER", help="the folder to fill (carry it to the machine)")
    wheels.add_argument("--target-python", metavar="X.Y", help="the machine's Python, when it is not this one's")
    wheels.add_argument(
        "--target-freeze", metavar="FILE", help="the machine's `pip freeze`: what its image holds is left out"
    )
    wheels.add_argument("--torch-version", help='the torch the machine has, for torch = "preinstalled" cells')
    wheels.set_defaults(run=lambda args, repository: _wheels(args, _project(args, repository)))
    report = actions.add_parser(
        "report",
        help="rebuild summary.md and report.html from the cell JSONs",
        exit_statuses=((0, "the reports were written"), USAGE_MISTAKE),
    )
    report.add_argument("--cells-file", metavar="FILE", help=cells_help)
    report.add_argument("--results", help="results folder")
    report.add_argument("--junit", metavar="FILE", help="also write JUnit XML: a test case per cell x run")
    report.set_defaults(
        run=lambda args, repository: _report(
            args, _project(args, repository) if args.cells_file or repository else None
        )
    )
    workflow = actions.add_parser(
        "workflow",
        help="write a GitHub Actions workflow running the matrix",
        exit_statuses=(
            (0, "written, or with --check: current"),
            (1, "with --check: stale (the difference is printed)"),
            USAGE_MISTAKE,
        ),
    )
    workflow.add_argument("--cells-file", metavar="FILE", help=cells_help)
    workflow.add_argument("--output", metavar="PATH", help="default .github/workflows/grpo-matrix.yml (yours)")
    workflow.add_argument("--check", action="store_true", help="only check that it is current")
    workflow.set_defaults(run=lambda args, repository: _workflow(args, _project(args, repository)))
    return parser


def main(argv: list[str] | None = None, repository: Callable[[], MatrixProject] | None = None) -> int:
    """``repository``: builds this repository's own project (its checkout's matrix/repository.py)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args, repository)
    except (InputError, CellsFileError) as error:
        print(f"{parser.prog} {args.action}: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
