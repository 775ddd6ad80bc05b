"""Refuse a reward function that returns the wrong number of rewards during training, where trl does not.

Symptom:   a reward function that returns one value (for a whole batch, say) trains on: trl copies it to
           every completion, every advantage is 0 and nothing is learnt, without a word; any other
           wrong count ends in "The expanded size of the tensor (N) must match the existing size (M)".
           The dry run (trl.reward-dry-run) sees only two rows: a count that depends on the data shows
           up later.
Upstream:  census row 27 (huggingface/trl#6533); trl 1.10 checks the count itself (PR #6534).
Versions:  trl 0.14-1.9. Each Python reward function is wrapped once the trainer is built: same name,
           signature and sync / async kind, rewards untouched (weights identical to plain).
Remove when: trl 1.9 is no longer supported.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch
from grpo_compat.fixes.detectors import trl_grpo_trainer_init_present


@patch(
    id="trl.reward-count-check",
    catalogue="reward-function-contract",
    requires="trl>=0.14,<1.10",
    targets="trl.trainer.grpo_trainer:GRPOTrainer.__init__",
    detect=trl_grpo_trainer_init_present,
)
def check_reward_counts(wrapped: Any, trainer: Any, *args: Any, **kwargs: Any) -> Any:
    from grpo_compat.core.versions import installed_version
    from grpo_compat.fixes.rewards import count_check_reward_functions, trl_caller

    result = wrapped(trainer, *args, **kwargs)
    count_check_reward_functions(trainer, trl_caller(installed_version("trl")))
    return result
