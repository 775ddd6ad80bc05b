"""Scale the dapo / cispo / vespo loss right when steps_per_generation differs from gradient_accumulation_steps.

Symptom:   none: training runs, but these loss types divide by the tokens of the whole generation batch
           (steps_per_generation micro-steps) while an optimizer step accumulates gradient_accumulation_steps
           of them, so the update is GA / steps_per_generation times too large or too small (grad_norm 0.5x
           with GA 2 and steps_per_generation 4, 4x with GA 4 and steps_per_generation 1).
Upstream:  huggingface/trl#5619, fixed by PR #6024 in trl 1.9.1 (census row 31).
Versions:  trl 0.22.0-1.9.0 (dapo from 0.22; cispo and vespo from the versions that added them). Reproduced on
           CPU with 0.22.0, 0.23.1, 0.29.1 and 1.9.0; 1.9.1 and 1.16.0 are right. The loss is multiplied by
           steps_per_generation / gradient_accumulation_steps in training, which is exactly trl 1.9.1's
           divisor (every term of the loss shares it); nothing changes when the two are equal (the
           default). trl's logged policy_loss keeps upstream's scale; the experimental gspo_token trainer,
           which overrides _compute_loss, is not covered.
Remove when: trl 1.9.0 is no longer supported.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch

TOKEN_NORMALISED = ("dapo", "cispo", "vespo")


@patch(
    id="trl.token-normalisation-scale",
    catalogue="token-normalisation-scale",
    requires="trl>=0.22,<1.9.1",
    targets="trl.trainer.grpo_trainer:GRPOTrainer._compute_loss",
    expects=("self", "model", "inputs"),
)
def scale_token_normalised_loss(wrapped: Any, trainer: Any, *args: Any, **kwargs: Any) -> Any:
    loss = wrapped(trainer, *args, **kwargs)
    config = trainer.args
    if not trainer.model.training or getattr(trainer, "loss_type", None) not in TOKEN_NORMALISED:
        return loss
    generation_steps = getattr(config, "steps_per_generation", None)
    accumulation = getattr(trainer, "current_gradient_accumulation_steps", None) or config.gradient_accumulation_steps
    if not generation_steps or generation_steps == accumulation:
        return loss  # upstream's divisor is right: the loss is left bit for bit as it is
    return loss * (generation_steps / accumulation)
