"""Give trl 0.26-0.28's Liger GRPO loss the tool mask its own loss applies, so tool results are not trained on.

Symptom:   none printed. With tools (or a rollout_func's env_mask) and use_liger_kernel=True, the Liger loss scores
           every completion token, the tool's results (and environment feedback) included, as if the model wrote
           them; trl's own loss masks them (completion_mask * tool_mask). The run trains on the wrong tokens.
Upstream:  huggingface/trl#4974 (multi-turn masks); fixed in trl 0.29.0 by #4975, which passes the same product to
           the Liger loss as its loss mask.
Versions:  trl 0.26.0 (tool_mask, #4300) to 0.28.0. Reproduced on CPU: trl 0.27.2 + transformers 5.0.0 + liger-kernel
           0.6.4 (matrix cell trl-0.27-tools, reproducer liger-tool-results-trained: the gradients of the Liger loss
           and of trl's own loss differ on a batch with tool results; patched they agree).
Remove when: the oldest supported trl is >= 0.29.

Only the loss mask handed to the Liger loss changes: the model's attention mask stays the completion mask, as in
upstream's fix. Without a tool mask, or with one of ones, the call is upstream's unchanged.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch


@patch(
    id="trl.liger-tool-mask",
    catalogue="trl-liger-tool-mask-ignored",
    requires=("trl>=0.26,<0.29",),
    targets="trl.trainer.grpo_trainer:GRPOTrainer.compute_liger_loss",
    expects=("self", "unwrapped_model", "inputs"),
)
def liger_loss_with_tool_mask(wrapped: Any, trainer: Any, unwrapped_model: Any, inputs: Any, *args: Any) -> Any:
    tool_mask = inputs.get("tool_mask") if isinstance(inputs, dict) else None
    if tool_mask is None or bool(tool_mask.all()):
        return wrapped(trainer, unwrapped_model, inputs, *args)
    liger_loss = trainer.liger_grpo_loss

    def masked(*loss_args: Any, attention_mask: Any = None, **loss_kwargs: Any) -> Any:
        # liger's `attention_mask` is its loss mask (#4975); the model's forward took the completion mask already.
        return liger_loss(*loss_args, attention_mask=attention_mask * tool_mask, **loss_kwargs)

    trainer.liger_grpo_loss = masked
    try:
        return wrapped(trainer, unwrapped_model, inputs, *args)
    finally:
        trainer.liger_grpo_loss = liger_loss
