"""Call every reward function of ms-swift GRPO once, as the installed ms-swift would, before the first generation.

Symptom:   a reward function's contract mistake surfaces only at the first reward call, after the policy,
           the reference model and the dataset loaded and the first completions were generated:
           `TypeError: __call__() got an unexpected keyword argument 'messages'` (an ORM or function
           without **kwargs), `missing 1 required positional argument: 'solution'` or `KeyError` (a column
           the dataset lacks), "The expanded size of the tensor (N) must match ..." or, for one value, a
           silent broadcast to every completion, `could not determine the shape` / `must be real number`
           (non-numbers), `'coroutine' object is not iterable` (async before 3.12.1).
Upstream:  census rows 26, 27 (modelscope/ms-swift#3645); ms-swift checks none of it.
Versions:  ms-swift >= 3.5 (3.5.3, 3.12.6, 4.6.0 read and run; the call sites of 3.5-4.5 read in their tags).
           ms-swift calls `reward_func(completions, **kwargs)`: the completions by position, then the generated
           rows batched by column (the dataset's columns, `messages` with the completion as the assistant turn,
           `is_truncated`; `trainer_state`, `prompt_id`, `request_id`, `finish_reason`, `response_token_ids`
           from 3.8; `rollout_infos` from 4.4). ORM classes from the `orms` registry (swift's own, and those a
           plugin file passed with --external_plugins registers) are dry-run as the instances swift built,
           plain callables as they are. When: ms-swift loads its dataset after the model (SwiftRLHF loads the
           model and template when built, the dataset in run()), so no point before the model has real rows
           without loading the dataset a second time; the earliest point that has both the rows and the reward
           functions as swift resolved them (ORM instances built with swift's own arguments: building them
           again could load a model or open a client twice) is the end of swift's GRPOTrainer.__init__, before
           train() generates anything. GRPO_COMPAT_REWARD_CHECK=0 turns it off; streaming datasets and rows
           swift already encoded (no `messages`) are not dry-run. Cost, as logged: 0.2-0.4 ms for the one
           reward of the swift smoke runs (3.5.3, 3.12.6, 4.6.0; in-process, `swift rlhf` on 1 and 2 processes).
Remove when: never by version: it checks the user's functions against the installed ms-swift.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch


@patch(
    id="swift.reward-dry-run",
    catalogue="reward-function-contract",
    requires="ms-swift>=3.5",
    targets=[
        "swift.rlhf_trainers.grpo_trainer:GRPOTrainer.__init__?",  # 4.x
        "swift.trainers.rlhf_trainer.grpo_trainer:GRPOTrainer.__init__?",  # 3.x
    ],
    expects=("self",),
)
def dry_run_swift_reward_functions(wrapped: Any, trainer: Any, *args: Any, **kwargs: Any) -> Any:
    result = wrapped(trainer, *args, **kwargs)
    from grpo_compat.core.versions import installed_version
    from grpo_compat.fixes.rewards import swift_dry_run

    generations = getattr(getattr(trainer, "args", None), "num_generations", None)
    swift_dry_run(trainer.reward_funcs, trainer.train_dataset, generations, installed_version("ms-swift"))
    return result
