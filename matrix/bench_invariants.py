"""What the weights-move invariants cost at a realistic size: a Qwen2 of Qwen2.5-0.5B's shape, plain and patched.

The model is built here from Qwen2.5-0.5B's dimensions (hidden 896, 24 layers, 14 heads / 2 key-value heads,
intermediate 4864, vocabulary 151936, tied embeddings: 494M parameters), randomly initialised from a seed; the tokenizer
is the tiny model's. Nothing is downloaded. In one process, with grpo_compat applied but the learning watchdog left to
this script, the same GRPO run (trl's AdamW, float32, beta 0) trains twice from the same weights:

- plain: no watchdog; each optimizer step is timed (a callback's on_step_begin to on_step_end);
- patched: the pre-flight of grpo_compat.fixes.weights_move, as the patch calls it when train() starts, and the
  learning watchdog's callback, every hook and the optimizer pre-step hook timed.

The invariants' cost over a 100-step run is projected from what was measured: the pre-flight and the hooks of the
first steps (the parameter sample, the comparison after the first steps) once, the steady per-step hooks (the
gradient norm the optimizer hook reads, the trainer's metrics) 100 times, over 100 plain steps. The weights both runs
end with are compared (the invariants only read). Usage:

    .venv/bin/python -m matrix.bench_invariants [--steps 3] [--layers 24] [--output .matrix/bench_invariants.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# Qwen2.5-0.5B's config.json (the dimensions only; the weights are random).
QWEN2_5_0_5B = dict(
    hidden_size=896,
    intermediate_size=4864,
    num_hidden_layers=24,
    num_attention_heads=14,
    num_key_value_heads=2,
    vocab_size=151936,
    max_position_embeddings=32768,
    rope_theta=1000000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
)
HOOKS = ("on_step_begin", "on_step_end", "on_log", "on_train_end", "_observe_update")
PROJECTED_STEPS = 100


class StepTimes:
    """A trainer callback: the wall time of each optimizer step (generation, loss, backward, optimizer)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self._start = 0.0

    def on_step_begin(self, *_, **__) -> None:
        self._start = time.perf_counter()

    def on_step_end(self, *_, **__) -> None:
        self.times.append(time.perf_counter() - self._start)

    def __getattr__(self, event: str):  # every other event of transformers' TrainerCallback: nothing to do
        if not event.startswith("on_"):
            raise AttributeError(event)
        return lambda *_, **__: None


def token_reward(completions: list, completion_ids: list, **kwargs) -> list[float]:
    """A reward that differs between completions of a random model: most of the 151936 ids it samples are not in the
    tiny tokenizer and decode to nothing, so a text reward scores them alike and nothing would be learnt."""
    return [float(sum(ids) % 97) / 97 for ids in completion_ids]


def qwen2_0_5b_shaped(layers: int, seed: int):
    import torch
    import transformers

    torch.manual_seed(seed)
    config = transformers.Qwen2Config(**{**QWEN2_5_0_5B, "num_hidden_layers": layers})
    return transformers.Qwen2ForCausalLM(config)


def one_run(label: str, layers: int, steps: int, model_dir: Path, output_dir: str, watched: bool) -> dict:
    import torch
    import transformers
    from trl import GRPOConfig, GRPOTrainer

    from grpo_compat.fixes.watchdog import WatchdogSettings
    from grpo_compat.fixes.watchdog_callback import build_callback
    from grpo_compat.fixes.weights_move import why_no_weight_can_move
    from grpo_compat.testing.smoke import digest, parse_args, snapshot
    from matrix.smoke_grpo import config_kwargs, prompts

    smoke_args = parse_args("bench", "", ["--steps", str(steps), "--set", "beta=0.0"])
    kwargs, _ = config_kwargs(GRPOConfig, output_dir, smoke_args)
    model = qwen2_0_5b_shaped(layers, seed=0)
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=token_reward,
        args=GRPOConfig(**kwargs),
        train_dataset=prompts(),
        processing_class=tokenizer,
    )
    initial = digest(snapshot(trainer.model))
    steps_timed = StepTimes()
    trainer.add_callback(steps_timed)
    spent: dict[str, list[float]] = {hook: [] for hook in HOOKS}
    preflight_s = 0.0
    if watched:
        start = time.perf_counter()
        refusal = why_no_weight_can_move(trainer)  # what the patch calls when train() starts
        preflight_s = time.perf_counter() - start
        assert refusal is None, refusal
        watchdog = build_callback(WatchdogSettings(), trainer)
        for hook in HOOKS:
            original = getattr(watchdog, hook)

            def timed(*a, _original=original, _hook=hook, **k):
                start = time.perf_counter()
                try:
                    return _original(*a, **k)
                finally:
                    spent[_hook].append(time.perf_counter() - start)

            setattr(watchdog, hook, timed)
        trainer.add_callback(watchdog)
    print(f"{label}: {sum(p.numel() for p in model.parameters()) / 1e6:.0f}M parameters, {steps} steps ...", flush=True)
    start = time.perf_counter()
    trainer.train()
    train_s = time.perf_counter() - start
    result = {
        "train_s": round(train_s, 2),
        "step_s": [round(t, 3) for t in steps_timed.times],
        "weights_sha256": digest(snapshot(trainer.model)),
        "weights_moved": None,
        "parameters_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 1),
        "torch_threads": torch.get_num_threads(),
    }
    result["weights_moved"] = result["weights_sha256"] != initial
    if watched:
        result["preflight_ms"] = round(preflight_s * 1000, 3)
        result["hook_ms"] = {hook: [round(t * 1000, 3) for t in times] for hook, times in spent.items()}
        result["finding"] = watchdog.finding.message() if watchdog.finding else None
    del trainer, model
    return result


