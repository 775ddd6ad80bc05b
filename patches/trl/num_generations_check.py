"""Reject num_generations < 2 when GRPOConfig is created, with the reason and a working setting.

Symptom:   num_generations=1 on one GPU fails with "The global train batch size (1 x 4) must be
           evenly divisible by the number of generations per prompt (1)" (trl 0.15-0.16), raised
           only in GRPOTrainer.__init__, after the model has loaded; newer versions say "requires
           at least 2 generations" but name no setting that works.
Upstream:  modelscope/ms-swift and huggingface/trl reports collected in KNOWN_FAILURES.md KF-2.
Affects:   trl >= 0.14 (every version with GRPO): no version explains the zero advantage or
           proposes a corrected setting; before 0.18 the check runs after model loading.
Remove when: upstream's GRPOConfig rejects num_generations < 2 itself, naming a valid setting.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.errors import GRPOSettingsError
from grpo_compat.registry import patch
from grpo_compat.validation import single_generation_problem


def _has_num_generations_field(module: Any) -> str | None:
    fields = getattr(module.GRPOConfig, "__dataclass_fields__", {})
    return None if "num_generations" in fields else "GRPOConfig has no num_generations field"


@patch(
    id="trl.num-generations-check",
    requires="trl>=0.14",
    targets="trl.trainer.grpo_config:GRPOConfig.__post_init__",
    expects=("self",),
    detect=_has_num_generations_field,
)
def reject_single_generation(wrapped: Any, config: Any, *args: Any, **kwargs: Any) -> Any:
    # Checked before upstream's own __post_init__ so ours is the message the user sees.
    problem = single_generation_problem(config.num_generations, config.per_device_train_batch_size)
    if problem:
        raise GRPOSettingsError(problem)
    return wrapped(config, *args, **kwargs)
