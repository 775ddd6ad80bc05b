"""Let trl 0.15-0.16's GRPOTrainer._get_train_sampler take the dataset transformers >= 4.52 passes.

Symptom:   TypeError: GRPOTrainer._get_train_sampler() takes 1 positional argument but 2 were given, in
           trainer.train() before the first step (transformers' Trainer._get_dataloader calls
           sampler_fn(dataset)). Also through ms-swift 3.3.x, whose GRPOTrainer inherits trl's method.
Upstream:  Tina #4, rl-swarm #304/#305, CPPO PR #7 (field reports); trl 0.18.0 added `dataset=None`.
Versions:  trl 0.15.0-0.16.1 (their override takes no dataset) with transformers >= 4.52.0 (4.51.3 calls it
           with none). trl 0.14 has no override and 0.17 builds its own dataloader: both train. pip allows
           every failing pair (trl 0.15-0.16 declare transformers>=4.46.0). Reproduced on CPU: trl 0.15.0-0.16.1
           x transformers 4.52.0-4.53.3 fail, 4.51.3 trains.
Remove when: trl 0.17 is the oldest supported version.

The dataset argument is dropped: trl's body samples from self.train_dataset, which is the dataset
transformers passes (GRPO keeps every column), so the sampler is the one 4.51.3 builds: grad_norm of
trl 0.16.1 on 4.52.4 patched is bit-identical to 4.51.3 plain (measured, 2 steps).
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch


def takes_no_dataset(module: Any) -> str | None:
    import inspect

    parameters = inspect.signature(module.GRPOTrainer._get_train_sampler).parameters
    return None if list(parameters) == ["self"] else "GRPOTrainer._get_train_sampler already takes a dataset"


@patch(
    id="trl.train-sampler-signature",
    catalogue="trl-sampler-transformers-4.52",
    requires=("trl>=0.15,<0.17", "transformers>=4.52"),
    targets="trl.trainer.grpo_trainer:GRPOTrainer._get_train_sampler",
    expects=("self",),
    detect=takes_no_dataset,
)
def sampler_ignoring_the_dataset(wrapped: Any, trainer: Any, *dataset: Any, **_: Any) -> Any:
    return wrapped(trainer)
