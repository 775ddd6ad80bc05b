"""A local tool and local environments for multi-turn GRPO smoke runs (trl's ``tools`` / ``environment_factory``).

Nothing here reads the network. The tiny model writes random tokens, so its tool calls rarely parse: a run is
known to have gone through trl's environment code path by the environments' ``reset`` calls (counted in
:data:`RESETS`) and by the ``environments`` its reward function receives. Importing this module imports neither
torch nor trl.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# --multi-turn CASE of the smoke script: what it hands GRPOTrainer (see trainer_arguments()).
CASES = (
    "tools",  # a standalone tool and one environment (environment_factory=CounterEnvironment)
    "environments",  # two named environments (a dict), routed by the dataset's `environment` column
    "unknown-environment",  # the dataset names an environment the dict lacks (trl PRs #6001, #6002)
    "late-unknown-environment",  # only its last row does: a run that stops before drawing it trains
    "undocumented-tool",  # a tool without a docstring: transformers cannot write its schema
    "tool-caller",  # the standalone tool alone, for the tiny model fitted to call it (--model-arch qwen2-tool-caller)
    "tool-caller-long-result",  # the same call answered at length: the re-rendered conversation grows (trl #5144)
)
# How many times an environment's reset() ran in this process: trl resets one environment per rollout.
RESETS: list[str] = []


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first integer.
        b: The second integer.

    Returns:
        The sum of the two integers.
    """
    return a + b


# How many times _add_at_length answered in this process: its answers grow by turns, so a group of identical calls
# gets rewards that spread (conversation_reward reads the length) and GRPO has something to learn.
ADD_AT_LENGTH_CALLS: list[int] = []


def _add_at_length(a: int, b: int) -> str:
    """Add two integers.

    Args:
        a: The first integer.
        b: The second integer.

    Returns:
        The sum, explained.
    """
    ADD_AT_LENGTH_CALLS.append(a + b)
    return f"The sum of {a} and {b} is {a + b}. " * (4 + len(ADD_AT_LENGTH_CALLS) % 3)


_add_at_length.__name__ = "add"  # the tool the fitted model calls; 60 tokens of result or more


def add_undocumented(a: int, b: int) -> int:
    return a + b


class CounterEnvironment:
    """An environment whose one tool counts up; reset() starts it at 0."""

    def __init__(self) -> None:
        self.count = 0

    def reset(self, **kwargs: Any) -> str | None:
        RESETS.append(type(self).__name__)
        self.count = 0
        return None

    def increment(self, step: int) -> str:
        """Add a step to the counter.

        Args:
            step: How much to add.

        Returns:
            The counter after the step.
        """
        self.count += step
        return str(self.count)


class EchoEnvironment:
    """An environment that repeats what the model says; reset() appends an instruction to the prompt."""

    def __init__(self) -> None:
        self.said: list[str] = []

    def reset(self, **kwargs: Any) -> str | None:
        RESETS.append(type(self).__name__)
        self.said = []
        return " Repeat after me."

    def echo(self, text: str) -> str:
        """Repeat a text.

        Args:
            text: The text to repeat.

        Returns:
            The same text.
        """
        self.said.append(text)
        return text


def environment_reward(completions: list, environments: list, **kwargs: Any) -> list[float]:
    """Length of the completion plus what its environment saw: reads ``environments``, as trl's examples do."""
    return [
        len(str(c)) / 10.0 + len(set(str(c))) / 20.0 + _state(env)
        for c, env in zip(completions, environments, strict=True)
    ]


def conversation_reward(completions: list, **kwargs: Any) -> list[float]:
    """Length of the completion (tool turns and results included), for runs without environments."""
    return [len(str(c)) / 10.0 + len(set(str(c))) / 20.0 for c in completions]


def _state(environment: Any) -> float:
    return float(getattr(environment, "count", 0)) + len(getattr(environment, "said", ()))


def conversational_prompts(count: int = 16, environments: tuple[str, ...] = ()) -> dict[str, list]:
    """Dataset columns: conversational prompts, and with ``environments`` an `environment` column cycling them."""
    columns: dict[str, list] = {
        "prompt": [
            [{"role": "user", "content": f"Question {i}: add {i * 7 % 13} and {i * 5 % 11}."}] for i in range(count)
        ]
    }
    if environments:
        columns["environment"] = [environments[i % len(environments)] for i in range(count)]
    return columns


def trainer_arguments(case: str) -> tuple[dict[str, Any], dict[str, list]]:
    """(GRPOTrainer keyword arguments but the model, args and processing class; the dataset's columns) of a case."""
    environments = {"counter": CounterEnvironment, "echo": EchoEnvironment}
    if case == "tools":
        return {"tools": [add], "environment_factory": CounterEnvironment}, conversational_prompts()
    if case == "environments":
        return {"tools": [add], "environment_factory": environments}, conversational_prompts(
            environments=("counter", "echo")
        )
    if case == "tool-caller":
        return {"tools": [add]}, conversational_prompts()
    if case == "tool-caller-long-result":
        return {"tools": [_add_at_length]}, conversational_prompts()
    if case == "unknown-environment":  # every row names "counters", a typo: the first batch holds one
        return {"environment_factory": environments}, conversational_prompts(environments=("counters",))
    if case == "late-unknown-environment":
        columns = conversational_prompts(environments=("counter", "echo"))
        columns["environment"][-1] = "counters"
        return {"tools": [add], "environment_factory": environments}, columns
    return {"tools": [add_undocumented], "environment_factory": CounterEnvironment}, conversational_prompts()


def tool_chat_template() -> str:
    """trl's own Qwen2.5 chat template (it renders tool calls; trl knows how to parse its responses).

    The tiny model's tokenizer has Qwen2's special tokens, but its own template renders no tools, which trl refuses.
    trl before 1.0 ships no template files: its Qwen3 template, the one it knows how to parse there.
    """
    template = shipped_chat_template("qwen2_5")
    if template is not None:
        return template
    from trl.chat_template_utils import qwen3_chat_template

    return qwen3_chat_template


def shipped_chat_template(name: str) -> str | None:
    """A chat template file the installed trl ships (trl recognises a template by its exact text); None if none."""
    import trl

    path = Path(trl.__file__).parent / "chat_templates" / f"{name}.jinja"
    return path.read_text(encoding="utf-8") if path.is_file() else None
