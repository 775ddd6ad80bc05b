"""docs/cli.md: every command and subcommand of ``grpo-compat``, each argument with its help, and each exit status,
read from the argument parsers themselves (grpo_compat.tools.cli, grpo_compat.matrix.cli) so that it cannot drift.
Written by ``python -m grpo_compat.tools.regenerate``; a flag added to a parser appears here at the next run."""

from __future__ import annotations

import argparse

from grpo_compat.tools.arguments import ArgumentParser


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return {
        name: subparser
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for name, subparser in action.choices.items()
    }


def _summaries(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each subcommand's one-line help, as the parent's --help lists it."""
    return {
        choice.dest: choice.help or ""
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for choice in action._choices_actions
    }


def _cell(text: str) -> str:
    """Plain text inside a Markdown table cell: pipes, angle brackets and stars shown as written."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace("*", "\\*")


def _argument(action: argparse.Action) -> str:
    if action.option_strings:
        names = ", ".join(action.option_strings)
        if action.nargs == 0:
            return f"`{names}`"
        metavar = action.metavar or (f"{{{','.join(map(str, action.choices))}}}" if action.choices else None)
        return f"`{names} {metavar or action.dest.upper()}`"
    return f"`{action.metavar or action.dest}`"


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    text = parser._get_formatter()._expand_help(action) if action.help else ""
    notes = []
    if action.choices and not isinstance(action.choices, dict):
        notes.append("one of " + ", ".join(f"`{choice}`" for choice in action.choices))
    if action.option_strings and action.nargs != 0 and action.default not in (None, [], argparse.SUPPRESS):
        if "default" not in text:
            notes.append(f"default `{action.default}`")
    if action.required and action.option_strings:
        notes.append("required")
    if action.nargs == argparse.REMAINDER:
        notes.append("everything after it is the command's")
    return "; ".join(filter(None, [_cell(text), *notes]))


def _usage(parser: argparse.ArgumentParser) -> str:
    """The usage line on one line, whatever the terminal's width (argparse wraps it at $COLUMNS)."""
    formatter = parser.formatter_class(prog=parser.prog, width=100_000)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    return formatter.format_help().strip()


def _section(parser: argparse.ArgumentParser, summary: str, depth: int) -> list[str]:
    lines = [f"{'#' * depth} {parser.prog}", ""]
    description = summary or parser.description or ""
    if description:
        lines += [_cell(description[0].upper() + description[1:]), ""]
    lines += ["```", _usage(parser), "```", ""]
    arguments = [
        action
        for action in parser._actions
        if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction))
    ]
    if arguments:
        lines += ["| argument | what it does |", "|---|---|"]
        lines += [f"| {_argument(action)} | {_help(parser, action)} |" for action in arguments]
        lines.append("")
    statuses = getattr(parser, "exit_statuses", ())
    if statuses:
        lines += ["| exit status | meaning |", "|---|---|"]
        lines += [f"| {status} | {_cell(meaning)} |" for status, meaning in statuses]
        lines.append("")
    return lines


def _walk(parser: argparse.ArgumentParser, summary: str, depth: int) -> list[str]:
    lines = _section(parser, summary, depth)
    summaries = _summaries(parser)
    for name, subparser in _subcommands(parser).items():
        lines += _walk(_handed_over(subparser), summaries.get(name, ""), depth + 1)
    return lines


def _handed_over(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The parser that reads a command's arguments: a command that takes the rest of the command line unparsed
    (``grpo-compat matrix``) names the module whose ``build_parser()`` does (``hands_over_to``)."""
    module = getattr(parser, "hands_over_to", None)
    if module is None:
        return parser
    import importlib

    return importlib.import_module(module).build_parser()


def cli_reference(command: str) -> str:
    from grpo_compat.tools.cli import build_parser

    parser: ArgumentParser = build_parser()
    lines = [
        "# Command-line reference",
        "",
        f"<!-- generated from the argument parsers by `{command}`: do not edit -->",
        "",
        "Every command of `grpo-compat`, each of its arguments, and what each exit status means. `grpo-compat COMMAND",
        "--help` prints the same. A usage mistake is always one line on stderr and exit status 2.",
        "",
        *_walk(parser, "", 2),
    ]
    return "\n".join(lines).rstrip("\n") + "\n"
