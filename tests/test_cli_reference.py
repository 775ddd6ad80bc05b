"""docs/cli.md is generated from the argument parsers: every command and subcommand, every flag, every exit status.
(That the file is current is tests/test_patch_declarations.py's test of the generated files.)"""

from __future__ import annotations

import argparse

import pytest

from grpo_compat.matrix.cli import build_parser as matrix_parser
from grpo_compat.tools.cli import build_parser
from grpo_compat.tools.cli_reference import _handed_over, _subcommands, cli_reference
from tests.helpers import REPO, run_python


def every_parser() -> list[argparse.ArgumentParser]:
    found, pending = [], [build_parser()]
    while pending:
        parser = _handed_over(pending.pop(0))
        found.append(parser)
        pending += _subcommands(parser).values()
    return found


def test_every_command_and_subcommand_declares_its_exit_statuses():
    parsers = every_parser()
    assert {parser.prog for parser in parsers} >= {
        "grpo-compat",
        "grpo-compat doctor",
        "grpo-compat check",
        "grpo-compat explain",
        "grpo-compat run",
        "grpo-compat matrix",
        "grpo-compat matrix run",
        "grpo-compat matrix workflow",
    }
    undeclared = [parser.prog for parser in parsers if not getattr(parser, "exit_statuses", ())]
    assert not undeclared, f"declare exit_statuses= where these parsers are built: {undeclared}"


def test_the_reference_has_every_command_flag_and_exit_status():
    reference = cli_reference("regenerate")
    for parser in every_parser():
        assert f" {parser.prog}\n" in reference, parser.prog
        section = reference.split(f" {parser.prog}\n", 1)[1]
        for action in parser._actions:
            for flag in action.option_strings:
                if flag not in ("-h", "--help"):
                    assert f"`{flag}" in section, f"{parser.prog} {flag}"
        for status, _meaning in parser.exit_statuses:
            assert f"| {status} | " in section, f"{parser.prog}: exit status {status}"


def test_a_flag_added_to_a_parser_appears_in_the_reference(monkeypatch):
    import grpo_compat.tools.cli as cli

    def with_a_new_flag():
        parser = build_parser()
        _subcommands(parser)["run"].add_argument("--new-flag", metavar="N", help="a flag added later")
        return parser

    monkeypatch.setattr(cli, "build_parser", with_a_new_flag)
    assert "| `--new-flag N` | a flag added later |" in cli_reference("regenerate")


@pytest.mark.parametrize("command", [["run", "--help"], ["matrix", "workflow", "--help"]])
def test_help_shows_the_same_exit_statuses(command):
    shown = run_python(f"import sys; from grpo_compat.tools.cli import main; sys.exit(main({command!r}))").stdout
    parser = {"run": _subcommands(build_parser())["run"], "matrix": _subcommands(matrix_parser())["workflow"]}[
        command[0]
    ]
    assert "exit status:" in shown
    for status, meaning in parser.exit_statuses:
        assert f"{status}  {meaning}" in shown


def test_the_reference_is_in_the_sites_reference_section():
    nav = (REPO / "mkdocs.yml").read_text()
    assert ": cli.md\n" in nav.split("  - Reference:", 1)[1].split("\n  - ", 1)[0]
