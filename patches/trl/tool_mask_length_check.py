"""Name trl 0.26-0.29's tool mask that outgrew its completion (tool-call retokenisation) at the step it happens.

Symptom:   RuntimeError: The size of tensor a (N) must match the size of tensor b (M) at non-singleton
           dimension 1, in _compute_loss at `completion_mask * inputs["tool_mask"]`, on the first step whose
           model wrote a tool call that the chat template re-renders in fewer tokens than the model wrote it
           (other spacing of its JSON, tokens the tokenizer merges). When that completion is not the batch's
           longest, nothing fails: its tool mask is shifted against its tokens, and tool-result tokens train
           as the model's own, or the model's own go unscored.
Upstream:  huggingface/trl#5144 (PRs #5145, #5247 closed); trl 1.0.0 builds the tool turn by concatenating token
           ids instead of re-rendering the conversation (#5242), so the mask and the ids stay aligned.
Versions:  trl 0.26.0 (tools in GRPOTrainer, #4300) to 0.29.1, on transformers >= 5.0 (the versions trl takes tools
           with). `_tool_call_loop` extends the mask by `[0] * tool_length`, a negative length giving nothing, then
           sets the ids to the re-rendered conversation. Reproduced on CPU: trl 0.27.2 + transformers 5.0.0
           (matrix cell trl-0.27-tools, reproducer tool-call-retokenised, the tiny model fitted to call a tool).
Remove when: the oldest supported trl is >= 1.0.

The check stops the step: no per-sample realignment is right for every case (after several tool rounds the mask
cannot tell which round lost tokens), and upstream's fix changes the ids themselves.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch


@patch(
    id="trl.tool-mask-length-check",
    catalogue="trl-tool-mask-retokenisation",
    requires=("trl>=0.26,<1.0", "transformers>=5.0"),
    targets="trl.trainer.grpo_trainer:GRPOTrainer._tool_call_loop",
    expects=("self", "prompts", "prompt_ids", "completion_ids", "completions", "logprobs"),
)
def tool_mask_length_check(wrapped: Any, trainer: Any, *args: Any, **kwargs: Any) -> Any:
    result = wrapped(trainer, *args, **kwargs)
    tool_mask, _, completion_ids = result[:3]
    misaligned = [
        (index, len(mask), len(ids))
        for index, (mask, ids) in enumerate(zip(tool_mask, completion_ids, strict=True))
        if len(mask) != len(ids)
    ]
    if misaligned:
        from grpo_compat.core.errors import UnsupportedCombinationError
        from grpo_compat.fixes.combinations import installed

        index, mask_length, ids_length = misaligned[0]
        raise UnsupportedCombinationError(
            f"trl's tool mask disagrees with the completion ids in {len(misaligned)} of {len(tool_mask)} completions "
            f"(completion {index}: tool_mask {mask_length} tokens, completion_ids {ids_length}) on "
            f"{installed('trl', 'transformers')}: the chat template re-rendered the model's tool call in fewer "
            "tokens than the model wrote it, and this trl extends the mask without shortening it (trl #5144). "
            "The loss would fail with a tensor size mismatch, or mask the wrong tokens. "
            'Fix: pip install "trl>=1.0" (it concatenates token ids instead of re-rendering). '
            "Stopped at the first generation step (grpo_compat catalogue: trl-tool-mask-retokenisation)."
        )
    return result
