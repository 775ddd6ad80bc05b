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
import sys
import time
from collections.abc import Iterator
from typing import Any
from unittest import mock

from grpo_compat.testing.smoke import (
    ignore_logits_to_keep,
    last_logged,
    length_reward,
    parse_args,
    prompt_texts,
    run_smoke,
    snapshot,
    tiny_model,
    weight_change,
)


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
        use_cpu=args.device == "cpu" and not args.fake_gpus,  # use_cpu would hide the faked GPUs
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

    return Dataset.from_dict({"prompt": prompt_texts()})


@contextlib.contextmanager
def visible_gpus(count: int) -> Iterator[None]:
    """On a CPU machine, let TrainingArguments count ``count`` GPUs (transformers' own seam), for KF-4."""
    if not count:
        yield
        return
    import torch

    with mock.patch.object(torch.cuda, "device_count", return_value=count):
        yield


def train(args: argparse.Namespace, output_dir: str, result: dict) -> None:
    import grpo_compat

    if args.mode == "patched" and not args.apply_late:
        grpo_compat.apply()  # before trl, so patches hook its import
    import transformers

    model_dir = tiny_model(args)

    from trl import GRPOConfig, GRPOTrainer

    kwargs, result["config_fields_dropped"] = config_kwargs(GRPOConfig, output_dir, args)
    with visible_gpus(args.fake_gpus):
        config = GRPOConfig(**kwargs)
    result["n_gpu"] = config.n_gpu
    if args.mode == "patched" and args.apply_late:
        grpo_compat.apply()  # as a script that calls apply() between building the config and the trainer
    # A path, not a model object: with beta > 0, trl 0.19+ reloads the reference model from config._name_or_path.
    model: Any = str(model_dir)
    if args.model_ignores_logits_to_keep:  # the policy only; the reference model reloaded by trl honours it
        model = ignore_logits_to_keep(transformers.AutoModelForCausalLM.from_pretrained(model_dir))
    trainer = GRPOTrainer(model=model, reward_funcs=length_reward, args=config, train_dataset=prompts())
    trainable = [n for n, p in trainer.model.named_parameters() if p.requires_grad]
    before = snapshot(trainer.model)
    started = time.perf_counter()
    trainer.train()
    result["train_time_s"] = round(time.perf_counter() - started, 3)
    after = snapshot(trainer.model)
    logs = trainer.state.log_history
    result.update(
        steps=trainer.state.global_step,
        final_loss=last_logged(logs, "loss"),
        kl=last_logged(logs, "kl"),
        reward_std=last_logged(logs, "reward_std"),
        **weight_change(trainable, before, after, model_dir),
    )


def main(argv: list[str] | None = None) -> int:
    return run_smoke("smoke_grpo", parse_args(__doc__.splitlines()[0], "GRPOConfig field (JSON value)", argv), train)


if __name__ == "__main__":
    sys.exit(main())
