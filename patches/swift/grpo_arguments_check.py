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
        from grpo_compat.check import swift_settings
        from grpo_compat.versions import installed_version

        swift_version = installed_version("ms-swift") or "4"  # the window guarantees it is installed
        settings = swift_settings(arguments, validation.launched_world_size(), swift_version)
        validation.refuse_unless_valid(settings, validation.rules_for(installed_version("trl"), swift_version))
    return wrapped(arguments, *args, **kwargs)
