"""The learning watchdog's own cost: time spent inside its callback hooks over a GRPO smoke run's train time.

Measured in one process (so machine noise hits numerator and denominator alike): every hook of the
callback is timed while a real GRPOTrainer trains the tiny model. Usage:

    .venv/bin/python -m matrix.bench_watchdog [--steps 6]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

# The callback hooks, and the optimizer pre-step hook that reads the learning rate and gradient norm.
HOOKS = ("on_step_begin", "on_step_end", "on_log", "on_train_end", "_observe_update")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    import grpo_compat

    grpo_compat.apply(skip=["trl.learning-watchdog"])  # the callback is added by hand below, to time it
    from trl import GRPOConfig, GRPOTrainer

    from grpo_compat.fixes.watchdog import WatchdogSettings
    from grpo_compat.fixes.watchdog_callback import build_callback
    from grpo_compat.testing.smoke import length_reward, parse_args
    from grpo_compat.testing.tiny_model import build_tiny_qwen2
    from matrix.smoke_grpo import config_kwargs, prompts

    with tempfile.TemporaryDirectory() as tmp:
        smoke_args = parse_args("bench", "", ["--steps", str(args.steps)])
        kwargs, _ = config_kwargs(GRPOConfig, tmp, smoke_args)
        model_dir = build_tiny_qwen2(Path(tmp) / "model", seed=0)
        trainer = GRPOTrainer(
            model=str(model_dir), reward_funcs=length_reward, args=GRPOConfig(**kwargs), train_dataset=prompts()
        )
        watchdog = build_callback(WatchdogSettings(), trainer)
        spent = {hook: 0.0 for hook in HOOKS}
        for hook in HOOKS:
            original = getattr(watchdog, hook)

            def timed(*a, _original=original, _hook=hook, **k):
                start = time.perf_counter()
                try:
                    return _original(*a, **k)
                finally:
                    spent[_hook] += time.perf_counter() - start

            setattr(watchdog, hook, timed)
        trainer.add_callback(watchdog)
        start = time.perf_counter()
        trainer.train()
        train_s = time.perf_counter() - start
    total = sum(spent.values())
    result = {
        "steps": trainer.state.global_step,
        "train_s": round(train_s, 3),
        "watchdog_s": round(total, 5),
        "watchdog_share_of_train_time": f"{total / train_s:.4%}",
        "per_hook_ms": {hook: round(seconds * 1000, 3) for hook, seconds in spent.items()},
        "finding": watchdog.finding.message() if watchdog.finding else None,
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
