"""Fit the tiny Qwen2 to answer every chat turn with one fixed tool call, so multi-turn GRPO runs call tools.

A randomly initialised tiny model almost never writes a tool call that parses, so trl's tool loop never runs a tool.
Fitted here (150 Adam steps on 16 prompts, about 50 s of one CPU core), the model answers a prompt rendered with
:data:`CHAT_TEMPLATE` by :data:`TOOL_CALL_TEXT` and ``<|im_end|>``: 16 of 16 samples exactly at temperature 0.3
(at 1.0 it garbles the JSON).

The call ends in 64 spaces, which the chat template's parser drops: re-rendered, the model's turn is 64 tokens
shorter than the model wrote it, more than the tool-result block the template appends (about 40 tokens), which is
what trl #5144's retokenisation needs to make the tool mask longer than the completion.
"""

from __future__ import annotations

import json
import random
from typing import Any

TOOL_CALL = {"name": "add", "arguments": {"a": 1, "b": 2}}
# Compact, as the template renders it, then blank space the template drops (its parser strips it): the model may
# write more or fewer spaces than fitted, the call parses the same.
TOOL_CALL_TEXT = "<tool_call>\n" + json.dumps(TOOL_CALL) + "\n</tool_call>" + " " * 64
FIT_STEPS = 150
FIT_LEARNING_RATE = 3e-3

_QUESTIONS = ("Question {}: add {} and {}.", "What is {} plus {} and {}?", "Question {}: {} + {}")

# ChatML that renders tool calls and results as Qwen2.5 / Qwen3 do (trl's Qwen3 response schema parses its calls), with
# a one-line tools system turn: Qwen's describes each tool in about 600 of this tokenizer's tokens, which the tiny
# model would have to learn to read past. Prefix-preserving, as trl's multi-turn training requires.
CHAT_TEMPLATE = (
    "{%- if tools %}{{ '<|im_start|>system\\nTools: ' }}"
    "{%- for tool in tools %}{{ (tool.function.name if tool.function is defined else tool.name) + ' ' }}{%- endfor %}"
    "{{ '<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'tool' %}"
    "{{ '<|im_start|>user\\n<tool_response>\\n' + message.content + '\\n</tool_response><|im_end|>\\n' }}"
    "{%- else %}{{ '<|im_start|>' + message.role + '\\n' + (message.content or '') }}"
    "{%- for call in message.tool_calls or [] %}{%- set call = call.function if call.function is defined else call %}"
    # A sampled call may parse without a name or arguments: rendered empty, as the model's JSON left them.
    "{{ '<tool_call>\\n{\"name\": \"' + (call.name | default('')) + '\", \"arguments\": ' }}"
    "{{ (call.arguments | default({})) | tojson }}"
    "{{ '}\\n</tool_call>' }}"
    "{%- endfor %}{{ '<|im_end|>\\n' }}{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}"
)


def _contexts(rng: random.Random, count: int) -> list[str]:
    """Chat prefixes ending in the assistant's header, as CHAT_TEMPLATE renders the smoke's prompts with tools."""
    contexts = []
    for _ in range(count):
        question = rng.choice(_QUESTIONS).format(*(rng.randint(0, 15) for _ in range(3)))
        system = "<|im_start|>system\nTools: add <|im_end|>\n"
        contexts.append(f"{system}<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n")
    return contexts


def fit_tool_caller(model: Any, tokenizer_file: str, seed: int) -> None:
    """Train ``model`` in place (float32, CPU) to answer each context with the tool call; deterministic in ``seed``."""
    import torch
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(tokenizer_file)
    answer = tokenizer.encode(TOOL_CALL_TEXT + "<|im_end|>").ids
    rng = random.Random(seed)
    sequences = []
    for context in _contexts(rng, 16):
        prefix = tokenizer.encode(context).ids
        sequences.append((prefix + answer, len(prefix)))
    width = max(len(ids) for ids, _ in sequences)
    pad = tokenizer.token_to_id("<|endoftext|>")
    input_ids = torch.full((len(sequences), width), pad, dtype=torch.long)
    labels = torch.full_like(input_ids, -100)
    attention = torch.zeros_like(input_ids)
    for row, (ids, start) in enumerate(sequences):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        labels[row, start : len(ids)] = torch.tensor(ids[start:])
        attention[row, : len(ids)] = 1
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model.train()
        optimizer = torch.optim.Adam(model.parameters(), lr=FIT_LEARNING_RATE)
        for _ in range(FIT_STEPS):
            loss = model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
