"""Refuse an ms-swift GRPO reward function that returns the wrong number of rewards, at the step it happens.

Symptom:   a reward function that returns one value (for a whole batch, say) trains on: ms-swift writes it
           into its reward column with `rewards_per_func[:, i] = torch.tensor(output)`, which copies one
           value to every completion; every advantage from that function is 0, and with no other reward
           nothing is learnt, without a word. Any other wrong count ends in "The expanded size of the tensor
           (N) must match the existing size (M) at non-singleton dimension 0". The dry run
           (swift.reward-dry-run) sees only two rows: a count that depends on the data shows up later.
Upstream:  census row 27 (the trl twin: huggingface/trl#6533, checked by trl 1.10); ms-swift 3.5.3, 3.12.6,
           4.6.0 broadcast it (run), and so do the tags 3.5-4.5 and main (read): none checks the count.
Versions:  ms-swift >= 3.5. Each Python reward function (ORM instances included) is wrapped, in swift's own
           list, once swift's GRPOTrainer is built: same signature and sync / async kind, rewards untouched
           (weights identical to plain); swift has already named its rewards and found the async ones.
Remove when: ms-swift refuses a reward count other than the number of completions.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch


@patch(
    id="swift.reward-count-check",
    catalogue="reward-function-contract",
    requires="ms-swift>=3.5",
    targets=[
        "swift.rlhf_trainers.grpo_trainer:GRPOTrainer.__init__?",  # 4.x
        "swift.trainers.rlhf_trainer.grpo_trainer:GRPOTrainer.__init__?",  # 3.x
    ],
    expects=("self",),
)
def check_swift_reward_counts(wrapped: Any, trainer: Any, *args: Any, **kwargs: Any) -> Any:
    result = wrapped(trainer, *args, **kwargs)
    from grpo_compat.core.versions import installed_version
    from grpo_compat.fixes.rewards import count_check_reward_functions, swift_caller

    count_check_reward_functions(trainer, swift_caller(installed_version("ms-swift")))
    return result
