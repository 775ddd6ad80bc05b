"""A user's GRPO training script that never imports grpo_compat (unless --apply): `grpo-compat run` tests.

    python train_grpo.py --model DIR --output result.json [--num-generations N] [--apply] [--short-reward]
        [--learning-rate LR]

Writes, from the main process: the sha256 of the trained weights and whether grpo_compat was applied; from
every process, OUTPUT.rankN: whether it was applied in that process.
"""

import argparse
import hashlib
import json
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--model", required=True)
parser.add_argument("--output", required=True)
parser.add_argument("--num-generations", type=int, default=2)
parser.add_argument("--deepspeed")
parser.add_argument("--apply", action="store_true", help="grpo_compat.apply() in the script, the documented way")
parser.add_argument("--learning-rate", type=float, default=1e-4)
parser.add_argument("--short-reward", action="store_true", help="a reward function returning one reward per batch")
args = parser.parse_args()
if args.apply:
    import grpo_compat

    grpo_compat.apply()

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402


def length_reward(completions, **kwargs):
    return [float(len(completion)) for completion in completions]


def short_reward(completions, **kwargs):
    return [1.0]  # one reward for the whole batch: every completion needs its own


config = GRPOConfig(
    output_dir=args.output + ".out",
    max_steps=2,
    seed=0,
    per_device_train_batch_size=2,
    num_generations=args.num_generations,
    max_completion_length=8,
    learning_rate=args.learning_rate,
    beta=0.04,
    bf16=False,
    use_cpu=True,
    logging_steps=1,
    save_strategy="no",
    report_to="none",
    disable_tqdm=True,
    deepspeed=args.deepspeed,
)
prompts = Dataset.from_dict({"prompt": [f"count {n} {n + 1}" for n in range(8)]})
reward = short_reward if args.short_reward else length_reward
trainer = GRPOTrainer(model=args.model, reward_funcs=reward, args=config, train_dataset=prompts)
trainer.train()
grpo_compat = sys.modules.get("grpo_compat")
applied = bool(grpo_compat and grpo_compat.report().active)
with open(f"{args.output}.rank{trainer.accelerator.process_index}", "w") as handle:
    json.dump({"applied": applied}, handle)
if trainer.accelerator.is_main_process:
    state = trainer.accelerator.unwrap_model(trainer.model).state_dict()
    digest = hashlib.sha256()
    for name in sorted(state):
        digest.update(name.encode())
        digest.update(state[name].detach().to(torch.float32).cpu().numpy().tobytes())
    with open(args.output, "w") as handle:
        json.dump({"sha256": digest.hexdigest(), "applied": applied}, handle)
if torch.distributed.is_initialized():  # as PyTorch asks: gloo's teardown at exit can abort (pytorch#190489)
    torch.distributed.barrier()  # no rank leaves while another still talks to it
    torch.distributed.destroy_process_group()
