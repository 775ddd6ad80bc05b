"""Refuse ms-swift 4.x GRPO on a trl < 0.29 that takes missing optional packages for installed (transformers >= 5.3).

Symptom:   "Failed to import trl.trainer.grpo_trainer because of the following error ... No module named 'mergekit'"
           (or 'weave', 'vllm') once the model and the reference model loaded: swift imports trl's GRPOTrainer
           when it builds the trainer.
Upstream:  ms-swift #9261 (census row 20). transformers 5.3 made `_is_package_available(name)` return a
           (found, version) pair; trl 0.19-0.28 read it as a bool. trl 0.29 reads the pair; ms-swift 4.6 corrects the
           function for trl 0.27-0.28, which call it late, not for trl <= 0.26, which read it when trl is imported.
Versions:  ms-swift >= 4.1 (4.0 declares transformers<5.3) with trl 0.19-0.28 and transformers >= 5.3, which pip
           installs together. Refused only where trl's flags are wrong now, for a package trl's GRPO trainer imports
           (vllm, mergekit, weave) that is not installed: ms-swift 4.6 with trl 0.27-0.28 trains and is not refused.
           Reproduced: ms-swift 4.6.0 + trl 0.26.2 and ms-swift 4.5.2 + trl 0.28.0 (matrix cells swift-4.6-trl0.26,
           swift-4.5-trl0.28, reproducer swift-trl-optional-imports).
Remove when: ms-swift 4.5 and trl 0.28 are no longer supported.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from grpo_compat.core.registry import patch

# The optional packages trl 0.19-0.28 import when their GRPO trainer module loads, if trl thinks they are installed.
IMPORTED_BY_GRPO_TRAINER = ("vllm", "mergekit", "weave")


def packages_taken_for_installed() -> list[str]:
    """The packages trl's GRPO trainer will import though they are not installed: [] where trl reads its flags right."""
    import trl.import_utils as flags

    missing = []
    for package in IMPORTED_BY_GRPO_TRAINER:
        if importlib.util.find_spec(package) is not None:
            continue
        if f"_{package}_available" in vars(flags):  # trl <= 0.26: read once, when trl was imported
            taken = flags.__dict__[f"_{package}_available"]
        else:  # trl 0.27-0.28: read at each call (ms-swift 4.6 corrects the function)
            taken = flags._is_package_available(package)
        if taken:
            missing.append(package)
    return missing


@patch(
    id="swift.refuse-trl-optional-imports",
    catalogue="trl-optional-imports-transformers-5.3",
    requires=("ms-swift>=4.1", "trl>=0.19,<0.29", "transformers>=5.3"),
    targets="swift.arguments.rlhf_args:RLHFArguments.__post_init__",
    expects=("self",),
)
def refuse_missing_optional_imports(wrapped: Any, arguments: Any, *args: Any, **kwargs: Any) -> Any:
    missing = packages_taken_for_installed() if getattr(arguments, "rlhf_type", None) == "grpo" else []
    if missing:
        from grpo_compat.fixes.combinations import installed, refuse

        refuse(
            "trl-optional-imports-transformers-5.3",
            f"{installed('ms-swift', 'trl', 'transformers')} cannot train GRPO: transformers >= 5.3 returns a "
            "(found, version) pair from _is_package_available, which this trl reads as a bool, so it takes "
            f'{", ".join(missing)} for installed and importing its GRPO trainer fails with "No module named '
            f"'{missing[0]}'\" after the model loaded.",
            ['pip install "trl>=0.29"', 'pip install "transformers<5.3"'],
        )
    return wrapped(arguments, *args, **kwargs)
