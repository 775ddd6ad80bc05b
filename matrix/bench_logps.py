"""What trl.logps-alignment costs: peak memory and time of TRL's per-token log-prob method, plain vs patched.

A one-layer Qwen2 with Qwen2.5's vocabulary (152064), hidden 64, batch 2, L = 300 tokens, on CPU (one
thread), called through TRL's own method (grpo_compat.testing.logps). Cases: aligned K = 200, plain and
patched (the patch must cost nothing there), and K = L, patched (upstream fails or returns L - 1 columns:
shown once). Every measurement is a fresh process: its peak RSS during the first call (Linux VmHWM,
reset just before the call) minus its RSS before, and the time of that call (median with --calls more).
Repetitions are interleaved (plain, patched, plain, ...) so the drift of a shared machine hits both alike.

    .venv/bin/python -m matrix.bench_logps [--reps 3] [--calls 0] [--python PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

VOCAB, HIDDEN, BATCH, LENGTH, ALIGNED = 152064, 64, 2, 300, 200
CASES = [("plain", ALIGNED), ("patched", ALIGNED), ("patched", LENGTH)]


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def worker(mode: str, keep: int, calls: int) -> dict:
    """One measurement, in this process: memory added by the first call, median time of the next ones."""
    if mode == "patched":
        import grpo_compat

        grpo_compat.apply()
    import torch

    from grpo_compat.testing.logps import causal_lm, log_prob_method, log_probs, trainer_stand_in

    torch.set_num_threads(1)
    model = causal_lm(vocab_size=VOCAB, hidden_size=HIDDEN)
    trainer = trainer_stand_in(model)
    method = log_prob_method()
    ids = torch.randint(0, VOCAB, (BATCH, LENGTH), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)

    def call() -> object:
        with torch.no_grad():
            return method(trainer, model, ids, mask, keep)

    before = _status_kb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM (peak RSS) to the current RSS
    start = time.perf_counter()
    try:
        shape = list(log_probs(call()).shape)
    except Exception as error:  # noqa: BLE001 - upstream's failure is the measurement's result
        return {"outcome": f"{type(error).__name__}: {str(error).splitlines()[0][:90]}"}
    times = [time.perf_counter() - start]
    peak = _status_kb("VmHWM")
    for _ in range(calls):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return {"outcome": f"{shape}", "extra_mib": (peak - before) / 1024, "time_ms": statistics.median(times) * 1000}


def measure(python: str, mode: str, keep: int, calls: int) -> dict:
    command = [python, __file__, "--worker", mode, "--keep", str(keep), "--calls", str(calls)]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if completed.returncode != 0:
        return {"outcome": f"worker failed: {completed.stderr.strip().splitlines()[-1][:90]}"}
    return json.loads(completed.stdout.strip().splitlines()[-1])


def bench(python: str, reps: int, calls: int) -> list[str]:
    version = subprocess.run(
        [
            python,
            "-c",
            "import trl, transformers, torch; print(trl.__version__, transformers.__version__, torch.__version__)",
        ],
        capture_output=True,
        text=True,
    ).stdout.split()
    results: dict[tuple[str, int], list[dict]] = {case: [] for case in CASES}
    for _ in range(reps):
        for mode, keep in CASES:
            results[(mode, keep)].append(measure(python, mode, keep, calls))
    upstream_at_length = measure(python, "plain", LENGTH, 0)["outcome"]
    header = f"trl {version[0]}, transformers {version[1]}, torch {version[2]}; "
    header += f"V={VOCAB} H={HIDDEN} B={BATCH} L={LENGTH}, one thread"
    rows = [header, f"{'case':<22} {'result':<12} {'peak extra MiB':>15} {'time ms':>9}  (median of {reps} runs)"]
    for (mode, keep), runs in results.items():
        label = f"{mode} K={keep}" + (" (=L)" if keep == LENGTH else "")
        outcomes = {run["outcome"] for run in runs}
        if any("extra_mib" not in run for run in runs):
            rows.append(f"{label:<22} {'; '.join(sorted(outcomes))}")
            continue
        memory = statistics.median(run["extra_mib"] for run in runs)
        seconds = statistics.median(run["time_ms"] for run in runs)
        rows.append(f"{label:<22} {'/'.join(sorted(outcomes)):<12} {memory:>15.1f} {seconds:>9.1f}")
    rows.append(f"{'plain K=300 (=L)':<22} {upstream_at_length}")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3, help="interleaved repetitions of each case")
    parser.add_argument("--calls", type=int, default=0, help="more timed calls per measurement, after the first")
    parser.add_argument("--python", action="append", help="python of an env to measure (repeatable; default: this one)")
    parser.add_argument("--worker", choices=("plain", "patched"), help=argparse.SUPPRESS)
    parser.add_argument("--keep", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.keep, args.calls)))
        return 0
    for python in args.python or [sys.executable]:
        print("\n".join(bench(python, args.reps, args.calls)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
