"""trl.reward-dry-run on environment and tool runs: what trl would fail on after the model loaded is refused first.

The checks run against the installed trl 1.16 and transformers (their own tool schemas); the real GRPOTrainer is
used where the timing matters (a model path that does not exist: upstream fails loading it, so a refusal proves
the check came first). Real runs are the matrix's, in every cell with trl's environments (matrix/runs.py
MULTI_TURN): the `tools` / `environments` smoke pairs and `environments-unknown-undrawn` (a misnamed row the run
never draws), each judged trained through trl's environment path, with a method of an environment among the tools,
and patched with the plain run's weights and environment resets (the check builds, never resets, an environment);
and the reproducers environment-name-unknown, environment-column-removed, tool-without-docstring.
"""

from __future__ import annotations

import logging

import pytest

from grpo_compat.core.errors import GRPOSettingsError, RewardFunctionError
from grpo_compat.fixes import environments
from grpo_compat.fixes.rewards import dry_run
from grpo_compat.testing import multi_turn

NAMED = {"counter": multi_turn.CounterEnvironment, "echo": multi_turn.EchoEnvironment}


class Config:
    remove_unused_columns = False


def dataset(**columns):
    from datasets import Dataset

    return Dataset.from_dict(columns)


def routed(*names: str):
    return dataset(**multi_turn.conversational_prompts(count=len(names), environments=names))


def test_a_dataset_whose_every_example_names_a_missing_environment_is_refused_with_the_names():
    built = environments.check(NAMED, [], routed("counter", "echo", "counter"), Config())
    assert set(built) == {"counter", "echo"}
    with pytest.raises(GRPOSettingsError, match=r"2 example\(s\) .* lacks: 'counters' \(did you mean 'counter'\?\)"):
        environments.check(NAMED, [], routed("counters", "counters"), Config())


def test_a_dataset_whose_some_examples_name_a_missing_environment_is_warned_not_refused(caplog):
    # Plain trl trains until a batch draws a misnamed example, and to the end if none is drawn: no refusal
    with caplog.at_level(logging.WARNING, logger="grpo_compat"):
        built = environments.check(NAMED, [], routed("counter", "counters", "echo", "counters"), Config())
    assert set(built) == {"counter", "echo"}
    (line,) = [record.getMessage() for record in caplog.records]
    assert "2 example(s) of the dataset name an environment environment_factory lacks: 'counters'" in line
    assert "(did you mean 'counter'?)" in line and "stops the run with a ValueError at that batch" in line


def test_a_dict_of_environments_needs_the_environment_column_and_remove_unused_columns_off():
    with pytest.raises(GRPOSettingsError, match=r"the dataset has none .*Fix: add an 'environment' column"):
        environments.check(NAMED, [], dataset(prompt=["a", "b"]), Config())
    removing = Config()
    removing.remove_unused_columns = True
    with pytest.raises(GRPOSettingsError, match=r"remove_unused_columns=True removes .*Fix: remove_unused_columns="):
        environments.check(NAMED, [], routed("counter", "echo"), removing)


def test_a_streaming_dataset_is_not_read_ahead():
    assert environments.check(NAMED, [], routed("counters").to_iterable_dataset(), Config()).keys() == NAMED.keys()


class RandomPuzzle(multi_turn.CounterEnvironment):
    def __init__(self) -> None:
        import random

        import torch

        super().__init__()
        self.count = random.randint(0, 9) + int(torch.randint(0, 9, ()))


def test_an_environment_is_built_once_per_name_never_reset_and_leaves_the_random_state_alone():
    import torch

    resets = len(multi_turn.RESETS)
    built = environments.check(multi_turn.CounterEnvironment, [multi_turn.add], routed("x"), Config())
    assert list(built) == [None] and isinstance(built[None], multi_turn.CounterEnvironment)
    assert len(multi_turn.RESETS) == resets
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    environments.check(RandomPuzzle, [], routed("x"), Config())
    assert torch.equal(torch.rand(3), expected)


class NoReset:
    def step(self, action: str) -> str:
        """Act.

        Args:
            action: What to do.
        """
        return action


class StrictReset(multi_turn.CounterEnvironment):
    def reset(self) -> None:  # trl passes the example's columns by keyword
        return None


class PromptOnlyReset(multi_turn.CounterEnvironment):
    def reset(self, prompt: list) -> None:
        return None


def test_reset_is_checked_against_the_columns_trl_passes_it():
    data = dataset(prompt=["a", "b"], answer=["1", "2"])
    with pytest.raises(GRPOSettingsError, match=r"PromptOnlyReset.reset cannot take prompt, answer"):
        environments.check(PromptOnlyReset, [], data, Config())
    removing = Config()
    removing.remove_unused_columns = True  # trl passes only the prompt: this reset takes it
    assert environments.check(PromptOnlyReset, [], data, removing).keys() == {None}


class ScoredWithArguments(multi_turn.CounterEnvironment):
    def get_reward(self, completion: str) -> float:  # trl calls get_reward()
        return 0.0


class UndocumentedTool(multi_turn.CounterEnvironment):
    def peek(self, index: int) -> int:
        return index


