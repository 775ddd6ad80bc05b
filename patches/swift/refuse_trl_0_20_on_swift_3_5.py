"""Refuse ms-swift 3.5-3.6 GRPO on trl >= 0.20, which crashes at the first step after the model loaded.

Symptom:   `AttributeError: 'super' object has no attribute '_get_per_token_logps'` in swift's
           GRPOTrainer._get_per_token_logps, once the model, the reference model and the first
           generation are done: ms-swift 3.5-3.6 call trl's GRPOTrainer._get_per_token_logps, which
           trl 0.20 renamed to _get_per_token_logps_and_entropies (with another signature).
Upstream:  census row 20, its family of ms-swift / trl skews (ms-swift #3470, #9261); ms-swift 3.7 calls
           the new name.
Versions:  ms-swift 3.5.0-3.6.x (they declare trl<0.20; pip reaches the pair with a later
           `pip install -U trl` or --no-deps). Reproduced with ms-swift 3.5.3 on trl 0.20.0 and 0.21.0;
           trl 0.17.0-0.19.1 train (matrix cell swift-3.5-trl0.20, reproducer swift-trl-0.20-logps-renamed).
           ms-swift 3.4.x has the same call but declares trl<0.18 and was not run on trl 0.20.
Remove when: ms-swift 3.6 is no longer supported.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch


@patch(
    id="swift.refuse-trl-0.20-on-swift-3.5",
    catalogue="swift-3.5-trl-0.20",
    requires=("ms-swift>=3.5,<3.7", "trl>=0.20"),
    targets="swift.llm.argument.rlhf_args:RLHFArguments.__post_init__",
    expects=("self",),
)
def refuse_renamed_per_token_logps(wrapped: Any, arguments: Any, *args: Any, **kwargs: Any) -> Any:
    if getattr(arguments, "rlhf_type", None) == "grpo":
        from grpo_compat.fixes.combinations import installed, refuse

        refuse(
            "swift-3.5-trl-0.20",
            f"{installed('ms-swift', 'trl')} cannot train GRPO: ms-swift 3.5-3.6 call trl's "
            "GRPOTrainer._get_per_token_logps, which trl 0.20 renamed, so the first step fails with "
            "\"'super' object has no attribute '_get_per_token_logps'\" after the model loaded.",
            ['pip install "trl>=0.17,<0.20"', 'pip install "ms-swift>=3.7"'],
        )
    return wrapped(arguments, *args, **kwargs)
