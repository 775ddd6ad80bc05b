"""trl.reward-dry-run: reward functions called once, the way each trl version calls them, before the model loads.

The keyword arguments by version come from docs/investigations/reward-contracts-2026-11.md; the real trl
1.16 GRPOTrainer is used where the refusal's timing matters (a model path that does not exist: upstream
fails loading it, so a refusal proves the dry run came first). Matrix reproducer: reward-without-kwargs.
"""

from __future__ import annotations

import functools
import logging
import random

import pytest

from grpo_compat.core.errors import RewardFunctionError
from grpo_compat.fixes.rewards import dry_run, trl_keyword_arguments

ROWS = [{"prompt": "count 1", "solution": "1"}, {"prompt": "count 2", "solution": "2"}]
CHAT_ROWS = [{"prompt": [{"role": "user", "content": "count 1"}]}, {"prompt": [{"role": "user", "content": "2"}]}]


@pytest.fixture
def warnings():
    records: list[str] = []
    handler = logging.Handler(level=logging.WARNING)
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("grpo_compat")
    logger.addHandler(handler)
    yield records
    logger.removeHandler(handler)


def length(completions, **kwargs):
    return [float(len(str(c))) for c in completions]


def test_the_keyword_arguments_follow_the_installed_trl():
    assert set(trl_keyword_arguments("0.17.0", ROWS, 2)) == {"prompts", "completions", "solution"}
    assert "completion_ids" in trl_keyword_arguments("0.18.0", ROWS, 2)
    assert "trainer_state" in trl_keyword_arguments("0.20.0", ROWS, 2)
    assert {"log_extra", "log_metric"} <= set(trl_keyword_arguments("1.0.0", ROWS, 2))
    kwargs = trl_keyword_arguments("1.16.0", ROWS, 3)
    assert len(kwargs["completions"]) == len(kwargs["solution"]) == 6 and kwargs["prompts"][3] == "count 2"


def test_a_function_without_kwargs_is_refused_with_every_argument_trl_passes():
    def strict_length(completions):
        return [1.0] * len(completions)

    with pytest.raises(RewardFunctionError) as refused:
        dry_run([strict_length], ROWS, 2, "1.16.0")
    message = str(refused.value)
    assert (
        "'strict_length' does not accept the keyword arguments prompts, completion_ids, solution, trainer_state"
        in message
    )
    assert "def strict_length(completions, **kwargs)" in message and "GRPO_COMPAT_REWARD_CHECK=0" in message


def test_a_column_the_dataset_lacks_is_refused_as_a_parameter_or_a_kwargs_key():
    def by_parameter(completions, answer, **kwargs):
        return [0.0] * len(completions)

    def by_key(completions, **kwargs):
        return [float(a == "1") for a in kwargs["answer"]]

    for function in (by_parameter, by_key):
        with pytest.raises(
            RewardFunctionError,
            match=r"'answer'.*the dataset (has no column 'answer'|lacks) \(its columns: prompt, solution\)",
        ):
            dry_run([function], ROWS, 2, "1.16.0")


def test_a_key_error_deeper_in_a_library_is_a_warning_not_a_refusal(warnings):
    def table_lookup(completions, **kwargs):
        return [{"a": 1.0}[c] for c in completions]  # a KeyError of the function's own data, in a comprehension

    dry_run([table_lookup], ROWS, 2, "1.16.0")
    assert any("'table_lookup' raised KeyError" in w and "made-up completions" in w for w in warnings)


