"""The ``grpo-compat`` command."""

from __future__ import annotations

import argparse
import json
import sys


def _doctor(args: argparse.Namespace) -> int:
    from grpo_compat.doctor import diagnose, format_diagnosis

    diagnosis = diagnose()
    print(json.dumps(diagnosis, indent=2) if args.json else format_diagnosis(diagnosis))
    return 0 if diagnosis["ok"] else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grpo-compat", description="GRPO compatibility fixes for TRL and ms-swift.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    doctor = commands.add_parser(
        "doctor", help="show versions, which patches would apply and why, and known environment problems"
    )
    doctor.add_argument("--json", action="store_true", help="machine-readable output")
    doctor.set_defaults(run=_doctor)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
