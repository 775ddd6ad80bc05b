"""Refuse trl's AsyncGRPOTrainer with environment-owned data on trl 1.9-1.10, before the model loads.

Symptom:   AttributeError: 'AsyncGRPOTrainer' object has no attribute 'args', in __init__ after the model
           loaded, for every run with an environment_factory and no train_dataset (the placeholder dataset
           is sized from self.args, which Trainer.__init__ sets a few lines later).
Upstream:  huggingface/trl#6824 (the bug came with the feature, #6349); trl 1.11.0 reads the local args.
Versions:  trl 1.9.0 to 1.10.0 (read in the 1.8.0-1.16.0 wheels). Reproduced on CPU: trl 1.9.2 (matrix cell
           trl-1.9, reproducer async-grpo-environment-owned, model loaded with sdpa) and 1.10.0 by hand.
Remove when: the oldest supported trl is >= 1.11.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch


@patch(
    id="trl.refuse-async-grpo-environment-owned",
    catalogue="trl-async-grpo-environment-owned-args",
    requires=("trl>=1.9,<1.11",),
    targets="trl.experimental.async_grpo.async_grpo_trainer:AsyncGRPOTrainer.__init__",
    expects=("self", "model", "args", "train_dataset", "environment_factory"),
)
def refuse_async_grpo_environment_owned(wrapped: Any, trainer: Any, *args: Any, **kwargs: Any) -> Any:
    from grpo_compat.core.wrapping import bound_arguments
    from grpo_compat.fixes.combinations import installed, refuse

    arguments = bound_arguments(wrapped, trainer, *args, **kwargs)
    factory = arguments.get("environment_factory")
    # A dict of factories, or no factory, is refused by trl itself before that line; a subclass that sets
    # self.args before calling __init__ gets past it.
    if (
        arguments.get("train_dataset") is None
        and factory is not None
        and not isinstance(factory, dict)
        and not hasattr(trainer, "args")
    ):
        refuse(
            "trl-async-grpo-environment-owned-args",
            f"AsyncGRPOTrainer with an environment_factory and no train_dataset fails on {installed('trl')} "
            "with \"'AsyncGRPOTrainer' object has no attribute 'args'\" after the model loaded (trl #6824).",
            [
                'pip install "trl>=1.11"',
                'pass train_dataset=Dataset.from_dict({"prompt": [[{"role": "user", "content": ""}]] * '
                "(per_device_train_batch_size * gradient_accumulation_steps)}) with max_steps > 0",
            ],
        )
    return wrapped(trainer, *args, **kwargs)
