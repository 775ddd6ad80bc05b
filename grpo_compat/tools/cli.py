"""The ``grpo-compat`` command.

``grpo-compat run`` starts before every launch it wraps, so its path imports only what it needs: its
options are read without argparse (which, with json and pathlib, is imported by the other commands).
"""

from __future__ import annotations

import sys

from grpo_compat.tools.errors import InputError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse

    from grpo_compat.tools.arguments import ArgumentParser


# What `check` did not judge, said where it says ok: a config for another machine, or ms-swift's arguments, whose
# machine checks (bf16 without a GPU, use_vllm without vLLM: grpo_compat.tools.machine) cover trl configs only.
NOT_THE_MACHINE = "the settings only: this machine's bf16, GPU and vLLM support are not checked"


def _doctor(args: argparse.Namespace) -> int:
    import json

    from grpo_compat.tools.doctor import diagnose, failure_text, format_diagnosis, named_records

    if args.failure:  # the records in full: JSON (every field of each record, a list) with --json
        if args.all or args.config:
            given = " and ".join(option for option, value in (("--all", args.all), ("--config", args.config)) if value)
            raise InputError(f"--failure ID shows that record alone: leave out {given}")
        records = [failure.to_dict() for failure in named_records(args.failure)] if args.json else None
        print(json.dumps(records, indent=2) if args.json else failure_text(args.failure))
        return 0

    if args.prove:
        return _prove(args)
    diagnosis = diagnose()
    if args.config:  # a config written for an older trl: what the upgrade changed (grpo_compat.settings.upgrade)
        from pathlib import Path

        from grpo_compat.core.versions import installed_version
        from grpo_compat.settings.upgrade import saved_trl_note
        from grpo_compat.tools.arguments import read_input
        from grpo_compat.tools.preflight import load_config_file

        path = Path(args.config)
        text = read_input(args.config, "a TRL config file", dash_is_stdin=False).decode(errors="replace")
        diagnosis["config"] = saved_trl_note(path, text, load_config_file(path), installed_version("trl"))
    print(json.dumps(diagnosis, indent=2) if args.json else format_diagnosis(diagnosis, show_all=args.all))
    if args.config and not args.json:
        print(diagnosis["config"] or f"{args.config}: records no older trl than the installed one")
    return 0 if diagnosis["ok"] else 1


