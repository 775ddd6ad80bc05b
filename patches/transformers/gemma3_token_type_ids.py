"""Give text-only Gemma-3 (Gemma3ForConditionalGeneration) the all-zero token_type_ids transformers 5.0-5.5 demand.

Symptom:   `ValueError: `token_type_ids` is required as a model input when training` at the first generation of
           a GRPO run on Gemma-3: trl passes no token_type_ids for text-only prompts, and the policy is in
           training mode while it generates.
Upstream:  huggingface/trl#5032, #4142 (census row 33); transformers 5.6 no longer requires them.
Versions:  transformers 5.0.0-5.5.x (the check is absent in 4.57.x and from 5.6.0); Gemma3ForCausalLM never
           reaches it. Only a call with neither token_type_ids nor pixel_values gets zeros: every token is
           text, so the image attention mask the ids build is empty, and logits and gradients are bitwise
           those of transformers 5.6.0 with none (eager and sdpa, measured on CPU;
           docs/investigations/moe-gemma3-rows-33-41-2026-11.md). A call with images is left to upstream.
Remove when: transformers < 5.6 is no longer supported.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch


@patch(
    id="transformers.gemma3-text-token-type-ids",
    catalogue="gemma3-token-type-ids-required",
    requires="transformers>=5.0,<5.6",
    targets="transformers.models.gemma3.modeling_gemma3:Gemma3ForConditionalGeneration.forward",
    expects=("self", "input_ids", "pixel_values", "token_type_ids"),
)
def text_only_token_type_ids(wrapped: Any, model: Any, *args: Any, **kwargs: Any) -> Any:
    from grpo_compat.core.wrapping import bound_arguments

    call = bound_arguments(wrapped, model, *args, **kwargs)
    ids = call.get("input_ids")
    by_keyword = "token_type_ids" in kwargs or "token_type_ids" not in call  # absent, or None by keyword
    text_only = ids is not None and call.get("token_type_ids") is None and call.get("pixel_values") is None
    if model.training and text_only and by_keyword:
        import torch

        kwargs["token_type_ids"] = torch.zeros_like(ids)  # text only: no token is an image token
    return wrapped(model, *args, **kwargs)
