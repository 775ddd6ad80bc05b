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

    from grpo_compat.fixes.rewards import count_checked

    async def judged(prompts, completions, **kwargs):
        return [0.25] * (len(completions) if kwargs.get("whole", True) else 1)

    checked_sync, checked_async = count_checked(length, "0.29.1"), count_checked(judged, "0.29.1")
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

    monkeypatch.setenv("GRPO_COMPAT_REWARD_CHECK", "0")  # no dry run: the count is seen first in training
    plain = smoke("trl-0.16", "plain", tmp_path / "model", tmp_path, flags=("--reward", "one-value"))
    assert plain["status"] == "ok" and not plain["all_trainable_params_changed"]  # broadcast: nothing learnt
    patched = smoke("trl-0.16", "patched", tmp_path / "model", tmp_path, flags=("--reward", "one-value"))
    assert patched["error"].startswith(
        "RewardFunctionError: reward function 'one_value' returned 1 rewards for 4 completions during training "
        "(trl 0.16.1); trl < 1.10 copies one value to every completion without a word"
    )
    healthy = [smoke("trl-0.16", mode, tmp_path / "model", tmp_path) for mode in ("plain", "patched")]
    assert healthy[0]["weights_sha256"] == healthy[1]["weights_sha256"]  # the wrapped rewards pass through untouched
