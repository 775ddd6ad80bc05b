"""Call every Python reward function once, as trl would, when GRPOTrainer is built: before any model loads.
Check the run's environments and tools there too.

Symptom:   a reward function's contract mistake surfaces only after the model loaded and generated:
           `TypeError: f() got an unexpected keyword argument 'prompts'` (no **kwargs),
           `missing 1 required positional argument: 'solution'` or `KeyError` (a column the dataset
           lacks), "The expanded size of the tensor (N) must match ..." or, for one value, a silent
           broadcast to every completion (trl < 1.10), `must be real number, not NoneType` (None on
           trl < 0.16), `'coroutine' object is not iterable` (async on trl < 0.27), `AttributeError:
           ... no attribute '__name__'` (callable objects and partials on trl < 1.9). Environments and
           tools (trl >= 0.29): an `environment` name a dict environment_factory lacks, or the column
           remove_unused_columns=True removed ("Example has `environment=...`, which is not among the
           environments passed to `environment_factory`" at the batch holding it), an environment
           without reset, a tool without docstring or type hints (DocstringParsingException at the
           first batch), a tool trl cannot call by keyword (every call fails, silently), no jmespath
           where trl needs it for tools (ImportError after the model loaded: trl 0.28-1.9, and later
           trl on transformers < 5.13).
Upstream:  census rows 26, 27 (trl #6533, #4939; unsloth #2907); trl 1.10 checks the count itself. Issue 30
           row 4 (trl #5986, #6001, #6002).
Versions:  every trl >= 0.14: the keyword arguments differ by version (completion_ids from 0.18,
           trainer_state from 0.20, log_extra / log_metric from 1.0), and so does what is refused.
           environment_factory is a GRPOTrainer argument from trl 0.29 (a dict of named environments
           from 1.8): an environment run's reward functions get `environments` (the environments built
           here, one per name, not reset). Before, the dry run left `environments` out, so a reward
           reading it was refused on runs trl trains (trl 1.16, the matrix's `tools` smoke kind).
           Streaming datasets are not dry-run (nor their environment names read). Cost of the
           environment and tool checks with the reward dry run, in-process on trl 1.16 (median of 20,
           the smoke cases' 16-row datasets): 1.0 ms (a tool and one environment), 1.3 ms (two named
           environments). GRPO_COMPAT_REWARD_CHECK=0 turns off what runs user code (reward functions,
           environment factories): judges, remote calls, side effects.
Remove when: never by version: it checks the user's functions against the installed trl.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch
from grpo_compat.fixes.detectors import trl_grpo_trainer_init_present


@patch(
    id="trl.reward-dry-run",
    catalogue=("reward-function-contract", "environment-or-tool-unusable"),
    requires="trl>=0.14",
    targets="trl.trainer.grpo_trainer:GRPOTrainer.__init__",
    expects=("self", "model", "reward_funcs"),
    detect=trl_grpo_trainer_init_present,
)
def dry_run_reward_functions(wrapped: Any, trainer: Any, *args: Any, **kwargs: Any) -> Any:
    from grpo_compat.core.versions import installed_version
    from grpo_compat.core.wrapping import bound_arguments
    from grpo_compat.fixes import environments
    from grpo_compat.fixes.rewards import dry_run

    call = bound_arguments(wrapped, trainer, *args, **kwargs)
    config, dataset, factory = call.get("args"), call.get("train_dataset"), call.get("environment_factory")
    built = environments.check(factory, call.get("tools"), dataset, config)
    more = None
    if factory is not None:  # trl passes each completion's environment to the reward functions

        def more(rows: list[dict], generations: int) -> dict[str, Any]:
            routed = isinstance(factory, dict)
            return {"environments": environments.environments_per_completion(built, rows, generations, routed)}

    generations = getattr(config, "num_generations", None) or 8  # trl's default
    drawn = environments.routable(dataset, factory)  # rows trl can route, the ones its reward functions see
    dry_run(call.get("reward_funcs"), drawn, generations, installed_version("trl"), more)
    return wrapped(trainer, *args, **kwargs)
