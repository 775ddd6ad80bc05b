"""`grpo-compat explain` on a 10 MB log: the time of explain() itself and of the whole command.

Two logs built from the captured logs of tests/fixtures/explain (real runs), each with rank prefixes and a
known failure at its end: a typical long run (a metrics line and a redrawn, coloured progress bar per
step) and a worst case (the fixtures repeated: a warning or an error every few lines). Usage:

    .venv/bin/python -m matrix.bench_explain [--megabytes 10] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "explain" / "matrix"
TAIL = "[rank0]: TypeError: GRPOTrainer._get_train_sampler() takes 1 positional argument but 2 were given\n"


def _real_lines() -> list[str]:
    return [
        line
        for path in sorted(FIXTURES.glob("*.log"))
        if "sampler" not in path.name
        for line in path.read_text().splitlines()
    ]


def typical_log(megabytes: float) -> str:
    """A long run: the real logs' metrics lines once per step, a tqdm bar redrawn between them, 2 ranks."""
    lines = _real_lines()
    metrics = [line for line in lines if line.startswith("{'loss'")]
    steps, size, step = [], int(megabytes * 1024 * 1024), 0
    while size > 0:
        line = metrics[step % len(metrics)].replace("'epoch': ", f"'step': {step}, 'epoch': ")
        bar = "".join(
            f"\r{p}%|{'#' * (p // 10)}| {step}/100000 [01:{p:02d}<00:00, 1.{p}s/it]" for p in range(0, 100, 10)
        )
        steps.append(f"[rank{step % 2}]: {line}\n\x1b[32m{bar}\x1b[0m\n")
        size -= len(steps[-1])
        step += 1
    return "\n".join(lines[:200]) + "\n" + "".join(steps) + TAIL


def dense_log(megabytes: float) -> str:
    """The worst case: the real logs repeated, a warning or an error every few lines throughout."""
    block = "\n".join(f"[rank{n % 2}]: {line}" for n, line in enumerate(_real_lines())) + "\n"
    size = int(megabytes * 1024 * 1024)
    return (block * (size // len(block) + 1))[:size] + "\n" + TAIL


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--megabytes", type=float, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    from grpo_compat.catalogue.log_matching import explain

    for name, build in (("typical", typical_log), ("dense", dense_log)):
        text = build(args.megabytes)
        in_process = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            found = explain(text)
            in_process.append(time.perf_counter() - start)
        with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False) as log:
            log.write(text)
        whole, interpreter = [], []
        for _ in range(args.repeat):  # side by side, alternating, so noise hits both alike
            for timings, argv in (
                (whole, [sys.executable, "-m", "grpo_compat", "explain", log.name]),
                (interpreter, [sys.executable, "-c", "pass"]),
            ):
                start = time.perf_counter()
                subprocess.run(argv, capture_output=True, check=False)
                timings.append(time.perf_counter() - start)
        Path(log.name).unlink()
        print(
            f"{name} log: {len(text) / 1e6:.1f} MB, {text.count(chr(10))} lines, matched {len(found.matches)} records"
        )
        print(f"  explain() in process, median of {args.repeat}: {statistics.median(in_process) * 1000:.0f} ms")
        print(f"  grpo-compat explain, the whole command: {statistics.median(whole) * 1000:.0f} ms")
        print(f"  python -c pass (interpreter start): {statistics.median(interpreter) * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