@pytest.mark.parametrize(
    ("returned", "problem"),
    [
        (lambda n: [1.0], "returned 1 rewards for 4 completions (2 prompts x 2 generations); every completion"),
        (lambda n: [1.0] * (n + 1), "returned 5 rewards for 4 completions"),
        (lambda n: 1.0, "returned float 1.0, not a list"),
        (lambda n: ["1"] * n, "returned str '1' among its rewards, which is not a number"),
    ],
    ids=["one-value", "one-too-many", "a-float", "strings"],
)
def test_rewards_trl_cannot_score_are_refused(returned, problem):
    def bad(completions, **kwargs):
        return returned(len(completions))

    with pytest.raises(RewardFunctionError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        dry_run([bad], ROWS, 2, "1.16.0")


def test_a_single_value_is_named_as_a_silent_broadcast_where_trl_broadcasts_it():
    def one(completions, **kwargs):
        return [1.0]

    with pytest.raises(RewardFunctionError, match=r"trl 1\.9\.2 would copy that value to every completion"):
        dry_run([one], ROWS, 2, "1.9.2")


def test_none_is_refused_only_where_trl_cannot_score_it(warnings):
    def unsure(completions, **kwargs):
        return [None] * len(completions)

    with pytest.raises(RewardFunctionError, match=r"trl 0\.15\.2 cannot score"):
        dry_run([unsure], ROWS, 2, "0.15.2")
    dry_run([unsure], ROWS, 2, "1.16.0")
    assert any("returned None for every completion" in w for w in warnings)


def test_async_rewards_run_on_their_own_loop_where_trl_awaits_them_and_are_refused_where_it_cannot():
    calls = []

    async def judged(completions, **kwargs):
        calls.append(len(completions))
        return [float(len(c)) for c in completions]

    class AsyncJudge:
        __name__ = "AsyncJudge"

        async def __call__(self, completions, **kwargs):
            return [0.5] * len(completions)

    dry_run([judged, AsyncJudge()], ROWS, 2, "1.16.0")
    assert calls == [4]
    with pytest.raises(RewardFunctionError, match=r"'judged' is async.*pip install \"trl>=0.27\""):
        dry_run([judged], ROWS, 2, "0.20.0")
    with pytest.raises(RewardFunctionError, match=r"'AsyncJudge' is async.*pip install \"trl>=1.14\""):
        dry_run([AsyncJudge()], ROWS, 2, "1.13.0")


def test_callables_without_a_name_are_refused_only_before_trl_1_9():
    class Scorer:
        def __call__(self, completions, **kwargs):
            return [1.0] * len(completions)

    scaled = functools.partial(length)
    for function in (Scorer(), scaled):
        with pytest.raises(RewardFunctionError, match="has no __name__"):
            dry_run([function], ROWS, 2, "1.8.0")
        dry_run([function], ROWS, 2, "1.9.0")


def test_conversational_prompts_get_message_list_completions(warnings):
    def content_length(completions, **kwargs):
        return [float(len(c[0]["content"])) for c in completions]

    def stripped(completions, **kwargs):
        return [float(len(c.strip())) for c in completions]

    dry_run([content_length], CHAT_ROWS, 3, "1.16.0")
    assert warnings == []
    dry_run([stripped], CHAT_ROWS, 3, "1.16.0")  # fails on message lists: said, not refused
    assert any("'stripped' raised AttributeError" in w for w in warnings)


def test_a_reward_constant_over_different_completions_is_a_warning(warnings):
    def correct_only(completions, **kwargs):
        return [0.0] * len(completions)

    dry_run([correct_only], ROWS, 4, "1.16.0")
    (warning,) = warnings
    assert "gave all 4 different completions of each prompt the same reward (0.0)" in warning


def test_the_check_can_be_turned_off_and_leaves_every_random_generator_as_it_was(monkeypatch):
    import numpy
    import torch

    def noisy(completions, **kwargs):
        return [random.random() + float(numpy.random.rand()) + float(torch.rand(1)) for _ in completions]

    before = random.random(), numpy.random.rand(), float(torch.rand(1))
    random.seed(0), numpy.random.seed(0), torch.manual_seed(0)
    dry_run([noisy], ROWS, 2, "1.16.0")
    after = random.random(), numpy.random.rand(), float(torch.rand(1))
    random.seed(0), numpy.random.seed(0), torch.manual_seed(0)
    assert after == (random.random(), numpy.random.rand(), float(torch.rand(1))) and before

    monkeypatch.setenv("GRPO_COMPAT_REWARD_CHECK", "0")
    dry_run([lambda completions: None], ROWS, 2, "1.16.0")  # would be refused


def test_the_real_trainer_refuses_before_loading_the_model_and_lets_a_good_reward_through():
    import grpo_compat

    grpo_compat.apply()
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    config = GRPOConfig(output_dir="unused", num_generations=2, per_device_train_batch_size=2, use_cpu=True, bf16=False)
    data = Dataset.from_dict({"prompt": ["a", "b"]})

    def strict_length(completions):
        return [1.0] * len(completions)

    with pytest.raises(RewardFunctionError, match="'strict_length' does not accept"):
        GRPOTrainer(model="/nonexistent/model", reward_funcs=strict_length, args=config, train_dataset=data)
    with pytest.raises(OSError):  # the dry run passed; upstream then fails to load the model
        GRPOTrainer(model="/nonexistent/model", reward_funcs=[length], args=config, train_dataset=data)
    streaming = data.to_iterable_dataset()  # not read: a streaming dataset may come from the network
    with pytest.raises(OSError):
        GRPOTrainer(model="/nonexistent/model", reward_funcs=strict_length, args=config, train_dataset=streaming)


def test_the_count_check_keeps_the_name_the_signature_the_async_kind_and_the_rewards():
    import asyncio
    import inspect

    from grpo_compat.fixes.rewards import count_checked, trl_caller

    async def judged(prompts, completions, **kwargs):
        return [0.25] * (len(completions) if kwargs.get("whole", True) else 1)

    checked_sync, checked_async = (
        count_checked(length, trl_caller("0.29.1")),
        count_checked(judged, trl_caller("0.29.1")),
    )
    assert (checked_sync.__name__, checked_async.__name__) == ("length", "judged")
    assert inspect.signature(checked_async) == inspect.signature(judged)
    assert inspect.iscoroutinefunction(checked_async) and not inspect.iscoroutinefunction(checked_sync)
    assert checked_sync(prompts=["p"], completions=["ab", "c"]) == [2.0, 1.0]
    assert asyncio.run(checked_async(prompts=["p"], completions=["a", "b"])) == [0.25, 0.25]
    with pytest.raises(RewardFunctionError, match="'judged' returned 1 rewards for 2 completions during training"):
        asyncio.run(checked_async(prompts=["p"], completions=["a", "b"], whole=False))


@pytest.mark.slow
def test_a_wrong_count_the_dry_run_did_not_see_is_refused_at_the_step_where_trl_would_broadcast_it(
    tmp_path, monkeypatch
):
    from tests.helpers import smoke

    # The same run plain trains on, learning nothing (trl broadcasts the one value): the plain run of trl-0.16's
    # matrix reproducer reward-one-value-broadcast. The wrapped rewards pass through untouched: the patched run of
    # its single pair has the plain run's weights, the count check on every reward call.
    monkeypatch.setenv("GRPO_COMPAT_REWARD_CHECK", "0")  # no dry run: the count is seen first in training
    patched = smoke("trl-0.16", "patched", tmp_path / "model", tmp_path, flags=("--reward", "one-value"))
    assert patched["error"].startswith(
        "RewardFunctionError: reward function 'one_value' returned 1 rewards for 4 completions during training "
        "(trl 0.16.1); trl < 1.10 copies one value to every completion without a word"
    )


# ms-swift: reward_func(completions, **kwargs), the generated rows batched by column (swift.reward-dry-run). The
# keyword arguments by version were read in ms-swift's tags 3.5-4.5 and recorded from real 3.5.3, 3.12.6 and 4.6.0 runs.
SWIFT_ROWS = [
    {"messages": [{"role": "user", "content": "count 1"}], "solution": "1"},
    {"messages": [{"role": "user", "content": "count 2"}], "solution": "2"},
]


class SwiftORM:
    """What a user's ms-swift ORM looks like (swift.rewards.ORM is a plain base class)."""

    def __call__(self, completions, **kwargs):
        return [float(len(c)) for c in completions]


def test_swift_keyword_arguments_follow_the_installed_ms_swift():
    from grpo_compat.fixes.rewards import swift_keyword_arguments

    assert set(swift_keyword_arguments("3.5.3", SWIFT_ROWS, 2)) == {
        "completions",
        "messages",
        "solution",
        "is_truncated",
    }
    ms_swift_3_12 = {"trainer_state", "prompt_id", "request_id", "finish_reason", "response_token_ids"}
    assert set(swift_keyword_arguments("3.12.6", SWIFT_ROWS, 2)) == ms_swift_3_12 | set(
        swift_keyword_arguments("3.5.3", SWIFT_ROWS, 2)
    )
    kwargs = swift_keyword_arguments("4.6.0", SWIFT_ROWS, 3)
    assert "rollout_infos" in kwargs and len(kwargs["messages"]) == len(kwargs["completions"]) == 6
    assert kwargs["messages"][3] == [
        *SWIFT_ROWS[1]["messages"],
        {"role": "assistant", "content": kwargs["completions"][3]},
    ]
    assert all(isinstance(c, str) for c in kwargs["completions"])  # swift passes messages[-1]['content']


def test_an_orm_without_kwargs_is_refused_with_every_argument_ms_swift_passes_and_the_call_fix():
    from grpo_compat.fixes.rewards import swift_dry_run

    class StrictLength(SwiftORM):
        def __call__(self, completions):
            return [1.0] * len(completions)

    with pytest.raises(RewardFunctionError) as refused:
        swift_dry_run([StrictLength()], SWIFT_ROWS, 2, "4.6.0")
    message = str(refused.value)
    assert (
        "'StrictLength' does not accept the keyword arguments trainer_state, messages, solution, is_truncated"
        in message
    )
    assert "which ms-swift passes every reward function" in message
    assert "def __call__(self, completions, **kwargs)" in message and "before the first generation" in message


def test_swift_passes_the_completions_by_position_whatever_the_first_parameter_is_called(warnings):
    from grpo_compat.fixes.rewards import swift_dry_run

    calls = []

    def by_any_name(responses, solution, **kwargs):  # works in ms-swift: the completions come first, by position
        calls.append((len(responses), solution[0]))
        return [float(r.endswith("7</answer>")) for r in responses]

    swift_dry_run([by_any_name, SwiftORM()], SWIFT_ROWS, 3, "3.12.6")
    assert calls == [(6, "1")] and warnings == []
    with pytest.raises(RewardFunctionError, match="takes no positional parameter for the completions"):
        swift_dry_run([lambda **kwargs: [0.0] * 6], SWIFT_ROWS, 3, "3.12.6")
    with pytest.raises(RewardFunctionError, match=r"needs 'answer', which ms-swift does not pass"):
        swift_dry_run([lambda completions, answer, **kwargs: [0.0] * 6], SWIFT_ROWS, 3, "3.12.6")


def test_a_call_method_that_is_a_staticmethod_is_judged_by_its_own_parameters():
    from grpo_compat.fixes.rewards import swift_dry_run

    class Static(SwiftORM):  # inspect.signature drops its first parameter as if it were self
        __call__ = staticmethod(length)

    swift_dry_run([Static()], SWIFT_ROWS, 2, "4.6.0")


def test_ms_swift_rewards_are_refused_for_what_ms_swift_cannot_score_and_not_for_none(warnings):
    from grpo_compat.fixes.rewards import swift_dry_run

    def one(completions, **kwargs):
        return [1.0]

    def unsure(completions, **kwargs):
        return [None] * len(completions)

    async def judged(completions, **kwargs):
        return [0.5] * len(completions)

    with pytest.raises(RewardFunctionError, match=r"1 rewards for 4 completions.*ms-swift 4\.6\.0 would copy that"):
        swift_dry_run([one], SWIFT_ROWS, 2, "4.6.0")
    swift_dry_run([unsure], SWIFT_ROWS, 2, "3.5.3")  # None becomes NaN in every ms-swift: a warning, not a refusal
    assert any("ms-swift scores it 0" in w for w in warnings)
    swift_dry_run([judged], SWIFT_ROWS, 2, "3.12.1")
    with pytest.raises(RewardFunctionError, match=r"'judged' is async.*pip install \"ms-swift>=3.12.1\""):
        swift_dry_run([judged], SWIFT_ROWS, 2, "3.12.0")


def test_encoded_or_switched_off_swift_datasets_are_not_dry_run(monkeypatch):
    from grpo_compat.fixes.rewards import swift_dry_run

    def strict(completions):
        return [1.0] * len(completions)

    swift_dry_run([strict], [{"input_ids": [1, 2]}, {"input_ids": [3]}], 2, "4.6.0")  # not swift's rows: no kwargs
    monkeypatch.setenv("GRPO_COMPAT_REWARD_CHECK", "0")
    swift_dry_run([strict], SWIFT_ROWS, 2, "4.6.0")


def test_the_swift_count_check_wraps_in_place_and_refuses_one_value_passed_by_position():
    import asyncio
    import inspect
    from types import SimpleNamespace

    from grpo_compat.fixes.rewards import count_check_reward_functions, swift_caller

    class Whole(SwiftORM):
        def __call__(self, completions, **kwargs):
            return [1.0] if kwargs.get("whole") else [0.5] * len(completions)

    async def judged(completions, **kwargs):
        return [0.25] * len(completions)

    module = SimpleNamespace()  # a reward model (nn.Module) stays as it is; here: anything not callable
    functions = [Whole(), judged, module]
    trainer = SimpleNamespace(reward_funcs=functions)
    count_check_reward_functions(trainer, swift_caller("3.5.3"))
    assert trainer.reward_funcs is functions and functions[2] is module
    assert inspect.iscoroutinefunction(functions[1]) and not inspect.iscoroutinefunction(functions[0])
    assert functions[0](["a", "b"], messages=[[], []]) == [0.5, 0.5]
    assert asyncio.run(functions[1](["a", "b"])) == [0.25, 0.25]
    with pytest.raises(RewardFunctionError) as refused:
        functions[0](["a", "b"], whole=True)
    assert str(refused.value).startswith(
        "reward function 'Whole' returned 1 rewards for 2 completions during training (ms-swift 3.5.3); ms-swift "
        "copies one value to every completion without a word"
    )
