"""Scale the GRPO loss by gradient accumulation once, not twice, under DeepSpeed on transformers 4.48.

Symptom:   with DeepSpeed and gradient_accumulation_steps = N > 1, the logged grad_norm is N times
           smaller than the same run without DeepSpeed (measured: ZeRO-2 vs DDP, GA 4: exactly 1/4),
           and gradient clipping acts on a gradient N times too small. Adam's update is nearly
           invariant to a constant gradient scale, so this rarely freezes a run on its own; with a
           large N and small gradients Adam's eps dominates and the updates shrink (KF-5).
Upstream:  KF-5; fixed by huggingface/transformers#35808 ("Fix GA loss for
           Deepspeed", transformers 4.49.0: scale_wrt_gas=False).
Versions:  transformers 4.48.0-4.48.3 with DeepSpeed, for TRL's GRPOTrainer (trl 0.14-0.17 declare
           transformers >= 4.46) and ms-swift 3.x (its training_step reaches this one through super()).
           KF-5 and the issue say "transformers < 4.49"; 4.46.x-4.47.x do not divide in
           Trainer.training_step, so DeepSpeed scales once there (measured correct, grad_norm ratio 1.000).
Remove when: transformers 4.48 is below the oldest supported version.

Trainer.training_step of 4.48 divides the loss by GA when `model_accepts_loss_kwargs` is False
(TRL's GRPOTrainer sets it so) and then DeepSpeed's engine.backward divides by its GA again. As
4.49 does, pass scale_wrt_gas=False to the engine's backward, under exactly the condition in which
the Trainer divided; the returned (logged) loss is the Trainer's, unchanged. No matrix cell pairs
ms-swift with transformers 4.48, so the swift path is argued from its code, not run.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch

_MISSING = object()


def divides_twice(trainer: Any) -> bool:
    """True when this training_step will divide by GA and DeepSpeed's backward would divide again."""
    accelerator = getattr(trainer, "accelerator", None)
    distributed_type = getattr(accelerator, "distributed_type", None)
    if getattr(distributed_type, "value", distributed_type) != "DEEPSPEED":
        return False
    args = trainer.args
    if args.gradient_accumulation_steps <= 1 or trainer.model_accepts_loss_kwargs:
        return False
    # 4.48 does not divide with a compute_loss_func. engine.backward takes scale_wrt_gas in every DeepSpeed
    # checked (0.16.4-0.19.8) and 4.49 passes it unconditionally; its signature hides behind an nvtx decorator.
    return getattr(trainer, "compute_loss_func", None) is None


@patch(
    id="trl.deepspeed-gas-double-scaling",
    catalogue="deepspeed-loss-divided-twice",
    requires=("trl>=0.14", "transformers>=4.48.0,<4.49", "deepspeed"),  # the double division is DeepSpeed's
    targets="trl.trainer.grpo_trainer:GRPOTrainer.training_step",  # Trainer's, inherited: wrapped on the class
    expects=("self", "model", "inputs"),
)
def scale_once(wrapped: Any, trainer: Any, *args: Any, **kwargs: Any) -> Any:
    if not divides_twice(trainer):
        return wrapped(trainer, *args, **kwargs)
    accelerator = trainer.accelerator
    shadowed = vars(accelerator).get("backward", _MISSING)
    backward = accelerator.backward

    def backward_scaled_once(loss: Any, **backward_kwargs: Any) -> Any:
        backward_kwargs.setdefault("scale_wrt_gas", False)  # accelerate forwards it to engine.backward
        return backward(loss, **backward_kwargs)

    # On the instance, for this one call: the accelerator's class and other users stay untouched.
    accelerator.backward = backward_scaled_once
    try:
        return wrapped(trainer, *args, **kwargs)
    finally:
        if shadowed is _MISSING:
            del accelerator.backward
        else:
            accelerator.backward = shadowed
