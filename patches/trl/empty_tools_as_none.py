"""Render GRPO prompts with no tool list when the trainer has no tools, as trl 0.27 and >= 1.0 do.

Symptom:   none. GRPOTrainer given no `tools` stores `tools or []` and renders every conversational prompt with
           `tools=[]`. A chat template that tests `tools is not none` (Llama 3.x's) then writes its tool-calling
           section into every prompt, so the policy generates from and trains on prompts it will never see.
           Templates that test `if tools` (Qwen's) render nothing for [] and are not affected. No warning.
Upstream:  huggingface/trl#5379, fixed by PR #5380 (`tools or None`, trl 1.0.0); census row 43.
Versions:  `tools or []` is in trl 0.26.0, 0.28.0 and 0.29.0-0.29.1; 0.26.1-0.27.2 keep None (read in trl's tags).
           0.28's vLLM generation keeps its own copy of the list. Reproduced on trl 0.29.1 (matrix cell trl-0.29,
           reproducer empty-tools-tool-section): the prompts carry the tool section plain, none patched.
Remove when: the oldest supported trl is >= 1.0.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch


@patch(
    id="trl.empty-tools-as-none",
    catalogue="trl-empty-tools-tool-section",
    requires=("trl>=0.26,<1.0,!=0.26.1,!=0.26.2,!=0.27.*",),
    targets="trl.trainer.grpo_trainer:GRPOTrainer.__init__",
    expects=("self",),
)
def no_tool_list_for_no_tools(wrapped: Any, trainer: Any, *args: Any, **kwargs: Any) -> Any:
    result = wrapped(trainer, *args, **kwargs)
    # After __init__ these versions only test the list's truth or hand it to apply_chat_template: None is what
    # trl 0.27 stores for no tools.
    for holder in (trainer, getattr(trainer, "vllm_generation", None)):
        if getattr(holder, "tools", None) == []:
            holder.tools = None
    return result
