"""Time the cold `grpo-compat doctor --json` (a fresh user cache: nothing cached) on every set of
tests/fixtures/prove_sets.toml and prove_sets_held_out.toml, in each set's env (built by uv, as matrix.prove_sets
builds them), several runs per set, with this checkout's grpo_compat first on the path.

    python -m matrix.bench_cold_doctor [--runs 5] [--output .matrix/cold-doctor-24.jsonl]

One JSON line per set: each run's (CPU s, wall s, exit code), the medians, the load average. Compile the bytecode
first (python -m compileall grpo_compat) where PYTHONDONTWRITEBYTECODE is set, as an installed wheel has it."""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path

import tomllib

from grpo_compat.tools.prove import build_env
from matrix.prove_sets import ALWAYS, SETS, cold_doctor

ROOT = Path(__file__).resolve().parents[1]


def timed_doctor(python: str) -> tuple[float, float, int]:
    """(CPU s, wall s, exit code) of one cold doctor; run from the checkout's root (``python -m
    matrix.bench_cold_doctor``), whose grpo_compat the env's python imports first."""
    done, wall, cpu = cold_doctor(Path(python))
    return cpu, wall, done.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--output", default=str(ROOT / ".matrix" / "cold-doctor-24.jsonl"))
    args = parser.parse_args(argv)
    sets = [s for f in (SETS, SETS.with_name("prove_sets_held_out.toml")) for s in tomllib.loads(f.read_text())["set"]]
    pythons = {s["name"]: str(build_env([*s["pins"], *ALWAYS])[0]) for s in sets}
    runs: dict[str, list] = {name: [] for name in pythons}
    for _ in range(args.runs):  # the sets interleaved, so that a burst of load spreads over them
        for name, python in pythons.items():
            runs[name].append(timed_doctor(python))
            print(name, runs[name][-1], flush=True)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    with open(args.output, "w", encoding="utf-8") as handle:
        for name, measured in runs.items():
            record = {"name": name, "runs": measured, "cpu_median": statistics.median(r[0] for r in measured),
                      "wall_median": statistics.median(r[1] for r in measured), "load": os.getloadavg()}  # fmt: skip
            handle.write(json.dumps(record) + "\n")
            print(f"{name:22s} wall median {record['wall_median']:.2f} s, slowest {max(r[1] for r in measured):.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
