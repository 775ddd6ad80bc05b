"""Probe where trl's GRPO (or SFT) trainer puts a thinking turn's reasoning under trl's Qwen3-family templates; JSON.

    python -m matrix.probe_think_block --mode plain --output plain.json
    python -m matrix.probe_think_block --mode plain --set template=qwen3_5_think --output think.json
    python -m matrix.probe_think_block --mode plain --set history=none --output control.json

Trains GRPO (--steps) with a tool on conversational prompts that carry an earlier assistant turn as a thinking model
wrote it after a generation prompt that opens the think block (Qwen3.5 / 3.6 Think, Qwen3-Thinking-2507): the
reasoning, ``</think>`` and the answer, no ``<think>``. The tokenizer carries a chat template read from the installed
trl (``--set template=NAME``: trl/chat_templates/NAME.jinja; default qwen3, Qwen3's). With tools, trl renders the
prompts with its training variant of the template where trl's prefix check fails on the original (Qwen3's does;
Qwen3.5's and 3.6's pass, and their originals render). trl 1.1-1.8's Qwen3-family training variants split out the
reasoning only when the content holds both tags (trl#6361), so the turn renders as an empty think block, then the
reasoning and a stray ``</think>``: the probe's error. ``--set history=none``: prompts of one user turn, which every
trl renders alike. ``--set trainer=sft``: SFT with assistant_only_loss on that turn, which renders it with the training
variant of any of these templates (Qwen3.5 Think's too). The result holds the weights' digest after training. Exits
non-zero on error, after writing it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grpo_compat.testing import multi_turn
from grpo_compat.testing.smoke import (
    ProbeFailed,
    digest,
    length_reward,
    parse_args,
    record_prompts,
    run_smoke,
    start_probe,
)

REASONING = "Two plus two is four."
ANSWER = "The answer is 4."
# What the model generated after the prompt's "<think>\n": no opening tag of its own.
GENERATED_TURN = f"{REASONING}\n</think>\n\n{ANSWER}"
INSIDE = f"<think>\n{REASONING}\n</think>"
# The earlier exchange: a question and that turn.
EARLIER = ({"role": "user", "content": "What is 2 plus 2?"}, {"role": "assistant", "content": GENERATED_TURN})


def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


def conversations(history: str, n: int = 4) -> list[list[dict[str, str]]]:
    prompts = []
    for i in range(n):
        question = {"role": "user", "content": f"What is {i} plus {i + 1}?"}
        prompts.append([*EARLIER, question] if history == "completion" else [question])
    return prompts


def installed_template(name: str) -> str:
    template = multi_turn.shipped_chat_template(name)
    if template is None:
        raise ProbeFailed(f"the installed trl ships no chat template {name}.jinja")
    return template


def earlier_turn(rendered: str) -> str:
    """The earlier assistant turn of a rendered prompt, up to its end-of-turn token."""
    start = rendered.find("<|im_start|>assistant")
    return rendered[start : rendered.find("<|im_end|>", start) + len("<|im_end|>")] if start >= 0 else ""


def sft_probe(args: argparse.Namespace, output_dir: str, result: dict, model_dir: Path, template: str) -> None:
    """SFT with assistant_only_loss on the earlier turn itself: the text of it that the loss trains on."""
    import transformers
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    tokenizer.chat_template = installed_template(template)
    config = SFTConfig(
        output_dir=output_dir,
        assistant_only_loss=True,
        max_steps=args.steps,
        seed=args.seed,
        per_device_train_batch_size=2,
        learning_rate=1e-3,
        use_cpu=True,
        bf16=False,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        **args.config_overrides,
    )
    data = Dataset.from_dict({"messages": [list(EARLIER)] * 4})
    trainer = SFTTrainer(model=str(model_dir), args=config, train_dataset=data, processing_class=tokenizer)
    row = trainer.train_dataset[0]
    # trl 1.8 marks the untrained tokens' labels -100; trl 1.5-1.7 keep a 0/1 assistant mask
    trained = [label != -100 for label in row["labels"]] if "labels" in row else row["assistant_masks"]
    trained_on = [token for token, kept in zip(row["input_ids"], trained, strict=True) if kept]
    turn = tokenizer.decode(trained_on)
    trainer.train()
    result.update(trained_on=turn, training_template=trainer.chat_template is not None)
    result["weights"] = digest(trainer.model.state_dict())
    if REASONING in turn and INSIDE not in turn:
        raise ProbeFailed(
            f"SFT's assistant-only loss trains on the turn with its reasoning outside its think block: {turn!r}"
        )
    result["summary"] = (
        f"SFT trains on the turn with its reasoning inside its think block (weights {result['weights'][:12]})"
    )


def probe(args: argparse.Namespace, output_dir: str, result: dict) -> None:
    history = args.config_overrides.pop("history", "completion")
    template = args.config_overrides.pop("template", "qwen3")
    trainer_kind = args.config_overrides.pop("trainer", "grpo")
    model_dir = start_probe(args, result)
    if trainer_kind == "sft":
        return sft_probe(args, output_dir, result, model_dir, template)
    import transformers
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from matrix.smoke_grpo import config_kwargs

    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    tokenizer.chat_template = installed_template(template)
    kwargs, _ = config_kwargs(GRPOConfig, output_dir, args)
    trainer = GRPOTrainer(
        model=str(model_dir),
        reward_funcs=length_reward,
        args=GRPOConfig(**kwargs),
        train_dataset=Dataset.from_dict({"prompt": conversations(history)}),
        processing_class=tokenizer,
        tools=[add],
    )
    rendered = record_prompts(trainer, tokenizer)
    trainer.train()
    turn = earlier_turn(rendered[0])
    result.update(
        prompt=rendered[0],
        earlier_turn=turn,
        training_template=trainer.chat_template is not None,
        weights=digest(trainer.model.state_dict()),
    )
    if REASONING in turn and INSIDE not in turn:
        raise ProbeFailed(
            f"the earlier turn's reasoning lies outside its think block in the prompts the policy trains on: "
            f"{turn!r} (the model wrote {GENERATED_TURN!r} after the prompt's <think>)"
        )
    where = "inside its think block" if INSIDE in turn else "dropped, as at inference" if turn else ""
    seen = f"the earlier turn's reasoning {where}" if where else "no earlier turn"
    result["summary"] = f"{seen} in the {len(rendered)} prompt batches trained on (weights {result['weights'][:12]})"


def main(argv: list[str] | None = None) -> int:
    description = __doc__.splitlines()[0]
    return run_smoke("probe_think_block", parse_args(description, "GRPOConfig field (JSON value)", argv), probe)


if __name__ == "__main__":
    sys.exit(main())
