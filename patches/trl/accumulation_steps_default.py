"""Give GRPOTrainer a current_gradient_accumulation_steps before transformers' training loop sets one.

Symptom:   AttributeError: 'GRPOTrainer' object has no attribute 'current_gradient_accumulation_steps', in
           the loss: from trainer.evaluate() (or eval_on_start) before train() on trl 0.22.0-0.27.0 with any
           transformers, for loss_type grpo / bnpo / dr_grpo (every loss type from 0.26); and in train() itself
           on transformers < 4.55, which never sets the attribute (a pair trl's metadata refuses, reached by a
           later `pip install transformers==4.54.1`).
Upstream:  huggingface/trl#3983; trl 0.27.1 reads it only in training ("... if mode == 'train' else 1.0"),
           transformers 4.55.0 sets it in the training loop.
Versions:  trl 0.22.0-0.27.0 (the window of this patch); the training form also later trl with transformers
           < 4.55, which trl's metadata refuses and this patch leaves alone. Reproduced on CPU: trl 0.23.1 +
           transformers 4.56.2, evaluate() first with loss_type="grpo" (matrix reproducer evaluate-before-train);
           the training form on trl 0.22.0-0.24.0 + 4.54.1 (docs/investigations/version-skew-2026-11.md).
Remove when: trl 0.27.1 is the oldest supported version and transformers 4.55 the oldest it runs with.

The value is the one upstream uses where it works: gradient_accumulation_steps in training (what
transformers >= 4.55 assigns, but for a last partial accumulation window), 1 in evaluation (trl 0.27.1's
normalizer). It exists only during the call: once transformers' loop has set the attribute, the patch
stands aside, so a run that trains upstream is untouched.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch_each

ATTRIBUTE = "current_gradient_accumulation_steps"


def _with_default(value_of: Any) -> Any:
    def wrapper(wrapped: Any, trainer: Any, *args: Any, **kwargs: Any) -> Any:
        if ATTRIBUTE in vars(trainer):  # transformers' training loop set it: upstream's own value
            return wrapped(trainer, *args, **kwargs)
        setattr(trainer, ATTRIBUTE, value_of(trainer))
        try:
            return wrapped(trainer, *args, **kwargs)
        finally:
            delattr(trainer, ATTRIBUTE)

    return wrapper


patch_each(
    id="trl.accumulation-steps-default",
    catalogue="trl-current-gradient-accumulation-steps",
    requires=("trl>=0.22,<0.27.1",),
    wrappers={
        "trl.trainer.grpo_trainer:GRPOTrainer.training_step": _with_default(
            lambda trainer: trainer.args.gradient_accumulation_steps
        ),
        "trl.trainer.grpo_trainer:GRPOTrainer.prediction_step": _with_default(lambda trainer: 1),
    },
    expects=("self", "model", "inputs"),
)
