"""Refuse a GRPOConfig setting the installed trl does not take, naming the release that removed or renamed it.

Symptom:   `GRPOConfig(max_prompt_length=512)` on trl >= 0.28 fails with "TypeError: GRPOConfig.__init__() got an
           unexpected keyword argument 'max_prompt_length'", naming neither the release that removed it nor what to
           do instead; a misspelt setting (`num_generation=4`) fails the same way without naming the intended one.
           Configs written for an older trl hit it on every upgrade (10 settings removed or renamed since 0.14).
Upstream:  trl PR #5964, axolotl #3386, unsloth PR #8330 (max_prompt_length, removed in 0.28); trl PR #4364
           (use_liger_loss), #4797 (vllm_guided_decoding_regex); census rows 20, 38 (the same drift in ms-swift).
Versions:  every trl >= 0.14 (the release history in grpo_compat/settings/trl.json). Only a keyword GRPOConfig itself
           refuses is answered: what the installed class takes passes through untouched.
Remove when: trl's own error names the release and the replacement of a removed setting.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch


@patch(
    id="trl.grpo-config-settings",
    catalogue="setting-removed-or-renamed",
    requires="trl>=0.14",
    targets="trl.trainer.grpo_config:GRPOConfig.__init__",
    expects=("self",),
)
def refuse_settings_not_taken(wrapped: Any, config: Any, *args: Any, **kwargs: Any) -> Any:
    from grpo_compat.settings import drift

    drift.refuse_keywords("GRPOConfig", "trl", type(config), kwargs)
    return wrapped(config, *args, **kwargs)
