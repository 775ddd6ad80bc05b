"""How much of the GRPO field-report census the catalogue covers, counted per thread.

    python -m matrix.census                          # ../shared/FIELD_REPORTS.md beside the checkout
    python -m matrix.census --census PATH --json

The census (a table of signatures, each row naming its threads: "trl #2858, #3061; open-r1 #249") and its
2026 update table (rows N1, N2, ...) are read from the markdown; the catalogue from grpo_compat/catalogue.
A thread is *handled* when a confirmed record with handling "fixed" or "refused" covers it (a patch makes the
run train, or a refusal before the model loads names the fix), and *named* when any confirmed record does
(the learning watchdog or `explain` names it too). Two countings, because a record may claim a whole row:
- by reference (strict): the record lists the thread itself among its references;
- by row (upper bound): the record lists the row in ``census``, which counts every thread of the row.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CENSUS = ROOT.parent / "shared" / "FIELD_REPORTS.md"
PREVENTS = ("fixed", "refused")
# "trl #2858", "trl PR #3199", "trl PRs #5986", "#3061" (the project of the thread before it), "rl-swarm #304/#305"
_THREAD = re.compile(r"(?:([A-Za-z][\w.-]*)\s+)?(?:PRs?\s+)?#(\d+)((?:/#\d+)*)")
_ROW = re.compile(r"^\|\s*(N?\d+)\s*\|([^|]*)\|")


@dataclass(frozen=True)
class Row:
    id: str  # "20" in the census table, "N5" in the 2026 update's
    threads: tuple[tuple[str, int], ...]  # (project, number): ("ms-swift", 8123)


def threads_of(where: str) -> tuple[tuple[str, int], ...]:
    found, project = [], ""
    for match in _THREAD.finditer(where):
        if match.group(1) and match.group(1) not in ("PR", "PRs"):
            project = match.group(1).lower()
        found.append((project, int(match.group(2))))
        found += [(project, int(number)) for number in re.findall(r"\d+", match.group(3))]
    return tuple(found)


def read_census(text: str) -> list[Row]:
    return [Row(m.group(1), threads_of(m.group(2))) for m in map(_ROW.match, text.splitlines()) if m]


def _reference(text: str) -> tuple[str, int] | None:
    """ "huggingface/trl#2858" or "trl#2858" -> ("trl", 2858)."""
    match = re.fullmatch(r"(?:[\w.-]+/)?([\w.-]+)#(\d+)", text.strip())
    return (match.group(1).lower(), int(match.group(2))) if match else None


def coverage(rows: Iterable[Row], failures: Iterable[Any]) -> dict[str, dict[str, int]]:
    """{"all" | "2026": {"threads", "handled", "named", "handled_by_row", "named_by_row"}}."""
    by_reference: dict[tuple[str, int], set[str]] = {}
    by_row: dict[str, set[str]] = {}
    for failure in (f for f in failures if f.confirmed):
        for reference in filter(None, map(_reference, failure.references)):
            by_reference.setdefault(reference, set()).add(failure.handling)
        for row in failure.census:
            by_row.setdefault(str(row), set()).add(failure.handling)
    fields = ("threads", "handled", "named", "handled_by_row", "named_by_row")
    counts = {group: dict.fromkeys(fields, 0) for group in ("all", "2026")}
    for row in rows:
        group = counts["2026" if row.id.startswith("N") else "all"]
        for thread in row.threads:
            strict = by_reference.get(thread, set())
            loose = strict | by_row.get(row.id, set())
            group["threads"] += 1
            group["handled"] += bool(strict & set(PREVENTS))
            group["named"] += bool(strict)
            group["handled_by_row"] += bool(loose & set(PREVENTS))
            group["named_by_row"] += bool(loose)
    return counts


def _percent(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.0f}%)" if whole else "0/0"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m matrix.census", description=__doc__.splitlines()[0])
    parser.add_argument("--census", type=Path, default=CENSUS, help=f"default: {CENSUS}")
    parser.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = parser.parse_args(argv)
    if not args.census.is_file():
        parser.error(f"no census at {args.census}: pass --census PATH to FIELD_REPORTS.md")
    from grpo_compat.catalogue import load_failures

    counts = coverage(read_census(args.census.read_text()), load_failures())
    if args.json:
        print(json.dumps(counts, indent=2))
        return 0
    for group, title in (("all", "census table"), ("2026", "2026 update table")):
        c = counts[group]
        print(f"{title}: {c['threads']} threads")
        print(
            f"  handled (fixed or refused):  by reference {_percent(c['handled'], c['threads'])}, "
            f"by row {_percent(c['handled_by_row'], c['threads'])}"
        )
        print(
            f"  named (any record):          by reference {_percent(c['named'], c['threads'])}, "
            f"by row {_percent(c['named_by_row'], c['threads'])}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
