"""`grpo-compat explain [FILE|-]`: a log or traceback in; the known failures it shows, why, and what to change.

    python train.py 2>&1 | grpo-compat explain -

Exit status: 0 when a known failure matched, 1 when none did, 2 when the input could not be read.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPORT_HINT = (
    "Nothing in the catalogue matched. For a report, include the whole traceback of every rank, "
    "`pip freeze` (or `grpo-compat doctor`) and the launch command."
)


class ExplainInputError(ValueError):
    """The log could not be read as text."""


def read_log(source: str) -> str:
    """The text of a log file, or of standard input for ``-``."""
    name = "standard input" if source == "-" else source
    try:
        data = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    except IsADirectoryError:
        raise ExplainInputError(f"{name} is a directory: expected a log file, or - for standard input") from None
    except OSError as error:
        raise ExplainInputError(f"cannot read {name}: {error.strerror or error}") from None
    if not data or data.isspace():  # not strip(): no copy of a 10 MB log
        raise ExplainInputError(f"{name} is empty: expected a log or traceback")
    sample = data[:65536]
    if b"\x00" in sample:
        raise ExplainInputError(f"{name} is binary data (it holds NUL bytes): expected a text log or traceback")
    text = data.decode("utf-8", errors="replace")  # a log in another encoding still shows its ASCII messages
    undecodable = text.count("\ufffd", 0, 65536)
    if undecodable > len(sample) // 4:
        raise ExplainInputError(f"{name} is not text ({undecodable} undecodable bytes in its start)")
    return text


def parse_given_versions(pins: list[str]) -> dict[str, str]:
    given = {}
    for pin in pins:
        name, sep, version = pin.partition("==")
        if not sep or not name.strip() or not version.strip():
            raise ExplainInputError(f"--version {pin!r}: expected PACKAGE==VERSION, e.g. trl==0.16.1")
        given[name.strip().lower()] = version.strip()
    return given


def run(source: str, pins: list[str], as_json: bool) -> int:
    from grpo_compat.catalogue.log_matching import explain, format_explanation

    try:
        given = parse_given_versions(pins)
        text = read_log(source)
    except ExplainInputError as error:
        print(f"grpo-compat explain: {error}", file=sys.stderr)
        return 2
    explanation = explain(text, given)
    if as_json:
        print(json.dumps({"source": source, **explanation.to_dict()}, indent=2))
    else:
        print(format_explanation(explanation, "standard input" if source == "-" else source))
        if not explanation.matches:
            print(REPORT_HINT)
    return 0 if explanation.matches else 1
