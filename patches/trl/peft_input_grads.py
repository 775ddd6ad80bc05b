"""Give a PEFT model's inputs gradients when GRPO trains it with reentrant gradient checkpointing.

Symptom:   GRPOTrainer with a LoRA `peft_config` and `gradient_checkpointing=True` fails at the first
           backward with "RuntimeError: element 0 of tensors does not require grad and does not have a
           grad_fn" (after torch's "None of the inputs have requires_grad=True"). With a trainable
           tensor outside the checkpointed blocks (e.g. modules_to_save=["lm_head"]) there is no error:
           the LoRA weights inside the blocks silently get no gradient.
Upstream:  huggingface/trl#3089; fixed by trl#2848 (GRPOTrainer._enable_gradient_checkpointing, trl 0.16.0).
Versions:  trl 0.14-0.15 with peft. Reentrant checkpointing (transformers 4.x's default) needs an input
           that requires grad; the base model's embeddings are frozen, and PEFT only hooks them when
           checkpointing was already on when the adapter was added, which TRL 0.14/0.15 turn on later,
           in Trainer.train.
Remove when: trl 0.16 is the oldest supported version.

After GRPOTrainer.__init__, the model's input embeddings get transformers' own
`enable_input_require_grads` hook, as trl 0.16 does; not when the user asked for non-reentrant
checkpointing (no input grads needed), nor when the hook is already there. ms-swift enables it itself.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch
from grpo_compat.fixes.detectors import trl_grpo_trainer_init_present


def needs_input_grads(model: Any, args: Any) -> bool:
    """A PEFT model trained with reentrant checkpointing whose input embeddings are not hooked yet."""
    if not getattr(args, "gradient_checkpointing", False):
        return False
    if (getattr(args, "gradient_checkpointing_kwargs", None) or {}).get("use_reentrant", True) is False:
        return False
    from accelerate.utils import is_peft_model  # trl's own test; imported by trl already

    return is_peft_model(model) and getattr(model, "_require_grads_hook", None) is None


@patch(
    id="trl.peft-input-grads",
    catalogue="peft-checkpointing-no-grad",
    requires=("trl>=0.14,<0.16", "peft"),
    targets="trl.trainer.grpo_trainer:GRPOTrainer.__init__",
    expects=("self", "model", "args"),
    detect=trl_grpo_trainer_init_present,
)
def hook_input_embeddings(wrapped: Any, trainer: Any, *args: Any, **kwargs: Any) -> Any:
    result = wrapped(trainer, *args, **kwargs)
    model = getattr(trainer, "model", None)
    if needs_input_grads(model, getattr(trainer, "args", None)):
        model.enable_input_require_grads()  # PeftModel forwards it to the transformers model
    return result
