"""A few GRPO steps with TRL's GRPOTrainer on the tiny offline Qwen2; writes a JSON result.

    python matrix/smoke_grpo.py --mode plain --steps 3 --output plain.json
    python matrix/smoke_grpo.py --mode patched --set num_generations=2 --output patched.json
    accelerate launch --num_processes 2 matrix/smoke_grpo.py --mode patched --output out.json

The same file runs on trl 0.16 + transformers 4.51 and trl 1.16 + transformers 5.x:
every GRPOConfig difference between versions is handled in `config_kwargs`.
Exits non-zero when the run fails, after writing the JSON (rank 0 only).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from grpo_compat.versions import installed_versions  # metadata only: applies nothing, imports no torch

RESULT_FIELDS = (
    "steps final_loss kl reward_std all_trainable_params_changed unchanged_params weights_sha256 "
    "config_fields_dropped train_time_s"
).split()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=("plain", "patched"), default="plain")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model-dir", help="tiny model directory, built if missing")
    p.add_argument("--output", help="path of the JSON result")
    p.add_argument("--output-dir", help="trainer output_dir (default: a temp dir)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="cuda runs in bf16")
    p.add_argument("--print-report", action="store_true", help="print grpo_compat's report (patched mode)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="GRPOConfig field (JSON value)")
    args = p.parse_args(argv)
    args.config_overrides = {}
    for item in args.set:
        key, sep, raw = item.partition("=")
        if not sep:
            p.error(f"--set expects KEY=VALUE, got {item!r}")
        try:
            args.config_overrides[key] = json.loads(raw)
        except ValueError:
            args.config_overrides[key] = raw
    return args


def is_rank_zero() -> bool:
    # RANK is set by accelerate launch / torchrun; reading it avoids touching torch.distributed.
    return int(os.environ.get("RANK", "0")) == 0


def config_kwargs(config_cls: type, output_dir: str, args: argparse.Namespace) -> tuple[dict, list[str]]:
    """GRPOConfig kwargs for the installed trl: requested fields it lacks are dropped and named."""
    wanted: dict[str, Any] = dict(
        output_dir=output_dir,
        max_steps=args.steps,
        seed=args.seed,
        per_device_train_batch_size=4,
        num_generations=4,
        gradient_accumulation_steps=1,
        max_prompt_length=64,  # gone from trl 0.28
        max_completion_length=8,
        temperature=1.0,  # default differs by version (0.9 on 0.16)
        learning_rate=1e-5,
        beta=0.04,  # default 0.0 from trl 0.19, and then no KL is logged
        # bf16 defaults to True from trl 0.19, unusable on CPU; on a GPU the matrix runs bf16.
        bf16=args.device == "cuda",
        fp16=False,
        use_cpu=args.device == "cpu",
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
    )
    wanted.update(args.config_overrides)
    known = {f.name for f in dataclasses.fields(config_cls)}
    return {k: v for k, v in wanted.items() if k in known}, sorted(set(wanted) - known)


def prompts():
    from datasets import Dataset

    rows = [f"Question {i}: what is {i * 7 % 13} plus {i * 5 % 11}? Answer:" for i in range(16)]
    return Dataset.from_dict({"prompt": rows})


def length_reward(completions: list, **kwargs: Any) -> list[float]:
    # Deterministic, and different for different completions, so the group std is
    # non-zero and the policy gradient (not only the KL term) moves the weights.
    return [len(str(c)) / 10.0 + len(set(str(c))) / 20.0 for c in completions]


def snapshot(model) -> dict:
    """CPU copy of the full state dict, gathering DeepSpeed ZeRO-3 shards when present."""
    gather: contextlib.AbstractContextManager = contextlib.nullcontext()
    params = list(model.parameters())
    if any(hasattr(p, "ds_id") for p in params):
        import deepspeed  # collective: every rank calls snapshot()

        gather = deepspeed.zero.GatheredParameters(params)
    with gather:
        return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


def digest(state: dict) -> str:
    import torch

    h = hashlib.sha256()
    for name in sorted(state):
        h.update(name.encode())
        h.update(state[name].contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def last_logged(logs: list[dict], key: str) -> Any:
    return next((entry[key] for entry in reversed(logs) if key in entry), None)


def train(args: argparse.Namespace, output_dir: str, result: dict) -> None:
    if args.mode == "patched":
        import grpo_compat  # before trl, so patches hook its import

        grpo_compat.apply()
    import transformers

    from grpo_compat.testing.tiny_model import build_tiny_qwen2

    # Stable default path: reused across runs and shared by all ranks of one launch.
    default_dir = Path(tempfile.gettempdir()) / f"grpo_compat_tiny_qwen2_tf{transformers.__version__}"
    model_dir = build_tiny_qwen2(args.model_dir or default_dir, seed=0)

    import torch
    from trl import GRPOConfig, GRPOTrainer

    kwargs, result["config_fields_dropped"] = config_kwargs(GRPOConfig, output_dir, args)
    # A path, not a model object: with beta > 0, trl 0.19+ reloads the reference
    # model from config._name_or_path.
    trainer = GRPOTrainer(
        model=str(model_dir), reward_funcs=length_reward, args=GRPOConfig(**kwargs), train_dataset=prompts()
    )
    trainable = [n for n, p in trainer.model.named_parameters() if p.requires_grad]
    before = snapshot(trainer.model)
    started = time.perf_counter()
    trainer.train()
    result["train_time_s"] = round(time.perf_counter() - started, 3)
    after = snapshot(trainer.model)
    logs = trainer.state.log_history
    unchanged = [n for n in trainable if torch.equal(before[n], after[n])]
    result.update(
        steps=trainer.state.global_step,
        final_loss=last_logged(logs, "loss"),
        kl=last_logged(logs, "kl"),
        reward_std=last_logged(logs, "reward_std"),
        all_trainable_params_changed=bool(trainable) and not unchanged,
        unchanged_params=unchanged,
        weights_sha256=digest(after),
    )


def describe(error: BaseException) -> str:
    frames = "".join(traceback.format_tb(error.__traceback__)).splitlines()[-12:]
    return f"{type(error).__name__}: {str(error)[:1000]}\n" + "\n".join(frames)


def summary(result: dict) -> str:
    v = result["versions"]
    line = (
        f"[smoke_grpo] {result['mode']} {result['status']}: steps={result['steps']} loss={result['final_loss']} "
        f"kl={result['kl']} changed={result['all_trainable_params_changed']} "
        f"sha={str(result['weights_sha256'])[:12]} {result['wall_time_s']}s "
        f"(trl {v['trl']}, transformers {v['transformers']})"
    )
    return line + (f" error={result['error'].splitlines()[0]}" if result["error"] else "")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start = time.perf_counter()
    versions = installed_versions()
    result: dict[str, Any] = {"status": "error", "error": None, "mode": args.mode, "versions": versions}
    result.update(dict.fromkeys(RESULT_FIELDS))
    try:
        with tempfile.TemporaryDirectory(prefix="grpo_smoke_") as tmp:
            train(args, args.output_dir or tmp, result)
        result["status"] = "ok"
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - any failure is a result to record
        result["error"] = describe(exc)
    if args.mode == "patched":
        try:
            import grpo_compat

            report = grpo_compat.report()
            result["grpo_compat"] = report.to_dict()
            if args.print_report and is_rank_zero():
                print(report, flush=True)
        except Exception as exc:  # noqa: BLE001 - a broken report must not hide the run's result
            result["grpo_compat"] = {"report_error": describe(exc)}
    result["wall_time_s"] = round(time.perf_counter() - start, 2)
    if is_rank_zero():
        if args.output:
            Path(args.output).parent.mkdir(parents=True, exist_ok=True)
            Path(args.output).write_text(json.dumps(result, indent=2, default=str) + "\n")
        print(summary(result), flush=True)
    return 0 if result["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
