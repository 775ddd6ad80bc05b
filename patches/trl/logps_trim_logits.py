"""Trim the logits of models that ignore logits_to_keep, as trl does before 0.19 and again from 0.20.

Symptom:   RuntimeError: The size of tensor a (8) must match the size of tensor b (27) at non-singleton
           dimension 1, in selective_log_softmax (fp32); in bf16 silently shifted log-probs. Only for a
           model whose forward accepts but ignores logits_to_keep (VLMs, custom wrappers).
Upstream:  huggingface/trl#3681 (the trim logits[:, -logits_to_keep:] was removed; #3682 closed unmerged); KF-1.
Versions:  trl 0.19.0 and 0.19.1 (_get_per_token_logps); the window is TRIM_MISSING below.
Remove when: trl 0.19 is no longer supported.

The model is handed to upstream behind alignment.KeepLastLogits, which keeps the logits_to_keep + 1
positions upstream asked for (a view). A model that honours logits_to_keep returns exactly those, so
its log-probs are bit-identical. Stacks with trl.logps-alignment in either order.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch
from grpo_compat.core.wrapping import bound_arguments, call_with
from grpo_compat.fixes.alignment import KeepLastLogits

# trl 0.19.0 removed the trim (commit b9572737); 0.20.0 restored it behind its model_kwarg_keys check.
TRIM_MISSING = "trl>=0.19.0,<0.20"


@patch(
    id="trl.logps-trim-logits",
    catalogue="logits-to-keep-ignored-trl-0.19",
    requires=TRIM_MISSING,
    targets="trl.trainer.grpo_trainer:GRPOTrainer._get_per_token_logps",
    expects=("model", "logits_to_keep"),
)
def trim_untrimmed_logits(wrapped: Any, *args: Any, **kwargs: Any) -> Any:
    call = bound_arguments(wrapped, *args, **kwargs)
    model, keep = call.get("model"), call.get("logits_to_keep")
    if model is None or not isinstance(keep, int):
        return wrapped(*args, **kwargs)
    # Upstream asks the model for keep + 1 positions and drops the last one itself.
    return call_with(wrapped, args, kwargs, model=KeepLastLogits(model, keep + 1))
