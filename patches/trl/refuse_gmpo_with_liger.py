"""Refuse trl's experimental GMPOTrainer with use_liger_kernel, which trains the GRPO objective, before the model loads.

Symptom:   none: GMPOTrainer overrides only _compute_loss; with use_liger_kernel=True the compute_loss it
           inherits from GRPOTrainer sends every step to the fused Liger GRPO loss, so the run trains GRPO
           (same loss value as GRPOTrainer's) and the GMPO objective is never computed. No warning.
Upstream:  huggingface/trl#6808, #7270 (census row 32); trl 1.14.0 always calls _compute_loss.
Versions:  trl 1.7.0 (GMPOTrainer added) to 1.13.x. Reproduced on CPU: trl 1.9.2 + liger-kernel 0.8.0 (matrix cell
           trl-1.9-liger, reproducer gmpo-liger) and 0.8.2: the Liger-path loss equals GRPO's, not GMPO's.
Remove when: the oldest supported trl is >= 1.14.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch


@patch(
    id="trl.refuse-gmpo-with-liger",
    catalogue="gmpo-liger-trains-grpo",
    requires=("trl>=1.7,<1.14",),
    targets="trl.experimental.gmpo.gmpo_trainer:GMPOTrainer.__init__",
    expects=("self", "model", "args"),
)
def refuse_liger_gmpo(wrapped: Any, trainer: Any, *args: Any, **kwargs: Any) -> Any:
    from grpo_compat.core.wrapping import bound_arguments
    from grpo_compat.fixes.combinations import installed, refuse

    config = bound_arguments(wrapped, trainer, *args, **kwargs).get("args")
    if getattr(config, "use_liger_kernel", False) is True:
        refuse(
            "gmpo-liger-trains-grpo",
            f"GMPOTrainer with use_liger_kernel=True on {installed('trl')} trains the GRPO objective, not GMPO's: "
            "trl sends the loss to the fused Liger GRPO loss and never calls GMPO's _compute_loss.",
            ["use_liger_kernel=False", 'pip install "trl>=1.14"'],
        )
    return wrapped(trainer, *args, **kwargs)
