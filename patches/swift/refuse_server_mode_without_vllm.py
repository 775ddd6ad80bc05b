"""Refuse ms-swift 3.5-3.11 GRPO with --vllm_mode server but without --use_vllm true, before the model loads.

Symptom:   `AttributeError: 'GRPOTrainer' object has no attribute 'vllm_client'` at the first generation,
           after the model and the reference model loaded. With use_vllm false, swift's GRPOTrainer
           generates with the model (PtEngine) and never stores a server client, but its rollout branches on
           vllm_mode alone and sends the prompts to `self.vllm_client`. No server is contacted: the run
           fails the same with or without a `swift rollout`, and with or without vLLM installed.
Upstream:  ms-swift #5185 (an ms-swift 3.7 dev checkout with trl 0.20: `--vllm_mode server`, no --use_vllm);
           census row 20. ms-swift 3.12.0 refuses the pair while parsing ("vllm_mode is not supported when
           use_vllm is false"; its vllm_mode defaults to None from then on).
Versions:  ms-swift 3.5.0 (vllm_mode came with 3.5) to 3.11.x, any trl. Reproduced with ms-swift 3.5.3 on trl
           0.19.0 and 3.7.3 on trl 0.20.0 (matrix cells swift-3.5 and swift-3.7-trl0.20, reproducer
           swift-server-mode-without-vllm); 3.6 and 3.8-3.11 read (source), not run.
Remove when: ms-swift < 3.12 is no longer supported.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch
from grpo_compat.fixes.swift_settings import SERVER_ROLLOUT_WITHOUT_VLLM, vllm_mode_without_vllm


@patch(
    id="swift.refuse-server-mode-without-vllm",
    catalogue="swift-server-mode-without-use-vllm",
    requires=SERVER_ROLLOUT_WITHOUT_VLLM,  # the window the shared check (and `check --swift`) uses
    targets="swift.llm.argument.rlhf_args:RLHFArguments.__post_init__",
    expects=("self",),
)
def refuse_server_mode_without_vllm(wrapped: Any, arguments: Any, *args: Any, **kwargs: Any) -> Any:
    if getattr(arguments, "rlhf_type", None) == "grpo":  # RLHFArguments' own default is dpo
        from grpo_compat.core.errors import GRPOSettingsError
        from grpo_compat.core.versions import installed_version

        problem = vllm_mode_without_vllm(arguments, installed_version("ms-swift") or "3.5")
        if problem:  # in this patch's window only the server rollout without vLLM
            raise GRPOSettingsError(
                f"{problem} Refused before the model loads (grpo_compat catalogue: "
                "swift-server-mode-without-use-vllm; `grpo-compat doctor` lists it)."
            )
    return wrapped(arguments, *args, **kwargs)
