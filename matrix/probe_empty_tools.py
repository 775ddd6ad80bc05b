"""Probe the prompts trl's GRPOTrainer renders for a run with no tools; writes a JSON result.

    python -m matrix.probe_empty_tools --mode plain --output plain.json
    python -m matrix.probe_empty_tools --mode plain --set template=if-tools --output control.json

Trains two GRPO steps on conversational prompts with no ``tools=`` argument, under a chat template that writes a
tool section whenever ``tools is not none``, as Llama 3.x's templates do (``--set template=if-tools``: one that
tests ``if tools``, as Qwen's do, where an empty list renders nothing). trl 0.26.0 and 0.28-0.29 store
``tools or []`` and render every prompt with ``tools=[]`` (trl#5379), so that template's tool section lands in
every prompt the policy trains on: the probe's error. The result holds the weights' digest after training.
Exits non-zero on error, after writing the JSON.
"""

from __future__ import annotations

import argparse
import sys

from grpo_compat.testing.smoke import (
    ProbeFailed,
    digest,
    length_reward,
    parse_args,
    record_prompts,
    run_smoke,
    start_probe,
)

TOOL_SECTION = "Environment: tools"
# A system turn for tools, written when the template's test says there are tools; then the conversation.
_TURNS = """{%- for message in messages %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endfor %}{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""
_TOOL_TURN = "<|im_start|>system\n" + TOOL_SECTION + "\nYou may call: {{ tools | tojson }}<|im_end|>\n"
TEMPLATES = {
    "is-not-none": "{%- if tools is defined and tools is not none %}" + _TOOL_TURN + "{%- endif %}" + _TURNS,
    "if-tools": "{%- if tools %}" + _TOOL_TURN + "{%- endif %}" + _TURNS,
}


def conversations(n: int = 8) -> list[list[dict[str, str]]]:
    return [[{"role": "user", "content": f"What is {i * 7 % 13} plus {i * 5 % 11}?"}] for i in range(n)]


def probe(args: argparse.Namespace, output_dir: str, result: dict) -> None:
    template = TEMPLATES[args.config_overrides.pop("template", "is-not-none")]
    model_dir = start_probe(args, result)
    import transformers
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from matrix.smoke_grpo import config_kwargs

    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    tokenizer.chat_template = template
    kwargs, _ = config_kwargs(GRPOConfig, output_dir, args)
    trainer = GRPOTrainer(
        model=str(model_dir),
        reward_funcs=length_reward,
        args=GRPOConfig(**kwargs),
        train_dataset=Dataset.from_dict({"prompt": conversations()}),
        processing_class=tokenizer,
    )
    rendered = record_prompts(trainer, tokenizer)
    trainer.train()
    result.update(prompt=rendered[0], weights=digest(trainer.model.state_dict()))
    if TOOL_SECTION in rendered[0]:
        raise ProbeFailed(
            f"the run passed no tools, yet the prompts the policy trains on carry the template's tool section "
            f"({TOOL_SECTION!r}): trl rendered them with tools=[]"
        )
    batches = len(rendered)
    result["summary"] = f"no tool section in the {batches} prompt batches trained on (weights {result['weights'][:12]})"


def main(argv: list[str] | None = None) -> int:
    description = __doc__.splitlines()[0]
    return run_smoke("probe_empty_tools", parse_args(description, "GRPOConfig field (JSON value)", argv), probe)


if __name__ == "__main__":
    sys.exit(main())
