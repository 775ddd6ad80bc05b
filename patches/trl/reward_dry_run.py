"""Call every Python reward function once, as trl would, when GRPOTrainer is built: before any model loads.

Symptom:   a reward function's contract mistake surfaces only after the model loaded and generated:
           `TypeError: f() got an unexpected keyword argument 'prompts'` (no **kwargs),
           `missing 1 required positional argument: 'solution'` or `KeyError` (a column the dataset
           lacks), "The expanded size of the tensor (N) must match ..." or, for one value, a silent
           broadcast to every completion (trl < 1.10), `must be real number, not NoneType` (None on
           trl < 0.16), `'coroutine' object is not iterable` (async on trl < 0.27), `AttributeError:
           ... no attribute '__name__'` (callable objects and partials on trl < 1.9).
Upstream:  census rows 26, 27 (trl #6533, #4939; unsloth #2907); trl 1.10 checks the count itself.
Versions:  every trl >= 0.14: the keyword arguments differ by version (completion_ids from 0.18,
           trainer_state from 0.20, log_extra / log_metric from 1.0), and so does what is refused.
           Streaming datasets and environment_factory runs are not dry-run. GRPO_COMPAT_REWARD_CHECK=0
           turns it off (rewards with side effects: judges, remote calls).
Remove when: never by version: it checks the user's functions against the installed trl.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch
from grpo_compat.fixes.detectors import trl_grpo_trainer_init_present


@patch(
    id="trl.reward-dry-run",
    catalogue="reward-function-contract",
    requires="trl>=0.14",
    targets="trl.trainer.grpo_trainer:GRPOTrainer.__init__",
    expects=("self", "model", "reward_funcs"),
    detect=trl_grpo_trainer_init_present,
)
def dry_run_reward_functions(wrapped: Any, trainer: Any, *args: Any, **kwargs: Any) -> Any:
    from grpo_compat.core.versions import installed_version
    from grpo_compat.core.wrapping import bound_arguments
    from grpo_compat.fixes.rewards import dry_run

    call = bound_arguments(wrapped, trainer, *args, **kwargs)
    config = call.get("args")
    if getattr(config, "environment_factory", None) is None:  # its environments are built with the trainer
        generations = getattr(config, "num_generations", None) or 8  # trl's default
        dry_run(call.get("reward_funcs"), call.get("train_dataset"), generations, installed_version("trl"))
    return wrapped(trainer, *args, **kwargs)
