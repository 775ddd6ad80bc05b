"""Refuse impossible GRPO settings of ms-swift while its arguments are parsed, before any model loads.

Symptom:   `swift rlhf --rlhf_type grpo --num_generations 1` fails with "num_generations must be
           greater than 1 for GRPO" and no way forward; impossible batches give "Valid values: []"
           (e.g. "generation_batch_size (1) must be evenly divisible by num_generations (4)").
           ms-swift 4.x skips trl's GRPOConfig.__post_init__, so trl.grpo-config-check never runs.
           GRPO with --sequence_parallel_size > 1 on ms-swift < 3.5 (no Ulysses GRPO yet) fails in the
           log-prob gather (KF-1) or with "RLHF do not support sequence parallel" (3.2.2-3.4.0).
           GRPO with --teacher_model and no reward function on ms-swift < 4.4 (no on-policy distillation
           yet) fails with "You must specify reward_funcs or reward_model" after the models loaded.
Upstream:  KF-2 (ms-swift 4.6: "Valid values: []"), KF-1 (sequence parallel), ms-swift #9928 (teacher).
Versions:  ms-swift >= 4.0: every GRPO batch rule. ms-swift 3.0-3.4: sequence_parallel_size, which trl's
           GRPOConfig never sees (3.x build it for the batch rules, checked by trl.grpo-config-check).
           ms-swift 3.6-4.3: a teacher without rewards (--teacher_model came with GKD in 3.6.0; 4.4.0, #9641,
           trains it: 4.4.0-4.6.0 read, 4.6.0 run). Nothing to check on 3.5.
Remove when: ms-swift's own messages explain the rule and name a setting that works, and ms-swift < 4.4
           is no longer supported.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch


@patch(
    id="swift.grpo-arguments-check",
    catalogue=("swift-sequence-parallel-before-3.5", "batch-rules-misleading", "swift-grpo-teacher-without-opd"),
    # Three windows as one (a window is one requirement per library): 3.0-3.4 sequence parallel, 3.6-4.3 a teacher
    # without rewards, >= 4.0 the batch rules; 3.5 has Ulysses GRPO, no --teacher_model and trl's GRPOConfig checks.
    requires="ms-swift>=3.0,!=3.5.*",
    targets=[
        "swift.arguments.rlhf_args:RLHFArguments.__post_init__?",  # 4.x
        "swift.llm.argument.rlhf_args:RLHFArguments.__post_init__?",  # 3.x
    ],
    expects=("self",),
)
def check_grpo_arguments(wrapped: Any, arguments: Any, *args: Any, **kwargs: Any) -> Any:
    # Shared with the ms-swift plugin, which checks the arguments this wrapper is too late for.
    from grpo_compat.fixes.swift_settings import refuse_impossible_swift_grpo

    refuse_impossible_swift_grpo(arguments)
    return wrapped(arguments, *args, **kwargs)
