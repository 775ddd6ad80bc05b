"""Refuse GRPO settings that cannot train when GRPOConfig is created, with the rule, numbers and a fix.

Symptom:   num_generations=1 on one GPU fails with "The global train batch size (1 x 4) must be
           evenly divisible by the number of generations per prompt (1)" (trl 0.15-0.16), raised in
           GRPOTrainer.__init__ after the model has loaded; newer versions answer impossible
           combinations with "Valid values: []" and no way forward.
Upstream:  KF-2; ms-swift reports of "Valid values: []"; trl moved the check to
           GRPOConfig only in 0.18.
Versions:  trl >= 0.14: before 0.18 the rules run after model loading; no version explains the zero
           advantage of num_generations=1 or names a setting that works.
Remove when: upstream's GRPOConfig rejects every impossible setting itself, naming a valid one.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch


def _has_num_generations_field(module: Any) -> str | None:
    fields = getattr(module.GRPOConfig, "__dataclass_fields__", {})
    return None if "num_generations" in fields else "GRPOConfig has no num_generations field"


@patch(
    id="trl.grpo-config-check",
    catalogue="batch-rules-misleading",
    requires="trl>=0.14",
    targets="trl.trainer.grpo_config:GRPOConfig.__post_init__",
    expects=("self",),
    detect=_has_num_generations_field,
)
def check_grpo_config(wrapped: Any, config: Any, *args: Any, **kwargs: Any) -> Any:
    # Before upstream's own __post_init__: ours is the message the user sees, before any model loads.
    from grpo_compat.core.versions import installed_version
    from grpo_compat.fixes import validation

    settings = validation.settings_from(
        config,
        world_size=validation.launched_world_size(),
        eval_enabled=validation.eval_is_enabled(getattr(config, "eval_strategy", "no")),
    )
    validation.refuse_unless_valid(settings, validation.rules_for(installed_version("trl")))
    return wrapped(config, *args, **kwargs)