def project(plain: dict, patched: dict, steps: int) -> dict:
    """The invariants' share of a 100-step run: first-steps costs once, steady per-step costs 100 times.

    Once: the pre-flight; the hooks of the steps up to the check (WatchdogSettings().check_after_steps): the sample
    read at the first step, the gradients' norm the optimizer hook takes until the check, the comparison. Steady:
    the median, over the steps after the check, of what every step's hooks take, and the median of on_log.
    """
    hooks = patched["hook_ms"]
    check = WATCHDOG_CHECK_AFTER
    once_ms = patched["preflight_ms"] + sum(hooks["on_step_begin"][:check]) + sum(hooks["on_step_end"][:check])
    once_ms += sum(hooks["_observe_update"][:check]) + sum(hooks["on_train_end"])
    steady = [
        hooks["on_step_begin"][i] + hooks["on_step_end"][i] + hooks["_observe_update"][i] for i in range(check, steps)
    ]
    on_log = statistics.median(hooks["on_log"]) if hooks["on_log"] else 0.0
    per_step_ms = statistics.median(steady) + on_log
    step_s = statistics.median(plain["step_s"])
    total_ms = once_ms + PROJECTED_STEPS * per_step_ms
    return {
        "plain_median_step_s": round(step_s, 3),
        "patched_median_step_s": round(statistics.median(patched["step_s"]), 3),
        "first_steps_once_ms": round(once_ms, 2),
        "steady_per_step_ms": round(per_step_ms, 3),
        "invariants_ms_over_100_steps": round(total_ms, 1),
        "share_of_a_100_step_run": f"{total_ms / 1000 / (PROJECTED_STEPS * step_s):.4%}",
        "share_of_one_step": f"{total_ms / 1000 / step_s:.2%}",
        "same_weights": plain["weights_sha256"] == patched["weights_sha256"],
        "weights_moved": plain["weights_moved"] and patched["weights_moved"],
    }


WATCHDOG_CHECK_AFTER = 2  # WatchdogSettings().check_after_steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3, help="optimizer steps of each run (3: one after the check)")
    parser.add_argument("--layers", type=int, default=24, help="decoder layers (Qwen2.5-0.5B: 24)")
    parser.add_argument("--output", type=Path, default=REPO / ".matrix" / "bench_invariants.json")
    parser.add_argument("--reproject", type=Path, help="recompute the projection of a result this script wrote")
    args = parser.parse_args(argv)
    if args.reproject:
        saved = json.loads(args.reproject.read_text())
        saved["projection"] = project(saved["plain"], saved["patched"], saved["steps"])
        args.reproject.write_text(json.dumps(saved, indent=2))
        print(json.dumps(saved["projection"], indent=2))
        return 0
    if args.steps <= WATCHDOG_CHECK_AFTER:
        parser.error(f"--steps must be above {WATCHDOG_CHECK_AFTER}: a steady step after the watchdog's check")
    import grpo_compat

    grpo_compat.apply(skip=["trl.learning-watchdog"])  # the pre-flight and the callback are timed by hand below
    import trl

    from grpo_compat.testing.tiny_model import build_tiny_qwen2

    with tempfile.TemporaryDirectory() as tmp:
        tokenizer_dir = build_tiny_qwen2(Path(tmp) / "tiny", seed=0)
        plain = one_run("plain", args.layers, args.steps, tokenizer_dir, str(Path(tmp) / "plain"), watched=False)
        patched = one_run("patched", args.layers, args.steps, tokenizer_dir, str(Path(tmp) / "patched"), watched=True)
    result = {
        "trl": trl.__version__,
        "layers": args.layers,
        "steps": args.steps,
        "plain": plain,
        "patched": patched,
        "projection": project(plain, patched, args.steps),
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