def _prove(args: argparse.Namespace) -> int:
    """doctor --prove: the run's answer; exit 0 only when the installed set trained a GRPO step."""
    import json

    from grpo_compat.tools.prove import format_proof, passes, prove

    settings: dict = {}
    if args.config:
        from pathlib import Path

        from grpo_compat.tools.preflight import load_config_file

        settings = load_config_file(Path(args.config))

    def progress(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    proof = prove(settings, None if args.json else progress, fixes=args.prove_fixes)
    print(json.dumps(proof, indent=2) if args.json else format_proof(proof))
    return 0 if passes(proof["probe"]) else 1


def _check(args: argparse.Namespace) -> int:
    if args.with_pins or args.requirements:  # a set nobody installed, read from the API histories
        from grpo_compat.tools import whatif

        return whatif.run(args, _check)
    if args.prove:
        raise InputError("check --prove runs the set of --with / --requirements; doctor --prove runs the installed one")
    import json
    from pathlib import Path

    from grpo_compat.core.tested import describe as describe_newer
    from grpo_compat.fixes.validation import describe, validate
    from grpo_compat.tools import preflight

    world_size = preflight.world_size_of(args.world_size, args.nproc_per_node, args.nnodes)
    machine = []
    trl_version = preflight.checked_version("--trl-version", args.trl_version, "trl")
    swift_version = preflight.checked_version("--swift-version", args.swift_version, "ms-swift")
    if args.swift:
        swift_version = preflight.swift_version_here(swift_version)
        swift_arguments = preflight.parse_swift_arguments(args.arguments)
        refused = preflight.refused_settings(list(swift_arguments), "ms-swift", swift_version, "cli")
        refused += preflight.swift_rollout_findings(swift_arguments, swift_version)
        settings = preflight.swift_settings(swift_arguments, world_size, swift_version)
    else:
        if not args.arguments:
            raise InputError("give one TRL config file (YAML or JSON), name=value settings, or --swift -- <arguments>")
        if all("=" in a and not Path(a).exists() for a in args.arguments):
            config, context = preflight.parse_keyword_arguments(args.arguments), "python"
        elif len(args.arguments) == 1:
            config, context = preflight.load_config_file(Path(args.arguments[0])), "config"
        else:
            raise InputError("give one TRL config file (YAML or JSON), name=value settings, or --swift -- <arguments>")
        trl_checked = preflight.version_to_check("trl", trl_version)
        refused = preflight.refused_settings(list(config), "trl", trl_checked, context)
        settings = preflight.trl_settings(config, world_size)
        swift_version = None
        if not args.other_machine:  # what this machine cannot run (bf16 without a GPU, use_vllm without vLLM)
            from grpo_compat.tools.machine import machine_findings

            machine = machine_findings(config, trl_checked)
    upgrade = None
    if args.from_version:
        package = "ms-swift" if args.swift else "trl"
        config_given = swift_arguments if args.swift else config
        target = swift_version if args.swift else trl_version
        upgrade = {
            "config": config_given,
            "between": (package, *preflight.upgrade_between(args.from_version, package, target)),
        }
    rules = preflight.rules_here(trl_version, swift_version)
    # A misspelt or removed setting comes first and alone: the batch rules would judge defaults the user never meant.
    findings = refused or validate(settings, rules) + machine
    errors = [f for f in findings if f.severity == "error"]
    changed = {}
    if upgrade:
        from grpo_compat.settings import upgrade as upgrades

        found = upgrades.changes(upgrade["config"], *upgrade["between"])
        changed = {
            "upgrade": upgrades.as_json(found, *upgrade["between"]),
            "table": upgrades.table(found, *upgrade["between"]),
        }
    newer = preflight.newer_than_tested_here(trl_version, swift_version)
    # The installed set's static check (grpo_compat.static_check), unless checking for other versions.
    installed = []
    if not (args.trl_version or args.swift_version):
        from grpo_compat.static_check import check

        installed = check()
    from grpo_compat.static_check import READ_NOT_RUN

    if args.json:
        print(
            json.dumps(
                {
                    "rules": rules.name,
                    "world_size": world_size,
                    "ok": not errors and not installed,
                    "findings": [
                        {
                            "rule": f.rule,
                            "severity": f.severity,
                            "message": f.message,
                            "suggestions": [dict(fix) for fix in f.suggestions],
                        }
                        for f in findings
                    ],
                    "newer_than_tested": newer,
                    **({"upgrade": changed["upgrade"]} if changed else {}),
                    "static_check": [finding.to_dict() for finding in installed],
                },
                indent=2,
            )
        )
    else:
        print(f"GRPO settings checked against {rules.name}, {world_size} process(es):")
        for line in describe_newer(newer, indent="note: "):
            print(line)
        machine_note = f" ({NOT_THE_MACHINE})" if args.swift or args.other_machine else " (on this machine)"
        if findings:
            print(describe(findings))
        elif installed:  # the settings are fine, but the installed trainer cannot load or run: never "ok"
            print(f"the settings are valid{machine_note}, but this install cannot train them:")
        else:
            print(f"ok: these settings can train{machine_note}")
        for finding in installed:
            print(f"error (installed packages, {READ_NOT_RUN}): {finding.message} ({finding.where})")
            print(f"  fix: {finding.fix}")
        if changed:
            print("\n" + changed["table"])
    return 1 if errors or installed else 0


def _explain(args: argparse.Namespace) -> int:
    from grpo_compat.tools import explain

    return explain.run(args.log, args.package_version, args.json)


def _run(args: argparse.Namespace) -> int:
    from grpo_compat.tools import run

    command = args.command_line[1:] if args.command_line[:1] == ["--"] else args.command_line
    return run.run(command, args.strict, args.only, args.skip, args.print_env, args.explain)


def _run_options(argv: list[str]) -> _RunOptions | None:
    """``run``'s options as argparse would read them; None for anything else (help, a mistake): argparse says it."""
    options = _RunOptions()
    index = 0
    while index < len(argv):
        argument = argv[index]
        name, has_value, value = argument.partition("=")
        if argument in ("--strict", "--print-env", "--explain"):
            setattr(options, argument[2:].replace("-", "_"), True)
        elif name in ("--only", "--skip") and has_value:
            setattr(options, name[2:], value)
        elif argument in ("--only", "--skip") and index + 1 < len(argv) and not argv[index + 1].startswith("-"):
            index += 1
            setattr(options, argument[2:], argv[index])
        elif argument.startswith("-") and argument != "--":
            return None
        else:
            break  # "--" or the command's first word: the rest is the command
        index += 1
    options.command_line = argv[index:]
    return options


class _RunOptions:
    """What argparse's Namespace holds for ``run``."""

    def __init__(self) -> None:
        self.strict = self.print_env = self.explain = False
        self.only = self.skip = None
        self.command_line: list[str] = []


def _plugin_path(args: argparse.Namespace) -> int:
    from grpo_compat.swift_plugin import plugin_path

    print(plugin_path())
    return 0


def _quickstart(args: argparse.Namespace) -> int:
    from pathlib import Path

    from grpo_compat.tools.quickstart import write_quickstart

    for path in write_quickstart(Path(args.folder), args.force):
        print(f"wrote {path}")
    print(f"next: cd {args.folder} && grpo-compat run -- python train.py")
    return 0


def _matrix(matrix_arguments: list[str]) -> int:
    """A user's matrix (--cells-file, init) runs here; this project's own hands over to its checkout's
    matrix/repository.py, whose project (cells, plan, scripts) the same runner then runs."""
    import os
    import subprocess
    from pathlib import Path

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
    import argparse

    from grpo_compat import __version__
    from grpo_compat.tools.arguments import USAGE_MISTAKE, ArgumentParser

    # Each command's exit statuses, declared here once: its --help shows them, docs/cli.md is generated from them.
    any_command = (
        (0, "--help or --version printed"),
        USAGE_MISTAKE,
        (141, "any command: the reader of its output stopped reading (head, less)"),
    )
    doctor_statuses = (
        (0, "no known problem of the installed set (--failure: the record was printed)"),
        (1, "a known problem of the installed set (an error in doctor's list)"),
        USAGE_MISTAKE,
    )
    check_statuses = (
        (0, "the settings are valid for the installed versions (or the ones named)"),
        (1, "findings: a setting that would fail or change the run, each with its fix"),
        USAGE_MISTAKE,
    )
    explain_statuses = (
        (0, "the log shows a known failure, or a cause reasoned with confidence"),
        (1, "nothing named with confidence"),
        USAGE_MISTAKE,
    )
    run_statuses = (
        ("any", "the command's own: grpo-compat replaces itself with the command"),
        (1, "settings refused before anything launched (the same refusal the patches give)"),
        USAGE_MISTAKE,
        (126, "the command cannot be executed"),
        (127, "command not found"),
    )

    parser = ArgumentParser(
        prog="grpo-compat", description="GRPO compatibility fixes for TRL and ms-swift.", exit_statuses=any_command
    )
    parser.add_argument("--version", action="version", version=f"grpo-compat {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    doctor = commands.add_parser(
        "doctor",
        help="show versions, which patches would apply and why, and known environment problems",
        exit_statuses=doctor_statuses,
    )
    doctor.add_argument("--json", action="store_true", help="machine-readable output (always complete)")
    doctor.add_argument(
        "--all", action="store_true", help="also the patches that do not apply here and the packages not installed"
    )
    doctor.add_argument(
        "--failure",
        metavar="ID",
        help="one known failure in full: cause, fix, versions, upstream (its id, or the short id its title ends "
        "with: KF-2); with --json, the records as JSON",
    )
    doctor.add_argument(
        "--config",
        metavar="FILE",
        help="a trl config that records its trl (# trl_version: X): what the upgrade changed; with --prove, the "
        "settings the run trains with",
    )
    doctor.add_argument(
        "--prove",
        action="store_true",
        help="run it: import the GRPO trainer and train one step on a tiny local model (a subprocess), then prove "
        "the reading's fix in a throwaway env built by uv; exits non-zero when the set cannot train",
    )
    doctor.add_argument(
        "--prove-fixes",
        type=int,
        default=3,
        metavar="N",
        help="with --prove: how many of the reading's fixes to build and run when the set cannot train (0: none)",
    )
    doctor.set_defaults(run=_doctor)
    check = commands.add_parser(
        "check",
        help="validate GRPO settings (a TRL config file, or ms-swift arguments) without loading anything",
        exit_statuses=check_statuses,
    )
    check.add_argument(
        "arguments",
        nargs="*",
        help="a TRL config file, or GRPOConfig name=value settings; with --swift: -- <swift rlhf arguments>",
    )
    check.add_argument("--swift", action="store_true", help="the arguments are ms-swift `swift rlhf` arguments")
    check.add_argument("--world-size", type=int, help="processes in total (default: $WORLD_SIZE or 1)")
    check.add_argument("--nproc-per-node", type=int, help="processes per machine (torchrun / NPROC_PER_NODE)")
    check.add_argument("--nnodes", type=int, help="machines (with --nproc-per-node; default 1)")
    check.add_argument("--trl-version", help="check against this trl version instead of the installed one")
    check.add_argument("--swift-version", help="check against this ms-swift version instead of the installed one")
    check.add_argument(
        "--from",
        dest="from_version",
        metavar="PACKAGE==VERSION",
        help="also list what the config means differently on the installed release than on this one (trl==0.19.0, "
        "or ms-swift==3.5.3 with --swift): changed defaults, removed settings",
    )
    check.add_argument(
        "--other-machine",
        action="store_true",
        help="the config runs on another machine: skip the checks of this one (bf16 without a GPU, use_vllm "
        "without vLLM)",
    )
    check.add_argument(
        "--with",
        dest="with_pins",
        action="append",
        default=[],
        metavar="REQUIREMENT",
        help="what-if before installing: the installed set with this requirement ('transformers==5.3.0', "
        "'trl>=1.15'), read from the API histories: what would fail to import, which settings change (repeatable)",
    )
    check.add_argument(
        "--requirements",
        metavar="FILE",
        help="what-if for a requirements file, pip freeze output or a uv.lock: the installed set with its pins",
    )
    check.add_argument(
        "--prove",
        action="store_true",
        help="with --with / --requirements: build the set with uv in a throwaway env and run it (import the GRPO "
        "trainer, train one step on a tiny local model), as doctor --prove; exit 0 only when it trains",
    )
    check.add_argument("--json", action="store_true", help="machine-readable output")
    check.set_defaults(run=_check)
    explain = commands.add_parser(
        "explain",
        help="which known failures a log or traceback shows, why, and what to change",
        exit_statuses=explain_statuses,
    )
    explain.add_argument(
        "log", help="a log file, or - for standard input (python train.py 2>&1 | grpo-compat explain -)"
    )
    explain.add_argument(
        "--package-version",
        action="append",
        default=[],
        metavar="PACKAGE==VERSION",
        help="the versions the log comes from (default: those the log states, else the installed ones)",
    )
    explain.add_argument("--json", action="store_true", help="machine-readable output")
    explain.set_defaults(run=_explain)
    run = commands.add_parser(
        "run",
        help="run a command with grpo_compat applied in every Python process it starts: run -- <command>",
        exit_statuses=run_statuses,
    )
    run.add_argument(
        "--strict",
        action="store_true",
        help="a patch that should apply and cannot (a target moved, a signature changed) stops the process; "
        "one outside its version window is simply not applicable",
    )
    run.add_argument("--only", metavar="ID,...", help="apply only these patches")
    run.add_argument("--skip", metavar="ID,...", help="apply every patch but these")
    run.add_argument(
        "--explain",
        action="store_true",
        help="keep the command's output on the terminal and, when it fails, explain it after (on stderr); "
        "the exit status stays the command's",
    )
    run.add_argument("--print-env", action="store_true", help="print the exports a job script can eval instead")
    run.add_argument(
        "command_line", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="the command and its arguments"
    )
    run.set_defaults(run=_run)
    plugin = commands.add_parser(
        "plugin-path",
        help='the ms-swift plugin file: swift rlhf ... --external_plugins "$(grpo-compat plugin-path)"',
        exit_statuses=((0, "the path was printed"),),
    )
    plugin.set_defaults(run=_plugin_path)
    quickstart = commands.add_parser(
        "quickstart",
        help="write a tiny local model, train.py and grpo.yaml: GRPO on a CPU in a minute, offline",
        exit_statuses=((0, "the model and files were written"), USAGE_MISTAKE),
    )
    quickstart.add_argument("folder", nargs="?", default="grpo-quickstart", help="where (default: grpo-quickstart)")
    quickstart.add_argument("--force", action="store_true", help="overwrite train.py and grpo.yaml")
    quickstart.set_defaults(run=_quickstart)
    matrix = commands.add_parser(
        "matrix",
        help="the version matrix of your cells and entry points: init | run | report | workflow (matrix --help)",
        add_help=False,
    )
    matrix.add_argument("matrix_arguments", nargs=argparse.REMAINDER)  # main() hands them over before parsing
    matrix.hands_over_to = "grpo_compat.matrix.cli"  # whose build_parser() reads them (docs/cli.md documents it)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["matrix"]:  # the matrix's own parser reads the rest, --help included
        return _matrix(argv[1:])
    if argv[:1] == ["explain"] and "--version" in argv:  # the flag's name before grpo-compat --version existed
        print(
            "grpo-compat explain: --version PACKAGE==VERSION is now --package-version PACKAGE==VERSION", file=sys.stderr
        )
        return 2
    if argv[:1] == ["run"]:
        options = _run_options(argv[1:])
        if options is not None:
            try:
                return _run(options)
            except InputError as error:
                print(f"grpo-compat run: {error}", file=sys.stderr)
                return 2
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except InputError as error:  # what a command could not read or use: one line, exit 2
        print(f"grpo-compat {args.command}: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader (head, less) stopped reading: stop as other command-line tools do
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
        return 141


if __name__ == "__main__":
    sys.exit(main())
