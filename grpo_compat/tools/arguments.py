"""What every grpo-compat command does with its input: a usage mistake, or a file it cannot read, is one line
on stderr and exit status 2."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from grpo_compat.tools.errors import InputError as InputError  # where the commands import it from


def read_input(source: str, expected: str, dash_is_stdin: bool = True) -> bytes:
    """The bytes of a file, or of standard input for ``-``; refused when missing, a folder, empty or binary."""
    from_stdin = dash_is_stdin and source == "-"
    name = "standard input" if from_stdin else source
    try:
        data = sys.stdin.buffer.read() if from_stdin else Path(source).read_bytes()
    except IsADirectoryError:
        raise InputError(f"{name} is a directory: expected {expected}") from None
    except OSError as error:
        raise InputError(f"cannot read {name}: {error.strerror or error}") from None
    if not data or data.isspace():  # not strip(): no copy of a 10 MB log
        raise InputError(f"{name} is empty: expected {expected}")
    if b"\x00" in data[:65536]:  # a log may hold a stray NUL further on (a truncated write): text all the same
        raise InputError(f"{name} is binary data (it holds NUL bytes): expected {expected}")
    return data


ExitStatuses = tuple[tuple[int | str, str], ...]  # a number, or words for a range ("the command's")

USAGE_MISTAKE = (2, "a usage mistake, or input it cannot read or use: one line on stderr")


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a bad command line is reported in one line naming the input, with where to look.

    ``exit_statuses``: the command's exit statuses and what each means, declared once: ``--help`` shows them below
    the options, and docs/cli.md (grpo_compat.tools.cli_reference) is generated from them."""

    def __init__(self, *args, exit_statuses: ExitStatuses = (), **kwargs) -> None:
        if exit_statuses:
            kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
            kwargs["epilog"] = "\n".join(filter(None, [kwargs.get("epilog"), "exit status:"])) + "".join(
                f"\n  {status:>3}  {meaning}" for status, meaning in exit_statuses
            )
        super().__init__(*args, **kwargs)
        self.exit_statuses = exit_statuses

    def error(self, message: str) -> None:  # type: ignore[override]
        one_line = re.sub(r"[\x00-\x1f\x7f]", lambda c: repr(c.group())[1:-1], message)  # a typed newline stays \n
        print(f"{self.prog}: {one_line} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)
