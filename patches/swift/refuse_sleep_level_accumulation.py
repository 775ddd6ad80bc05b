"""Refuse ms-swift 3.2.1-3.3.x GRPO with --use_vllm and --sleep_level > 0, which drops gradient accumulation to 1.

Symptom:   none: RLHFArguments._init_grpo sets gradient_accumulation_steps = 1 whenever sleep_level > 0 (with
           use_vllm, not async_generate), over the user's --gradient_accumulation_steps and over ms-swift's default,
           while it parses the arguments. The run trains with a smaller batch per optimizer step than asked, silently.
Upstream:  modelscope/ms-swift#3943; ms-swift 3.4.0 (PR #3969, "GRPOTrainer compatible with trl 0.17") removed the line.
Versions:  ms-swift 3.2.1 (the line appears) to 3.3.x (read in every tag's swift/llm/argument/rlhf_args.py: 3.2.0 and
           3.4.0 lack it). Reproduced: ms-swift 3.3.1 (cell swift-3.3, reproducer swift-sleep-level-accumulation).
           Refused only when the accumulation asked for is not 1 (gradient_accumulation_steps=1 trains as asked).
           Checked where RLHFArguments(...) is built after apply(); the --external_plugins file is imported after
           swift has already replaced the value, and cannot see it.
Remove when: ms-swift < 3.4 is no longer supported.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch
from grpo_compat.fixes.objective_settings import SLEEP_LEVEL_FORCES_ACCUMULATION, sleep_level_forces_accumulation


@patch(
    id="swift.refuse-sleep-level-accumulation",
    catalogue="swift-sleep-level-accumulation",
    requires=SLEEP_LEVEL_FORCES_ACCUMULATION,
    targets="swift.llm.argument.rlhf_args:RLHFArguments.__post_init__",
    expects=("self",),
)
def refuse_sleep_level_accumulation(wrapped: Any, arguments: Any, *args: Any, **kwargs: Any) -> Any:
    from grpo_compat.core.errors import GRPOSettingsError
    from grpo_compat.core.versions import installed_version

    problem = sleep_level_forces_accumulation(arguments, installed_version("ms-swift") or "3.3")
    if problem:
        raise GRPOSettingsError(
            f"{problem} Refused before the model loads (grpo_compat catalogue: swift-sleep-level-accumulation; "
            "`grpo-compat doctor` lists it)."
        )
    return wrapped(arguments, *args, **kwargs)
