"""Refuse `swift rlhf --reward_funcs NAME` naming no registered reward, before the model loads.

Symptom:   `ValueError: reward_function NAME is not implemented in swift.rewards` (4.x; `swift.plugin`
           3.12, `swift.llm.plugin` 3.5) when swift's GRPO trainer is built, after the policy, the
           reference model and the dataset have loaded; it names neither the registered rewards nor
           how to register one (a plugin file passed with --external_plugins).
Upstream:  census row 26 (ms-swift #7069, #4783, #4351: "reward name not registered").
Versions:  ms-swift >= 3.5 (3.5.3, 3.12.6, 4.6.0 read and run). The registry is read after every
           --external_plugins file was imported, so the user's own registered rewards count.
Remove when: ms-swift checks reward names while parsing its arguments.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch


@patch(
    id="swift.reward-names-check",
    catalogue="swift-reward-not-registered",
    requires="ms-swift>=3.5",
    targets=[
        "swift.pipelines.train.rlhf:SwiftRLHF._prepare_model_tokenizer?",  # 4.x
        "swift.llm.train.rlhf:SwiftRLHF._prepare_model_tokenizer?",  # 3.x
    ],
    expects=("self",),
)
def refuse_unregistered_reward_names(wrapped: Any, pipeline: Any, *args: Any, **kwargs: Any) -> Any:
    arguments = getattr(pipeline, "args", None)
    if getattr(arguments, "rlhf_type", None) == "grpo":
        from grpo_compat.fixes.rewards import refuse_unregistered_swift_rewards

        refuse_unregistered_swift_rewards(getattr(arguments, "reward_funcs", None) or [])
    return wrapped(pipeline, *args, **kwargs)
