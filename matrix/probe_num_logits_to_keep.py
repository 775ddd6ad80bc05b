"""Probe the model call trl 0.14 makes for log-probs, on the installed transformers; writes a JSON result.

    python -m matrix.probe_num_logits_to_keep --mode plain --output plain.json

Builds a real GRPOTrainer (patched: under grpo_compat.apply()) and calls its policy the way trl 0.14's
compute_loss does, ``model(input_ids, num_logits_to_keep=K + 1)``: trl then gathers the K completion
tokens' log-probs from the first K rows, so the model must return K + 1 positions. transformers >= 4.52
dropped the alias (huggingface/transformers#37149) and returns every position: the probe's error.
Exits non-zero on error, after writing the JSON.
"""

from __future__ import annotations

import argparse
import sys

from grpo_compat.testing.smoke import ProbeFailed, length_reward, parse_args, run_smoke, start_probe

BATCH, LENGTH, COMPLETION = 2, 12, 5


def probe(args: argparse.Namespace, output_dir: str, result: dict) -> None:
    model_dir = start_probe(args, result)
    import torch
    from trl import GRPOConfig, GRPOTrainer

    from matrix.smoke_grpo import config_kwargs, prompts

    kwargs, _ = config_kwargs(GRPOConfig, output_dir, args)
    trainer = GRPOTrainer(
        model=str(model_dir), reward_funcs=length_reward, args=GRPOConfig(**kwargs), train_dataset=prompts()
    )
    model = trainer.model.eval()
    ids = torch.randint(0, model.config.vocab_size, (BATCH, LENGTH), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits = model(ids.to(model.device), num_logits_to_keep=COMPLETION + 1).logits
    result["logits_shape"] = list(logits.shape)
    if logits.shape[1] != COMPLETION + 1:
        raise ProbeFailed(
            f"trl 0.14 asked the model for {COMPLETION + 1} positions (num_logits_to_keep) and it returned "
            f"{logits.shape[1]}: the {COMPLETION} completion log-probs are taken at prompt positions"
        )
    result["summary"] = f"num_logits_to_keep={COMPLETION + 1} gives logits {tuple(logits.shape)}: honoured"


def main(argv: list[str] | None = None) -> int:
    description = __doc__.splitlines()[0]
    return run_smoke("probe_num_logits_to_keep", parse_args(description, "GRPOConfig field (JSON value)", argv), probe)


if __name__ == "__main__":
    sys.exit(main())
