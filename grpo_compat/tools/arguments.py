"""The argument parser of every grpo-compat command: a usage mistake is one line on stderr and exit status 2."""

from __future__ import annotations

import argparse
import re
import sys


class ArgumentParser(argparse.ArgumentParser):
    """argparse, but a bad command line is reported in one line naming the input, with where to look."""

    def error(self, message: str) -> None:  # type: ignore[override]
        one_line = re.sub(r"[\x00-\x1f\x7f]", lambda c: repr(c.group())[1:-1], message)  # a typed newline stays \n
        print(f"{self.prog}: {one_line} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)
