"""`grpo-compat explain [FILE|-]`: a log or traceback in; the known failures it shows, why, and what to change.

    python train.py 2>&1 | grpo-compat explain -

Exit status: 0 when a known failure matched, a cause was reasoned from the error with confidence, or the log is
of a run that learns (nothing is wrong); 1 when none of these; 2 when the input could not be read (InputError,
reported by the command line).
"""

from __future__ import annotations

import json

from grpo_compat.core.versions import is_version
from grpo_compat.tools.arguments import InputError, read_input

REPORT_HINT = (
    "Nothing in the catalogue matched. For a report, include the whole traceback of every rank, "
    "`pip freeze` (or `grpo-compat doctor`) and the launch command."
)


def read_log(source: str) -> str:
    """The text of a log file, or of standard input for ``-``."""
    data = read_input(source, "a log or traceback (a file, or - for standard input)")
    text = data.decode("utf-8", errors="replace")  # a log in another encoding still shows its ASCII messages
    undecodable = text.count("\ufffd", 0, 65536)
    if undecodable > min(len(data), 65536) // 4:
        name = "standard input" if source == "-" else source
        raise InputError(f"{name} is not text ({undecodable} undecodable bytes in its start)")
    return text


def parse_given_versions(pins: list[str]) -> dict[str, str]:
    given = {}
    for pin in pins:
        name, sep, version = pin.partition("==")
        if not sep or not name.strip() or not is_version(version):
            raise InputError(f"--package-version {pin!r}: expected PACKAGE==VERSION, e.g. trl==0.16.1")
        given[name.strip().lower()] = version.strip()
    return given


def run(source: str, pins: list[str], as_json: bool, name: str | None = None) -> int:
    """``name``: what the answer calls the log (default: its file, or standard input)."""
    from grpo_compat.catalogue.log_matching import explain, format_explanation

    given = parse_given_versions(pins)  # before standard input is read
    explanation = explain(read_log(source), given)
    if as_json:
        print(json.dumps({"source": source, **explanation.to_dict()}, indent=2))
    else:
        print(format_explanation(explanation, name or ("standard input" if source == "-" else source)))
    named = bool(explanation.matches) or any(finding.confident for finding in explanation.reasoned)
    if not as_json and not named and not explanation.nothing_wrong:
        print(REPORT_HINT)
    return 0 if named or explanation.nothing_wrong else 1