def broken_factory():
    raise ConnectionError("no server at localhost:8000")


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        (NoReset, r"built a NoReset, which has no reset method.*def reset\(self, \*\*kwargs\)"),
        (StrictReset, r"StrictReset.reset cannot take prompt, environment .*Fix: end its parameters with \*\*kwargs"),
        (ScoredWithArguments, r"ScoredWithArguments.get_reward cannot take no arguments .*def get_reward\(self\)"),
        (UndocumentedTool, r"UndocumentedTool's tool 'peek': transformers cannot describe it .*no docstring"),
        (broken_factory, r"environment_factory\(\) raised ConnectionError: no server at localhost:8000"),
        ("CounterEnvironment", r"environment_factory is a str, not a callable"),
    ],
    ids=["no-reset", "reset-without-kwargs", "get-reward-with-arguments", "undocumented-method", "raises", "a-name"],
)
def test_an_environment_trl_would_fail_on_is_refused_with_the_fix(factory, message):
    with pytest.raises(GRPOSettingsError, match=message):
        environments.check(factory, [], routed("x"), Config())


def add_positional(a: int, b: int, /) -> int:
    """Add two integers.

    Args:
        a: The first integer.
        b: The second integer.
    """
    return a + b


def add_untyped(a, b: int) -> int:
    """Add two integers.

    Args:
        a: The first integer.
        b: The second integer.
    """
    return a + b


def test_a_tool_is_refused_when_transformers_cannot_write_its_schema_or_trl_cannot_call_it_by_keyword():
    from transformers.utils import get_json_schema

    environments.check(None, [multi_turn.add], None, Config())  # documented, typed, keyword-capable
    with pytest.raises(GRPOSettingsError, match=r"tool 'add_undocumented': .*DocstringParsingException.*Fix: give"):
        environments.check(None, [multi_turn.add_undocumented], None, Config())
    with pytest.raises(GRPOSettingsError, match=r"tool 'add_untyped': .*TypeHintParsingException"):
        environments.check(None, [add_untyped], None, Config())
    # transformers writes a schema for a positional-only tool, and trl calls tool(**arguments): every call fails
    assert list(get_json_schema(add_positional)["function"]["parameters"]["properties"]) == ["a", "b"]
    with pytest.raises(TypeError, match="positional-only"):
        add_positional(**{"a": 1, "b": 2})
    with pytest.raises(GRPOSettingsError, match=r"tool 'add_positional' cannot take a, b .*trains on without a word"):
        environments.check(None, [add_positional], None, Config())


def test_the_checks_that_run_user_code_follow_the_reward_check_switch(monkeypatch):
    monkeypatch.setenv("GRPO_COMPAT_REWARD_CHECK", "0")
    assert environments.check(broken_factory, [], routed("x"), Config()) == {}  # the factory is not called
    with pytest.raises(GRPOSettingsError, match="'counters'"):  # reads only the data: still checked
        environments.check(NAMED, [], routed("counters"), Config())


def test_a_reward_that_reads_environments_is_dry_run_with_them_not_refused():
    data = routed("counter", "echo")
    built = environments.check(NAMED, [], data, Config())

    def more(rows, generations):
        return {"environments": environments.environments_per_completion(built, rows, generations, routed=True)}

    dry_run(multi_turn.environment_reward, data, 4, "1.16.0", more)
    # Without them (grpo_compat before this check) the same reward was refused on a run trl trains.
    with pytest.raises(RewardFunctionError, match="needs 'environments'"):
        dry_run(multi_turn.environment_reward, data, 4, "1.16.0")
    sent = environments.environments_per_completion(built, list(data), 2, routed=True)
    assert [type(e).__name__ for e in sent] == ["CounterEnvironment"] * 2 + ["EchoEnvironment"] * 2


def test_the_real_trainer_refuses_before_loading_the_model_and_lets_good_environments_through():
    import grpo_compat

    grpo_compat.apply()
    from trl import GRPOConfig, GRPOTrainer

    config = GRPOConfig(output_dir="unused", num_generations=2, per_device_train_batch_size=2, use_cpu=True, bf16=False)
    reward = multi_turn.environment_reward
    with pytest.raises(GRPOSettingsError, match="'counters'"):
        GRPOTrainer(
            model="/nonexistent/model", reward_funcs=reward, args=config, train_dataset=routed("counters", "counters"),
            environment_factory=NAMED,
        )  # fmt: skip
    with pytest.raises(OSError):  # warned only; the reward dry run draws the routable row, then upstream loads
        GRPOTrainer(
            model="/nonexistent/model", reward_funcs=reward, args=config, train_dataset=routed("counters", "echo"),
            environment_factory=NAMED,
        )  # fmt: skip
    with pytest.raises(GRPOSettingsError, match="tool 'add_undocumented'"):
        GRPOTrainer(
            model="/nonexistent/model", reward_funcs=reward, args=config, train_dataset=routed("x", "y"),
            tools=[multi_turn.add_undocumented], environment_factory=multi_turn.CounterEnvironment,
        )  # fmt: skip
    with pytest.raises(OSError):  # every check passed; upstream then fails to load the model
        GRPOTrainer(
            model="/nonexistent/model", reward_funcs=reward, args=config, train_dataset=routed("counter", "echo"),
            tools=[multi_turn.add], environment_factory=NAMED,
        )  # fmt: skip
