"""What grpo_compat costs: import + apply() time, `grpo-compat run` start-up, and patched vs plain GRPO smoke-run
step time.

Runs are interleaved (A B A B ...) so that drift of this noisy machine hits both sides alike; each start-up command
is paired with a bare `python -c pass` of the same interpreter, and the median of the pairs' ratios is reported
(wall, and cpu = user + system of the child). Usage:

    .venv/bin/python -m matrix.bench_overhead [--runs 15] [--smoke-runs 3] [--python PATH]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
APPLY = "import grpo_compat; grpo_compat.apply()"
NOTHING = "pass"


def timed(command: list[str]) -> tuple[float, float]:
    """Wall and cpu (user + system) seconds of the command's process and those it waited for."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def paired_ratios(command: list[str], python: str, runs: int) -> dict:
    """``command`` against ``python -c pass``, alternating: the median of the pairs' wall and cpu ratios."""
    pairs = [(timed(command), timed([python, "-c", NOTHING])) for _ in range(runs)]
    return {
        "pairs": runs,
        "median_wall_ratio": round(statistics.median(a[0] / b[0] for a, b in pairs), 3),
        "median_cpu_ratio": round(statistics.median(a[1] / b[1] for a, b in pairs), 3),
        "median_added_wall_ms": round(statistics.median(a[0] - b[0] for a, b in pairs) * 1000, 1),
    }


def run_command(python: str) -> list[str]:
    """`grpo-compat run -- python -c pass`, through the env's entry point (what users type) where it has one."""
    entry_point = Path(python).parent / "grpo-compat"
    launcher = [str(entry_point)] if entry_point.exists() else [python, "-m", "grpo_compat"]
    return [*launcher, "run", "--", python, "-c", NOTHING]


def importtime_of_grpo_compat(python: str) -> float:
    """Cumulative import time of grpo_compat as ``-X importtime`` reports it, in ms."""
    stderr = subprocess.run([python, "-X", "importtime", "-c", APPLY], capture_output=True, text=True).stderr
    line = next(row for row in stderr.splitlines() if row.rstrip().endswith("| grpo_compat"))
    return int(line.split("|")[1]) / 1000


def heavy_modules_after_apply(python: str) -> list[str]:
    code = APPLY + "; import sys; print(sorted(m for m in ('torch','trl','transformers','swift') if m in sys.modules))"
    return json.loads(subprocess.run([python, "-c", code], capture_output=True, text=True).stdout.replace("'", '"'))


def bench_import(python: str, runs: int) -> dict:
    importtimes = [importtime_of_grpo_compat(python) for _ in range(5)]
    return {
        **paired_ratios([python, "-c", APPLY], python, runs),
        "median_importtime_ms": round(statistics.median(importtimes), 1),
        "heavy_modules_imported": heavy_modules_after_apply(python),
    }


# (label, smoke --mode, extra smoke options): the watchdog's own cost is "patched" against "patched-no-watchdog".
SMOKE_VARIANTS = (
    ("plain", "plain", ()),
    ("patched", "patched", ()),
    ("patched-no-watchdog", "patched", ("--watchdog", "off")),
)


def bench_smoke(python: str, runs: int, steps: int) -> dict:
    times: dict[str, list[dict]] = {label: [] for label, _, _ in SMOKE_VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "model"
        for index in range(runs):
            for label, mode, options in SMOKE_VARIANTS:
                output = Path(tmp) / f"{label}-{index}.json"
                command = [python, str(REPO / "matrix" / "smoke_grpo.py"), "--mode", mode, "--steps", str(steps)]
                command += ["--model-dir", str(model), "--output", str(output), *options]
                subprocess.run(command, check=True, capture_output=True)
                times[label].append(json.loads(output.read_text()))
    summary: dict = {}
    for label, results in times.items():
        summary[label] = {
            "median_wall_s": round(statistics.median(r["wall_time_s"] for r in results), 3),
            "median_train_s_per_step": round(statistics.median(r["train_time_s"] / r["steps"] for r in results), 4),
            "weights_sha256": sorted({r["weights_sha256"] for r in results}),
        }

    def ratio(a: str, b: str) -> float:
        return round(summary[a]["median_train_s_per_step"] / summary[b]["median_train_s_per_step"], 3)

    summary["patched_over_plain_step_time"] = ratio("patched", "plain")
    summary["watchdog_on_over_off_step_time"] = ratio("patched", "patched-no-watchdog")
    summary["same_weights"] = len({tuple(v["weights_sha256"]) for v in summary.values() if isinstance(v, dict)}) == 1
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default=sys.executable, help="interpreter of the env to measure")
    parser.add_argument("--runs", type=int, default=15, help="interleaved pairs for each start-up benchmark")
    parser.add_argument("--smoke-runs", type=int, default=3, help="interleaved plain/patched smoke runs")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--output", type=Path, default=REPO / ".matrix" / "bench_overhead.json")
    args = parser.parse_args()
    print(f"import + apply(), {args.runs} interleaved pairs ...", flush=True)
    result = {"import": bench_import(args.python, args.runs)}
    print(json.dumps(result["import"], indent=2), flush=True)
    print(f"grpo-compat run -- python -c pass, {args.runs} interleaved pairs ...", flush=True)
    result["run"] = paired_ratios(run_command(args.python), args.python, args.runs)
    print(json.dumps(result["run"], indent=2), flush=True)
    if args.smoke_runs:
        print(f"GRPO smoke run, {args.smoke_runs} x {len(SMOKE_VARIANTS)} variants, {args.steps} steps ...", flush=True)
        result["smoke"] = bench_smoke(args.python, args.smoke_runs, args.steps)
        print(json.dumps(result["smoke"], indent=2))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
