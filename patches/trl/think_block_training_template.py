"""Split an assistant turn's reasoning into its think block in trl 1.1-1.8's Qwen3-family training templates.

Symptom:   none. trl's training variants of the Qwen3, Qwen3.5 (Think, NoThink) and Qwen3.6 chat templates split an
           assistant turn's content into reasoning and answer only when it holds both `<think>` and `</think>`. A
           turn as a thinking model wrote it after a generation prompt that opens the block (Qwen3.5 / 3.6 Think,
           Qwen3-Thinking-2507) holds only `</think>`, and renders as an empty think block, then the reasoning and a
           stray `</think>`. GRPO renders its prompts with the training variant when it has tools and trl's prefix
           check fails on the original template (Qwen3's), so an earlier turn in a prompt reaches the policy that
           way; SFT with assistant_only_loss trains on such turns; get_training_chat_template's callers get it.
           GRPO's own completions are not re-rendered (trl >= 1.0 appends tool results to their token ids).
Upstream:  huggingface/trl#6361, fixed by PR #6363 (trl 1.9.0), which tests `'</think>' in content` alone, as the
           models' own templates do; census row 43.
Versions:  the both-tags test is in qwen3_training.jinja from trl 1.1, qwen3_6_training from 1.3, qwen3_5_think /
           nothink_training from 1.5, to 1.8.0 (read in trl's tags). glm4moe_training tests it in 1.3-1.6 only
           (trl 1.7 tests `'</think>' in content`): edited alike.
           Reproduced on trl 1.8.0 + transformers 5.0.0 and 5.10.0 (matrix cell trl-1.8-tools, reproducer
           think-block-history): plain, the prompts GRPO trains on carry the reasoning outside the think block;
           patched, inside; SFT under Qwen3.5 Think's template alike (reproducer think-block-sft-qwen3.5). trl
           1.16.0 renders it inside, plain. Edited, 1.8.0's four templates equal trl 1.9.0's but for 2 lines of comment.
Remove when: the oldest supported trl is >= 1.9.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch

# The condition trl 1.1-1.8's training templates test before splitting the content, and the one trl 1.9 and the
# models' own templates test: the split that follows takes the text after any `<think>`, or all of it when none.
BOTH_TAGS = "{%- if '<think>' in content and '</think>' in content %}"
CLOSING_TAG = "{%- if '</think>' in content %}"


@patch(
    id="trl.think-block-training-template",
    catalogue="trl-think-block-training-template",
    requires=("trl>=1.1,<1.9",),
    targets="trl.chat_template_utils:get_training_chat_template",
)
def split_reasoning_on_closing_tag(wrapped: Any, *args: Any, **kwargs: Any) -> Any:
    template = wrapped(*args, **kwargs)
    if isinstance(template, str) and BOTH_TAGS in template:
        return template.replace(BOTH_TAGS, CLOSING_TAG)
    return template
