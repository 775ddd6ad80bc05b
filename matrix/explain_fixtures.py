"""Copy the captured logs of reproducers' plain runs into tests/fixtures/explain/matrix, for `explain`'s tests.

    python -m matrix.explain_fixtures RESULTS_DIR [RESULTS_DIR ...] [--replace]

One log per reproducer and distinct upstream message (digits aside), the tail of what the run printed
(ms-swift's own output first for a `swift rlhf` run); index.json records the cell, its versions, the
catalogue record the reproducer proves and whether upstream failed silently (the matrix's judge or a
probe found it, upstream printed nothing of its own). The index keeps the entries of cells these results do
not hold (one engineer's run of one cell must not drop the others'); --replace rebuilds it from these alone.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from matrix.reproducers import REPRODUCERS

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "explain" / "matrix"
TAIL_LINES = 80


def _silent(run: dict) -> bool:
    error = run.get("error") or ""
    return not error or error.startswith("ProbeFailed")


def collect(results: list[Path]) -> dict[str, dict]:
    reproducers = {reproducer.id: reproducer for reproducer in REPRODUCERS}
    index: dict[str, dict] = {}
    seen: set[tuple[str, str]] = set()
    for cell_file in sorted(path for folder in results for path in folder.glob("*.json")):
        cell = json.loads(cell_file.read_text())
        for run in cell.get("runs", []):
            reproducer = reproducers.get(run["kind"].removeprefix("repro:"))
            if reproducer is None or run["mode"] != "plain" or run["status"] != "pass":
                continue
            message = re.sub(r"\d+", "N", (run.get("outcome") or "").splitlines()[0] if run.get("outcome") else "")
            if (reproducer.id, message) in seen:
                continue
            seen.add((reproducer.id, message))
            stem = f"repro_{reproducer.id}_plain"  # not a Path's stem: reproducer ids may hold dots
            logs = [cell_file.parent / cell["cell"] / f"{stem}{suffix}" for suffix in (".swift.log", ".log")]
            logs = [path for path in logs if path.exists()]
            if not logs:
                continue
            lines = "\n".join(path.read_text(errors="replace") for path in logs).splitlines()
            name = f"{reproducer.id}@{cell['cell']}.log"
            (FIXTURES / name).write_text("\n".join(lines[-TAIL_LINES:]) + "\n")
            index[name] = {
                "reproducer": reproducer.id,
                "cell": cell["cell"],
                "failure": reproducer.failure,
                "silent": _silent(run),
                "versions": {k: v for k, v in cell["versions"].items() if v},
            }
    return index


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m matrix.explain_fixtures",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "results", nargs="+", type=Path, help="matrix results folders (grpo-compat matrix run --results)"
    )
    parser.add_argument("--replace", action="store_true", help="rebuild index.json from these results alone")
    args = parser.parse_args(argv)
    missing = [str(folder) for folder in args.results if not folder.is_dir()]
    if missing:
        parser.error(f"not a results folder: {', '.join(missing)}")
    FIXTURES.mkdir(parents=True, exist_ok=True)
    index_file = FIXTURES / "index.json"
    index = {} if args.replace or not index_file.exists() else json.loads(index_file.read_text())
    found = collect(args.results)
    index.update(found)
    index_file.write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    print(f"{len(found)} logs written, {len(index)} in {index_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
