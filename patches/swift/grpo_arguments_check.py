"""Refuse impossible GRPO batch settings of ms-swift 4.x while its arguments are parsed.

Symptom:   `swift rlhf --rlhf_type grpo --num_generations 1` fails with "num_generations must be
           greater than 1 for GRPO" and no way forward; impossible batches give "Valid values: []"
           (e.g. "generation_batch_size (1) must be evenly divisible by num_generations (4)").
           ms-swift 4.x skips trl's GRPOConfig.__post_init__, so trl.grpo-config-check never runs.
Upstream:  KNOWN_FAILURES.md KF-2 (ms-swift 4.6: "Valid values: []").
Affects:   ms-swift >= 4.0 (3.x build trl's GRPOConfig, covered by trl.grpo-config-check).
Remove when: ms-swift's own messages explain the rule and name a setting that works.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.registry import patch


@patch(
    id="swift.grpo-arguments-check",
    requires="ms-swift>=4.0",
    targets="swift.arguments.rlhf_args:RLHFArguments.__post_init__",
    expects=("self",),
)
def check_grpo_arguments(wrapped: Any, arguments: Any, *args: Any, **kwargs: Any) -> Any:
    if getattr(arguments, "rlhf_type", None) == "grpo":
        from grpo_compat import validation
        from grpo_compat.versions import installed_version

        # ms-swift 4 defaults gradient accumulation to 1 for GRPO and evaluates only with a
        # validation set (val_dataset or split_dataset_ratio > 0).
        has_eval_data = bool(getattr(arguments, "val_dataset", None)) or bool(
            getattr(arguments, "split_dataset_ratio", 0)
        )
        settings = validation.settings_from(
            arguments,
            gradient_accumulation_steps=getattr(arguments, "gradient_accumulation_steps", None) or 1,
            world_size=validation.launched_world_size(),
            eval_enabled=has_eval_data
            and validation.eval_is_enabled(getattr(arguments, "eval_strategy", None) or "steps"),
            max_length=getattr(arguments, "max_length", None),
            has_teacher=getattr(arguments, "teacher_model", None) is not None
            or getattr(arguments, "teacher_model_server", None) is not None,
        )
        rules = validation.rules_for(installed_version("trl"), installed_version("ms-swift"))
        validation.refuse_unless_valid(settings, rules)
    return wrapped(arguments, *args, **kwargs)
