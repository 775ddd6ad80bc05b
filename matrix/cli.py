"""``grpo-compat matrix``: the version matrix's command line (run, report, workflow).

The package's ``grpo-compat matrix`` hands its arguments to ``python -m matrix`` with this checkout on
PYTHONPATH: the installed package never imports anything under matrix/.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grpo_compat.tools.arguments import ArgumentParser, InputError


def _selected_cells(args: argparse.Namespace) -> list:
    from matrix.envs import load_cells, quick_cells

    cells, _ = load_cells()
    names = quick_cells() if args.quick else [n for n in (args.cells or "").split(",") if n] or list(cells)
    unknown = [name for name in names if name not in cells]
    if unknown:
        raise InputError(f"--cells: unknown cell(s) {', '.join(unknown)}; cells: {', '.join(cells)}")
    chosen = [cells[name] for name in names if cells[name].device == args.device]
    if not chosen:
        raise InputError(f"--cells: none of {', '.join(names)} is a {args.device} cell")
    return chosen


def _folder(option: str, value: str | None, default: Path, must_exist: bool = False) -> Path:
    folder = Path(value).resolve() if value else default
    if not folder.is_dir() and (must_exist or folder.exists()):
        raise InputError(f"{option} {value or folder}: expected a folder")
    return folder


def _run(args: argparse.Namespace) -> int:
    from matrix.runner import DEFAULT_RESULTS, run_matrix

    if args.jobs < 1:
        raise InputError(f"--jobs {args.jobs}: expected 1 or more cells at a time")
    wheelhouse = _folder("--wheelhouse", args.wheelhouse, Path(), must_exist=True) if args.wheelhouse else None
    results = _folder("--results", args.results, DEFAULT_RESULTS)
    junit = Path(args.junit).resolve() if args.junit else None
    return run_matrix(
        _selected_cells(args),
        results,
        jobs=args.jobs,
        wheelhouse=wheelhouse,
        quick=args.quick,
        only=args.runs,
        junit=junit,
    )


def _report(args: argparse.Namespace) -> int:
    from matrix.report import write_reports
    from matrix.runner import DEFAULT_RESULTS

    junit = Path(args.junit).resolve() if args.junit else None
    for path in write_reports(_folder("--results", args.results, DEFAULT_RESULTS, must_exist=True), junit):
        print(path)
    if junit:
        print(junit)
    return 0


def _workflow(args: argparse.Namespace) -> int:
    from matrix.workflow import main as workflow_main

    return workflow_main(["--check"] if args.check else ["--write"])


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="grpo-compat matrix", description="The version matrix (a source checkout).")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    run = actions.add_parser("run", help="build cell envs and run the smoke runs and reproducers")
    run.add_argument("--cells", help="comma-separated cell names (default: every cell of --device)")
    run.add_argument("--quick", action="store_true", help="only the quick cells CI runs, with the sweep's CI variants")
    run.add_argument("--runs", default="*", help="only run kinds matching this glob, e.g. 'harm:*' (default: all)")
    run.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    run.add_argument("--jobs", type=int, default=1, help="cells run at the same time (default 1)")
    run.add_argument("--results", help="results folder (default .matrix/results)")
    run.add_argument("--wheelhouse", help="offline: install every package from this folder of wheels")
    run.add_argument("--junit", metavar="FILE", help="also write JUnit XML: a test case per cell x run")
    run.set_defaults(run=_run)
    report = actions.add_parser("report", help="rebuild summary.md and report.html from the cell JSONs")
    report.add_argument("--results", help="results folder (default .matrix/results)")
    report.add_argument("--junit", metavar="FILE", help="also write JUnit XML: a test case per cell x run")
    report.set_defaults(run=_report)
    workflow = actions.add_parser("workflow", help="write .github/workflows/matrix.yml from matrix/cells.toml")
    workflow.add_argument("--check", action="store_true", help="only check that it is current")
    workflow.set_defaults(run=_workflow)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except InputError as error:
        print(f"{parser.prog} {args.action}: {error}", file=sys.stderr)
        return 2
