"""Probe the scale of trl's token-normalised loss (dapo) when steps_per_generation != gradient_accumulation_steps.

    python -m matrix.probe_token_normalisation --mode plain --output plain.json

Trains the two optimizer steps of one generation batch (learning rate 0: the weights stay put) with
gradient_accumulation_steps 2 and steps_per_generation 4, records each micro-step's inputs, and compares the
gradient of the first step with the dapo objective computed by hand on the same batches and weights
(on-policy, beta 0), divided as trl 1.9.1 divides it: by the generation batch's completion tokens per
optimizer step. trl 0.22.0-1.9.0 divide by all of the generation batch's tokens (trl #5619): the gradient is
about half, the probe's error.
Exits non-zero on error, after writing the JSON.
"""

from __future__ import annotations

import argparse
import sys

from grpo_compat.testing.smoke import ProbeFailed, length_reward, parse_args, run_smoke, start_probe

ACCUMULATION, GENERATION_STEPS = 2, 4
SETTINGS = dict(
    per_device_train_batch_size=2,
    num_generations=2,
    gradient_accumulation_steps=ACCUMULATION,
    steps_per_generation=GENERATION_STEPS,
    loss_type="dapo",
    beta=0.0,
    learning_rate=0.0,
    max_grad_norm=1e9,
    max_steps=GENERATION_STEPS // ACCUMULATION,  # every micro-step of one generation batch
)
TOLERANCE = 1e-3


def probe(args: argparse.Namespace, output_dir: str, result: dict) -> None:
    model_dir = start_probe(args, result)
    import torch
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from matrix.smoke_grpo import config_kwargs, prompts

    batches: list[dict] = []
    gradients: list = []

    class Recording(GRPOTrainer):
        def compute_loss(self, model, inputs, *rest, **kwargs):  # the micro-step's inputs, as trl built them
            batches.append({k: v.detach().clone() for k, v in inputs.items() if torch.is_tensor(v)})
            return super().compute_loss(model, inputs, *rest, **kwargs)

    class Gradient(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
            gradients.append(torch.cat([p.grad.flatten().clone() for p in model.parameters() if p.grad is not None]))

    kwargs, _ = config_kwargs(GRPOConfig, output_dir, args)
    trainer = Recording(
        model=str(model_dir),
        reward_funcs=length_reward,
        args=GRPOConfig(**{**kwargs, **SETTINGS}),
        train_dataset=prompts(),
        callbacks=[Gradient()],
    )
    trainer.train()
    model = trainer.model
    model.zero_grad(set_to_none=True)
    window = batches[:ACCUMULATION]
    # trl 1.9.1's divisor: the generation batch's tokens per optimizer step (an average over its steps)
    tokens = sum(batch["completion_mask"].sum() for batch in batches[:GENERATION_STEPS]) * ACCUMULATION
    tokens = tokens / GENERATION_STEPS
    for batch in window:  # the dapo objective by hand: -advantage x log-prob, averaged over the step's tokens
        ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1)
        mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], 1)
        width = batch["completion_ids"].size(1)
        logits = model(input_ids=ids, attention_mask=mask).logits[:, -width - 1 : -1].float() / trainer.temperature
        logps = logits.log_softmax(-1).gather(-1, batch["completion_ids"].unsqueeze(-1)).squeeze(-1)
        per_token = -torch.exp(logps - logps.detach()) * batch["advantages"].unsqueeze(1)
        ((per_token * batch["completion_mask"]).sum() / tokens).backward()
    by_hand = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]).norm().item()
    trained = gradients[0].norm().item()
    result["gradient_norm_ratio"] = ratio = trained / by_hand
    if abs(ratio - 1) > TOLERANCE:
        raise ProbeFailed(
            f"dapo with gradient_accumulation_steps {ACCUMULATION} and steps_per_generation {GENERATION_STEPS}: the "
            f"trainer's gradient is {ratio:.3f}x the token-mean objective's ({trained:.4g} against {by_hand:.4g}): "
            "divided by the tokens of the whole generation batch"
        )
    result["summary"] = (
        f"dapo gradient {ratio:.4f}x the token-mean objective's (GA {ACCUMULATION}, S {GENERATION_STEPS})"
    )


def main(argv: list[str] | None = None) -> int:
    description = __doc__.splitlines()[0]
    return run_smoke("probe_token_normalisation", parse_args(description, "GRPOConfig field (JSON value)", argv), probe)


if __name__ == "__main__":
    sys.exit(main())
