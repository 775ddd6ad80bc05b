"""The ``grpo-compat`` command."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _doctor(args: argparse.Namespace) -> int:
    from grpo_compat.tools.doctor import diagnose, format_diagnosis

    diagnosis = diagnose()
    print(json.dumps(diagnosis, indent=2) if args.json else format_diagnosis(diagnosis))
    return 0 if diagnosis["ok"] else 1


def _check(args: argparse.Namespace) -> int:
    from grpo_compat.fixes.validation import describe, validate
    from grpo_compat.tools import preflight

    try:
        world_size = preflight.world_size_of(args.world_size, args.nproc_per_node, args.nnodes)
        if args.swift:
            swift_version = preflight.swift_version_here(args.swift_version)
            swift_arguments = preflight.parse_swift_arguments(args.arguments)
            settings = preflight.swift_settings(swift_arguments, world_size, swift_version)
        else:
            if len(args.arguments) != 1:
                raise preflight.PreflightInputError(
                    "give one TRL config file (YAML or JSON), or --swift -- <swift arguments>"
                )
            settings = preflight.trl_settings(preflight.load_config_file(Path(args.arguments[0])), world_size)
            swift_version = None
        rules = preflight.rules_here(args.trl_version, swift_version)
    except preflight.PreflightInputError as error:
        print(f"grpo-compat check: {error}", file=sys.stderr)
        return 2
    findings = validate(settings, rules)
    errors = [f for f in findings if f.severity == "error"]
    if args.json:
        print(
            json.dumps(
                {
                    "rules": rules.name,
                    "world_size": world_size,
                    "ok": not errors,
                    "findings": [
                        {
                            "rule": f.rule,
                            "severity": f.severity,
                            "message": f.message,
                            "suggestions": [dict(fix) for fix in f.suggestions],
                        }
                        for f in findings
                    ],
                },
                indent=2,
            )
        )
    else:
        print(f"GRPO settings checked against {rules.name}, {world_size} process(es):")
        print(describe(findings) if findings else "ok: these settings can train")
    return 1 if errors else 0


def _plugin_path(args: argparse.Namespace) -> int:
    from grpo_compat.swift_plugin import plugin_path

    print(plugin_path())
    return 0


def _matrix_checkout() -> Path:
    """The matrix lives in a grpo_compat checkout (matrix/), not in the wheel."""
    import grpo_compat

    repo = Path(grpo_compat.__file__).resolve().parent.parent
    if not (repo / "matrix" / "cells.toml").exists():
        raise SystemExit(
            "grpo-compat matrix: runs from a grpo_compat source checkout (matrix/cells.toml not found next to "
            f"{repo}). Clone the repository and `pip install -e .` it."
        )
    if str(repo) not in sys.path:
        sys.path.insert(0, str(repo))
    return repo


def _selected_cells(args: argparse.Namespace) -> list:
    from matrix.envs import load_cells, quick_cells

    cells, _ = load_cells()
    names = quick_cells() if args.quick else [n for n in (args.cells or "").split(",") if n] or list(cells)
    unknown = [name for name in names if name not in cells]
    if unknown:
        raise SystemExit(f"grpo-compat matrix: unknown cell(s) {', '.join(unknown)}; cells: {', '.join(cells)}")
    chosen = [cells[name] for name in names if cells[name].device == args.device]
    if not chosen:
        raise SystemExit(f"grpo-compat matrix: none of {', '.join(names)} is a {args.device} cell")
    return chosen


def _matrix_run(args: argparse.Namespace) -> int:
    _matrix_checkout()
    from matrix.runner import DEFAULT_RESULTS, run_matrix

    wheelhouse = Path(args.wheelhouse).resolve() if args.wheelhouse else None
    results = Path(args.results).resolve() if args.results else DEFAULT_RESULTS
    return run_matrix(
        _selected_cells(args), results, jobs=args.jobs, wheelhouse=wheelhouse, quick=args.quick, only=args.runs
    )


def _matrix_report(args: argparse.Namespace) -> int:
    _matrix_checkout()
    from matrix.report import write_reports
    from matrix.runner import DEFAULT_RESULTS

    results = Path(args.results) if args.results else DEFAULT_RESULTS
    if not results.is_dir():
        raise SystemExit(f"grpo-compat matrix report: no results folder {results}")
    for path in write_reports(results):
        print(path)
    return 0


def _matrix_workflow(args: argparse.Namespace) -> int:
    _matrix_checkout()
    from matrix.workflow import main as workflow_main

    return workflow_main(["--check"] if args.check else ["--write"])


def _add_matrix(commands: argparse._SubParsersAction) -> None:
    matrix = commands.add_parser("matrix", help="the version matrix (from a source checkout)")
    actions = matrix.add_subparsers(dest="action", required=True, metavar="ACTION")
    run = actions.add_parser("run", help="build cell envs and run the smoke runs and reproducers")
    run.add_argument("--cells", help="comma-separated cell names (default: every cell of --device)")
    run.add_argument("--quick", action="store_true", help="only the quick cells CI runs, with the sweep's CI variants")
    run.add_argument("--runs", default="*", help="only run kinds matching this glob, e.g. 'harm:*' (default: all)")
    run.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    run.add_argument("--jobs", type=int, default=1, help="cells run at the same time (default 1)")
    run.add_argument("--results", help="results folder (default .matrix/results)")
    run.add_argument("--wheelhouse", help="offline: install every package from this folder of wheels")
    run.set_defaults(run=_matrix_run)
    report = actions.add_parser("report", help="rebuild summary.md and report.html from the cell JSONs")
    report.add_argument("--results", help="results folder (default .matrix/results)")
    report.set_defaults(run=_matrix_report)
    workflow = actions.add_parser("workflow", help="write .github/workflows/matrix.yml from matrix/cells.toml")
    workflow.add_argument("--check", action="store_true", help="only check that it is current")
    workflow.set_defaults(run=_matrix_workflow)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grpo-compat", description="GRPO compatibility fixes for TRL and ms-swift.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    doctor = commands.add_parser(
        "doctor", help="show versions, which patches would apply and why, and known environment problems"
    )
    doctor.add_argument("--json", action="store_true", help="machine-readable output")
    doctor.set_defaults(run=_doctor)
    check = commands.add_parser(
        "check", help="validate GRPO settings (a TRL config file, or ms-swift arguments) without loading anything"
    )
    check.add_argument("arguments", nargs="*", help="a TRL config file; with --swift: -- <swift rlhf arguments>")
    check.add_argument("--swift", action="store_true", help="the arguments are ms-swift `swift rlhf` arguments")
    check.add_argument("--world-size", type=int, help="processes in total (default: $WORLD_SIZE or 1)")
    check.add_argument("--nproc-per-node", type=int, help="processes per machine (torchrun / NPROC_PER_NODE)")
    check.add_argument("--nnodes", type=int, default=1, help="machines (with --nproc-per-node)")
    check.add_argument("--trl-version", help="check against this trl version instead of the installed one")
    check.add_argument("--swift-version", help="check against this ms-swift version instead of the installed one")
    check.add_argument("--json", action="store_true", help="machine-readable output")
    check.set_defaults(run=_check)
    plugin = commands.add_parser(
        "plugin-path",
        help='the ms-swift plugin file: swift rlhf ... --external_plugins "$(grpo-compat plugin-path)"',
    )
    plugin.set_defaults(run=_plugin_path)
    _add_matrix(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
