"""The ``grpo-compat`` command."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from grpo_compat.tools.arguments import ArgumentParser, InputError


def _doctor(args: argparse.Namespace) -> int:
    from grpo_compat.tools.doctor import diagnose, format_diagnosis

    diagnosis = diagnose()
    print(json.dumps(diagnosis, indent=2) if args.json else format_diagnosis(diagnosis))
    return 0 if diagnosis["ok"] else 1


def _check(args: argparse.Namespace) -> int:
    from grpo_compat.fixes.validation import describe, validate
    from grpo_compat.tools import preflight

    world_size = preflight.world_size_of(args.world_size, args.nproc_per_node, args.nnodes)
    trl_version = preflight.checked_version("--trl-version", args.trl_version)
    swift_version = preflight.checked_version("--swift-version", args.swift_version)
    if args.swift:
        swift_version = preflight.swift_version_here(swift_version)
        swift_arguments = preflight.parse_swift_arguments(args.arguments)
        settings = preflight.swift_settings(swift_arguments, world_size, swift_version)
    else:
        if len(args.arguments) != 1:
            raise InputError("give one TRL config file (YAML or JSON), or --swift -- <swift arguments>")
        settings = preflight.trl_settings(preflight.load_config_file(Path(args.arguments[0])), world_size)
        swift_version = None
    rules = preflight.rules_here(trl_version, swift_version)
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


def _explain(args: argparse.Namespace) -> int:
    from grpo_compat.tools import explain

    return explain.run(args.log, args.version, args.json)


def _run(args: argparse.Namespace) -> int:
    from grpo_compat.tools import run

    command = args.command_line[1:] if args.command_line[:1] == ["--"] else args.command_line
    return run.run(command, args.strict, args.only, args.skip, args.print_env)


def _plugin_path(args: argparse.Namespace) -> int:
    from grpo_compat.swift_plugin import plugin_path

    print(plugin_path())
    return 0


def _matrix(matrix_arguments: list[str]) -> int:
    """A user's matrix (--cells-file, init) runs here; this project's own hands over to its checkout's
    matrix/repository.py, whose project (cells, plan, scripts) the same runner then runs."""
    import os
    import subprocess

    import grpo_compat
    from grpo_compat.matrix.cli import main as matrix_main

    repo = Path(grpo_compat.__file__).resolve().parent.parent
    users = matrix_arguments[:1] == ["init"] or any(
        arg == "--cells-file" or arg.startswith("--cells-file=") for arg in matrix_arguments
    )
    if users or not (repo / "matrix" / "cells.toml").exists():
        return matrix_main(matrix_arguments)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(repo), env.get("PYTHONPATH")]))
    try:
        return subprocess.call([sys.executable, "-m", "matrix.repository", "matrix", *matrix_arguments], env=env)
    except KeyboardInterrupt:
        return 130


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="grpo-compat", description="GRPO compatibility fixes for TRL and ms-swift.")
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
    explain = commands.add_parser(
        "explain", help="which known failures a log or traceback shows, why, and what to change"
    )
    explain.add_argument(
        "log", help="a log file, or - for standard input (python train.py 2>&1 | grpo-compat explain -)"
    )
    explain.add_argument(
        "--version",
        action="append",
        default=[],
        metavar="PACKAGE==VERSION",
        help="the versions the log comes from (default: those the log states, else the installed ones)",
    )
    explain.add_argument("--json", action="store_true", help="machine-readable output")
    explain.set_defaults(run=_explain)
    run = commands.add_parser(
        "run", help="run a command with grpo_compat applied in every Python process it starts: run -- <command>"
    )
    run.add_argument("--strict", action="store_true", help="a patch that cannot apply stops the process")
    run.add_argument("--only", metavar="ID,...", help="apply only these patches")
    run.add_argument("--skip", metavar="ID,...", help="apply every patch but these")
    run.add_argument("--print-env", action="store_true", help="print the exports a job script can eval instead")
    run.add_argument(
        "command_line", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="the command and its arguments"
    )
    run.set_defaults(run=_run)
    plugin = commands.add_parser(
        "plugin-path",
        help='the ms-swift plugin file: swift rlhf ... --external_plugins "$(grpo-compat plugin-path)"',
    )
    plugin.set_defaults(run=_plugin_path)
    matrix = commands.add_parser(
        "matrix",
        help="the version matrix of your cells and entry points: init | run | report | workflow (matrix --help)",
        add_help=False,
    )
    matrix.add_argument("matrix_arguments", nargs=argparse.REMAINDER)  # main() hands them over before parsing
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["matrix"]:  # the matrix's own parser reads the rest, --help included
        return _matrix(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except InputError as error:  # what a command could not read or use: one line, exit 2
        print(f"grpo-compat {args.command}: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
