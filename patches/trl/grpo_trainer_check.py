"""Check GRPO settings again when GRPOTrainer is built, with the real number of processes.

Symptom:   on trl <= 0.17 the batch rules run only after the policy and reference models have
           loaded (minutes on a large model) and give KF-2's misleading message; a config built
           before grpo_compat.apply(), or in another process, was never checked at all.
Upstream:  KF-2 (trl moved the checks to GRPOConfig in 0.18).
Versions:  trl >= 0.14 (the GRPOConfig created before apply() case is version independent).
Remove when: every supported trl validates in GRPOConfig and trl.grpo-config-check is gone.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch
from grpo_compat.fixes.detectors import trl_grpo_trainer_init_present


@patch(
    id="trl.grpo-trainer-check",
    catalogue="batch-rules-misleading",
    requires="trl>=0.14",
    targets="trl.trainer.grpo_trainer:GRPOTrainer.__init__",
    expects=("self", "model", "args"),
    detect=trl_grpo_trainer_init_present,
)
def check_before_model_loads(wrapped: Any, trainer: Any, *args: Any, **kwargs: Any) -> Any:
    from grpo_compat.core.versions import installed_version
    from grpo_compat.core.wrapping import bound_arguments
    from grpo_compat.fixes import validation

    config = bound_arguments(wrapped, trainer, *args, **kwargs).get("args")
    if config is not None and hasattr(config, "num_generations"):
        settings = validation.settings_from(
            config,
            world_size=getattr(config, "world_size", 1),  # the launch's real process count
            # trl >= 0.18 has already derived steps_per_generation from generation_batch_size: check the latter.
            steps_per_generation=None,
            eval_enabled=validation.eval_is_enabled(getattr(config, "eval_strategy", "no")),
        )
        validation.refuse_unless_valid(settings, validation.rules_for(installed_version("trl")))
    return wrapped(trainer, *args, **kwargs)
