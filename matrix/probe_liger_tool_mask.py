"""Probe whether trl's Liger GRPO loss masks tool results as its own loss does (trl #4975); writes a JSON result.

    python -m matrix.probe_liger_tool_mask --mode plain --output plain.json

Builds a real GRPOTrainer (patched: under grpo_compat.apply()) with the tiny model fitted to call a tool, its
tool answering at length (grpo_compat.testing.multi_turn case tool-caller-long-result), and use_liger_kernel=True
(liger's model kernels off: Triton, GPU only; the fused GRPO loss runs on CPU). It generates and scores one batch
with a tool round, then computes the gradient of the loss trl trains on (compute_loss, Liger's) and of trl's own
loss (_compute_loss), which scores only tokens with tool_mask 1, on that batch. They must agree; trl 0.26-0.28 give
Liger the completion mask alone, scoring the tool's result as if the model wrote it: the probe's error.
Exits non-zero on error, after writing the JSON.
"""

from __future__ import annotations

import argparse
import sys

from grpo_compat.testing.smoke import LIGER_MODEL_KERNELS_OFF, ProbeFailed, parse_args, run_smoke, start_probe


def probe(args: argparse.Namespace, output_dir: str, result: dict) -> None:
    args.model_arch, args.multi_turn = "qwen2-tool-caller", "tool-caller-long-result"
    model_dir = start_probe(args, result)
    import torch
    from trl import GRPOConfig, GRPOTrainer

    from matrix.smoke_grpo import config_kwargs, multi_turn_arguments, prompts

    settings = {"beta": 0.0, "loss_type": "bnpo", "use_liger_kernel": True, "max_completion_length": 160}
    args.config_overrides = {**settings, "temperature": 0.3, "max_tool_calling_iterations": 1, **args.config_overrides}
    kwargs, _ = config_kwargs(GRPOConfig, output_dir, args)
    config = GRPOConfig(**kwargs, liger_kernel_config=LIGER_MODEL_KERNELS_OFF)
    dataset = prompts(args)
    tools = multi_turn_arguments(args, model_dir)
    trainer = GRPOTrainer(model=str(model_dir), args=config, train_dataset=dataset, **tools)
    trainer.current_gradient_accumulation_steps = 1  # set by transformers' training loop, which is not run
    torch.manual_seed(0)
    batch = trainer._generate_and_score_completions([dict(row) for row in dataset.select(range(4))])
    tool_tokens = int((batch["completion_mask"] * (1 - batch["tool_mask"])).sum())
    result["tool_result_tokens"] = tool_tokens
    if not tool_tokens:
        raise ProbeFailed("no tool result in the batch: the fitted model wrote no tool call that parses")
    # The loss values agree at the first step whatever the mask (the ratio is 1): the gradients tell the tokens apart.
    trained = _gradient(trainer, trainer.compute_loss, batch)
    masked = _gradient(trainer, trainer._compute_loss, batch)
    result.update(trained_grad_norm=trained.norm().item(), masked_grad_norm=masked.norm().item())
    if not torch.allclose(trained, masked, rtol=1e-3, atol=1e-6):
        raise ProbeFailed(
            f"the Liger GRPO loss's gradient (norm {trained.norm():.6f}) takes in the {tool_tokens} tool-result tokens "
            f"trl's own loss masks (norm {masked.norm():.6f}): tool_mask is not applied (trl #4975)"
        )
    result["summary"] = f"the Liger GRPO loss masks the {tool_tokens} tool-result tokens as trl's own does"


def _gradient(trainer, loss_function, batch):
    import torch

    trainer.model.zero_grad()
    loss_function(trainer.model, batch).backward()
    return torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None])


def main(argv: list[str] | None = None) -> int:
    return run_smoke(
        "probe_liger_tool_mask", parse_args(__doc__.splitlines()[0], "GRPOConfig field (JSON value)", argv), probe
    )


if __name__ == "__main__":
    sys.exit(main())
