"""Refuse a `swift rlhf` argument or RLHFArguments(...) keyword the installed ms-swift lacks, before anything loads.

Symptom:   an argument of an older ms-swift (`--eval_datasets`, `--tensor_parallel_size`, `--gpu_memory_utilization`),
           or a misspelt one, fails with "ValueError: remaining_argv: ['--num_generation', '4']" - after RLHFArguments'
           __post_init__ already ran (model and template lookup), naming neither the release that removed or renamed
           it nor the argument meant. Built in Python (`RLHFArguments(train_type="full")`, before `rlhf_main`), it
           fails with "TypeError: RLHFArguments.__init__() got an unexpected keyword argument", naming neither.
Upstream:  census rows 20 and 38 (ms-swift #4868, #3742, #5160, #7977: unrecognized / moved arguments between releases).
Versions:  ms-swift >= 3.4 (the release history in grpo_compat/settings/ms-swift.json: 28 arguments removed or renamed
           between 3.4.0 and 4.6.0). Only what swift itself would leave unparsed is refused: a field of RLHFArguments,
           its `--no_` form, an argparse prefix of one, `--ignore_args_error true`, a json file or RAY_SWIFT_ARGS pass;
           in Python, exactly the keywords RLHFArguments' own __init__ rejects are refused (3.x: swift.llm, 4.x: swift).
Remove when: ms-swift names the release and the replacement of an argument it no longer takes.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from grpo_compat.core.registry import patch_each


def refuse_arguments_not_taken(wrapped: Any, class_type: Any, argv: Any = None, *args: Any, **kwargs: Any) -> Any:
    if getattr(class_type, "__name__", "") == "RLHFArguments":
        from grpo_compat.settings import drift
        from grpo_compat.settings.installed import cli_accepts, swift_argument_names

        names = swift_argument_names(list(sys.argv[1:] if argv is None else argv), os.environ)
        valid = drift.init_fields(class_type)
        unknown = [name for name in names if not cli_accepts(name, valid)]
        if unknown and valid:
            drift.refuse("swift rlhf", "ms-swift", unknown, valid)
    return wrapped(class_type, argv, *args, **kwargs)


def refuse_keywords_not_taken(wrapped: Any, arguments: Any, *args: Any, **kwargs: Any) -> Any:
    from grpo_compat.settings import drift

    drift.refuse_keywords("RLHFArguments", "ms-swift", type(arguments), kwargs)
    return wrapped(arguments, *args, **kwargs)


PARSE_ARGS = "swift.utils.utils:parse_args"
patch_each(
    id="swift.arguments-not-taken",
    catalogue="setting-removed-or-renamed",
    requires="ms-swift>=3.4",
    wrappers={
        PARSE_ARGS: refuse_arguments_not_taken,
        "swift.arguments.rlhf_args:RLHFArguments.__init__?": refuse_keywords_not_taken,  # 4.x
        "swift.llm.argument.rlhf_args:RLHFArguments.__init__?": refuse_keywords_not_taken,  # 3.x
    },
    expects={PARSE_ARGS: ("class_type", "argv")},  # RLHFArguments.__init__: its fields, any of them
    rebind_in=("swift",),  # swift's pipelines import parse_args by name
)
