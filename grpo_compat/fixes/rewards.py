"""Reward functions called once before the model loads, the way the installed trl calls them (census rows 26, 27).

A reward function's contract mistakes surface only after the model loaded and generated: a missing
``**kwargs`` (``unexpected keyword argument 'prompts'``), a dataset column that does not exist, the wrong
number of rewards (broadcast silently by trl < 1.10), strings instead of numbers. :func:`dry_run` calls
every Python reward function on two rows of the training dataset with the keyword arguments the installed
trl passes (docs/investigations/reward-contracts-2026-11.md) and completions in the dataset's shape.

It refuses only contract mismatches: the call cannot bind, or the return value cannot be scored by this
trl. Whatever else a function raises on the dry run's made-up completions is a warning: the model's text
may never look like them. It runs user code, so ``GRPO_COMPAT_REWARD_CHECK=0`` turns it off (judges,
remote calls, side effects); it loads no model and reads no network itself.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import inspect
import math
import numbers
import os
import time
from collections.abc import Sequence
from typing import Any

from grpo_compat.core.errors import RewardFunctionError
from grpo_compat.core.logs import log
from grpo_compat.core.versions import release

CHECK_ENV = "GRPO_COMPAT_REWARD_CHECK"
DRY_RUN_ROWS = 2
# Completions of different lengths and forms, so a reward that scores them all alike says something.
COMPLETION_TEXTS = ("", "The answer is 42.", "<think>\nCount the letters.\n</think>\n<answer>7</answer>")


def check_enabled(environ: dict[str, str] | None = None) -> bool:
    value = (os.environ if environ is None else environ).get(CHECK_ENV, "1").strip().lower()
    return value not in ("0", "false", "no", "off")


def _unwrapped(function: Any) -> Any:
    """The callable a functools.partial wraps (trl unwraps them too), else the function itself."""
    return function.func if isinstance(function, functools.partial) else function


def name_of(function: Any) -> str:
    inner = _unwrapped(function)
    return getattr(inner, "__name__", None) or type(inner).__name__


def is_async(function: Any) -> bool:
    inner = _unwrapped(function)
    return inspect.iscoroutinefunction(inner) or inspect.iscoroutinefunction(type(inner).__call__)


def python_reward_functions(reward_funcs: Any) -> list[Any]:
    """The entries trl calls as functions: callables that are neither model ids (str) nor torch modules."""
    entries = reward_funcs if isinstance(reward_funcs, (list, tuple)) else [reward_funcs]
    try:
        from torch import nn

        module: type = nn.Module
    except ImportError:  # no torch: nothing is a module
        module = type(None)
    return [f for f in entries if callable(f) and not isinstance(f, (str, module))]


def dataset_rows(dataset: Any, count: int = DRY_RUN_ROWS) -> list[dict] | None:
    """The first rows of a map-style dataset; None for a streaming one (reading it may touch the network)."""
    if dataset is None or not hasattr(dataset, "__getitem__") or not hasattr(dataset, "__len__"):
        return None
    rows = [dataset[i] for i in range(min(count, len(dataset)))]
    return rows if rows and all(isinstance(row, dict) for row in rows) else None


def is_conversational(prompt: Any) -> bool:
    return isinstance(prompt, list) and bool(prompt) and all(isinstance(m, dict) and "role" in m for m in prompt)


def completion_texts(count: int) -> list[str]:
    return [COMPLETION_TEXTS[i % len(COMPLETION_TEXTS)] + "!" * (i // len(COMPLETION_TEXTS)) for i in range(count)]


def trl_keyword_arguments(trl_version: str, rows: list[dict], generations: int) -> dict[str, Any]:
    """What trl passes a reward function for these rows, ``generations`` completions each (by keyword)."""
    trl = release(trl_version)
    texts = completion_texts(generations)
    conversational = is_conversational(rows[0].get("prompt"))
    completions = [[{"role": "assistant", "content": t}] if conversational else t for _ in rows for t in texts]
    excluded = {"prompt", "completion"} | ({"completion_ids"} if trl >= (0, 18) else set())
    kwargs: dict[str, Any] = {"prompts": [row.get("prompt") for row in rows for _ in texts], "completions": completions}
    if trl >= (0, 18):
        kwargs["completion_ids"] = [list(range(1, len(t) // 4 + 2)) for _ in rows for t in texts]
    for column in rows[0]:
        if column not in excluded:
            kwargs[column] = [row.get(column) for row in rows for _ in texts]
    if trl >= (0, 20):
        from transformers import TrainerState

        kwargs["trainer_state"] = TrainerState()
    if trl >= (1,):  # release() drops trailing zeros: 1.0.0 is (1,)
        kwargs["log_extra"] = kwargs["log_metric"] = lambda *args, **kw: None
    return kwargs


class DryRun:
    """One reward function called once: what it returned or raised, judged against the installed trl."""

    def __init__(self, function: Any, kwargs: dict[str, Any], columns: Sequence[str], generations: int) -> None:
        self.function, self.name = function, name_of(function)
        self.kwargs, self.columns, self.generations = kwargs, list(columns), generations
        self.count = len(kwargs["completions"])

    def refuse(self, problem: str, fix: str) -> None:
        raise RewardFunctionError(
            f"reward function {self.name!r} {problem}. Fix: {fix}. Found by calling it once on "
            f"{self.count // self.generations} dataset rows before the model loads "
            f"(grpo_compat; {CHECK_ENV}=0 skips this check)."
        )

    def check_signature(self) -> None:
        try:
            signature = inspect.signature(self.function)
        except (TypeError, ValueError):  # a builtin without a signature: the call below tells
            return
        parameters = signature.parameters.values()
        if any(p.kind is p.VAR_KEYWORD for p in parameters):
            accepted = set(self.kwargs)
        else:
            accepted = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        unexpected = [name for name in self.kwargs if name not in accepted]
        if unexpected:
            self.refuse(
                f"does not accept the keyword arguments {', '.join(unexpected)}, which trl passes every reward "
                f"function (all of them: {', '.join(self.kwargs)})",
                f"end its parameters with **kwargs, e.g. def {self.name}(completions, **kwargs)",
            )
        for parameter in parameters:
            if (
                parameter.default is parameter.empty
                and parameter.name not in self.kwargs
                and parameter.kind
                in (
                    parameter.POSITIONAL_ONLY,
                    parameter.POSITIONAL_OR_KEYWORD,
                    parameter.KEYWORD_ONLY,
                )
            ):
                self.refuse(
                    f"needs {parameter.name!r}, which trl does not pass: the dataset has no column "
                    f"{parameter.name!r} (its columns: {', '.join(self.columns)})",
                    f"add a {parameter.name!r} column to the dataset, or give the parameter a default",
                )

    def call(self) -> Any:
        try:
            if is_async(self.function):
                with concurrent.futures.ThreadPoolExecutor(1) as pool:  # its own event loop, even in a notebook
                    return pool.submit(asyncio.run, self.function(**self.kwargs)).result()
            return self.function(**self.kwargs)
        except KeyError as error:
            key = error.args[0] if error.args else None
            if isinstance(key, str) and key not in self.kwargs and _raised_in(error, self.function):
                self.refuse(
                    f"reads {key!r} from its keyword arguments, which the dataset lacks (its columns: "
                    f"{', '.join(self.columns)})",
                    f"add a {key!r} column to the dataset, or read it with kwargs.get({key!r})",
                )
            raise

    def check_result(self, result: Any, trl_version: str) -> list[str]:
        """Refuse what trl cannot score; return the warnings about what it can."""
        if isinstance(result, (str, bytes)) or not _is_sequence(result):
            self.refuse(
                f"returned {type(result).__name__} {_short(result)}, not a list with one reward per completion",
                f"return a list of {self.count} numbers (or None where it cannot score) for {self.count} completions",
            )
        values = list(result)
        if len(values) != self.count:
            silent = len(values) == 1 and release(trl_version) < (1, 10)
            broadcast = (
                f" trl {trl_version} would copy that value to every completion without a word;" if silent else ""
            )
            self.refuse(
                f"returned {len(values)} rewards for {self.count} completions ({self.count // self.generations} "
                f"prompts x {self.generations} generations);{broadcast} every completion needs its own reward",
                "return one reward per completion, in the order of `completions`",
            )
        wrong = [v for v in values if v is not None and not _is_number(v)]
        if wrong:
            self.refuse(
                f"returned {type(wrong[0]).__name__} {_short(wrong[0])} among its rewards, which is not a number",
                "return numbers (float, int, bool), or None for a completion it cannot score",
            )
        if any(v is None for v in values) and release(trl_version) < (0, 16):
            self.refuse(
                f"returned None, which trl {trl_version} cannot score ('must be real number, not NoneType'); "
                "trl >= 0.16 leaves None out",
                'return a number for every completion, or pip install "trl>=0.16"',
            )
        return self._warnings(values)

    def _warnings(self, values: list) -> list[str]:
        numbers_ = [float(v) for v in values if v is not None]
        warnings = []
        if not numbers_:
            warnings.append(
                f"reward function {self.name!r} returned None for every completion of the dry run: if no reward "
                "function scores a completion, trl scores it 0 (trl < 1.6) or leaves it out (trl >= 1.6)"
            )
        elif any(math.isinf(v) for v in numbers_):
            warnings.append(
                f"reward function {self.name!r} returned inf: its group's advantages become inf / NaN (trl < 1.0 "
                "then writes NaN into the weights; later trl learns nothing from that group)"
            )
        groups = [values[i : i + self.generations] for i in range(0, len(values), self.generations)]
        if self.generations > 1 and all(len(set(group)) == 1 and group[0] is not None for group in groups):
            warnings.append(
                f"reward function {self.name!r} gave all {self.generations} different completions of each prompt the "
                f"same reward ({groups[0][0]!r}) in the dry run: fine if it scores only correct answers, which the "
                "dry run's made-up text is not; otherwise every advantage will be 0 and nothing is learnt"
            )
        return warnings


def _is_sequence(value: Any) -> bool:
    if hasattr(value, "tolist") and getattr(value, "ndim", 1) == 0:  # a 0-d tensor / array
        return False
    return isinstance(value, Sequence) or (hasattr(value, "__len__") and hasattr(value, "__iter__"))


def _is_number(value: Any) -> bool:
    if isinstance(value, (numbers.Number, bool)):
        return not isinstance(value, complex)
    return hasattr(value, "item") and getattr(value, "ndim", None) == 0  # numpy scalars, 0-d tensors


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _raised_in(error: BaseException, function: Any) -> bool:
    """Whether the error was raised in the function's own code (not deeper, in a library it calls)."""
    inner = _unwrapped(function)
    code = getattr(inner, "__code__", None) or getattr(type(inner).__call__, "__code__", None)
    traceback = error.__traceback__
    while traceback is not None and traceback.tb_next is not None:
        traceback = traceback.tb_next
    return traceback is not None and traceback.tb_frame.f_code is code


def dry_run(reward_funcs: Any, dataset: Any, generations: int, trl_version: str) -> None:
    """Call every Python reward function once, as trl would; refuse contract mismatches, log the rest."""
    if not check_enabled():
        return
    functions = python_reward_functions(reward_funcs)
    rows = dataset_rows(dataset) if functions else None
    if rows is None:
        return
    refuse_unnamed(functions, trl_version)
    refuse_unsupported_async(functions, trl_version)
    with _random_state_kept():  # a reward that draws random numbers must not shift the run's sampling
        _dry_run(functions, rows, generations, trl_version)


@contextlib.contextmanager
def _random_state_kept() -> Any:
    import random

    import numpy
    import torch

    states = random.getstate(), numpy.random.get_state(), torch.get_rng_state()
    try:
        yield
    finally:
        random.setstate(states[0])
        numpy.random.set_state(states[1])
        torch.set_rng_state(states[2])


def _dry_run(functions: list[Any], rows: list[dict], generations: int, trl_version: str) -> None:
    start = time.perf_counter()
    generations = max(1, int(generations or 1))
    kwargs = trl_keyword_arguments(trl_version, rows, generations)
    warnings: list[str] = []
    for function in functions:
        run = DryRun(function, kwargs, list(rows[0]), generations)
        run.check_signature()
        try:
            result = run.call()
        except RewardFunctionError:
            raise
        except Exception as error:  # noqa: BLE001 - the function's own failure on made-up text: a warning
            warnings.append(
                f"reward function {run.name!r} raised {type(error).__name__}: {error} on the dry run's made-up "
                "completions; it will raise the same in training if the model writes such text"
            )
            continue
        warnings += run.check_result(result, trl_version)
    for warning in warnings:
        log("warning", "%s", warning)
    elapsed = (time.perf_counter() - start) * 1000
    log(
        "info",
        "reward dry run: %d function(s) on %d row(s) x %d completions, %.1f ms",
        len(functions),
        len(rows),
        generations,
        elapsed,
    )


def refuse_unnamed(functions: list[Any], trl_version: str) -> None:
    """trl < 1.9 reads ``__name__`` of every reward function (0.17-1.8 in __init__, after the model loaded)."""
    if release(trl_version) >= (1, 9):
        return
    for function in functions:
        if not hasattr(function, "__name__"):
            name = name_of(function)
            raise RewardFunctionError(
                f"reward function {name!r} has no __name__ (a callable object or functools.partial), which trl "
                f"{trl_version} reads to name its reward (AttributeError after the model loaded). Fix: give it "
                f'one ({name}.__name__ = {name!r}) or wrap it in a def, or pip install "trl>=1.9".'
            )


def refuse_unsupported_async(functions: list[Any], trl_version: str) -> None:
    """Async reward functions need trl >= 0.27; callable objects with ``async def __call__`` trl >= 1.14."""
    trl = release(trl_version)
    for function in functions:
        inner = _unwrapped(function)
        if not is_async(function):
            continue
        needed = (0, 27) if inspect.iscoroutinefunction(inner) else (1, 14)
        if trl < needed:
            minimum = ".".join(map(str, needed))
            raise RewardFunctionError(
                f"reward function {name_of(function)!r} is async, which trl {trl_version} calls as a plain function "
                f"and fails on the coroutine it gets back ('coroutine' object is not iterable) after the model "
                f'loaded. Fix: pip install "trl>={minimum}", or make it a plain def.'
            )


# Where ms-swift keeps its reward registry: 4.x, then 3.x.
SWIFT_REWARD_REGISTRIES = ("swift.rewards", "swift.plugin")


def refuse_unregistered_swift_rewards(reward_funcs: Sequence[Any]) -> None:
    """ms-swift resolves reward names in its trainer, after the models loaded: check them against its registry now."""
    import difflib
    import importlib

    from grpo_compat.core.versions import installed_version

    orms = None
    for module in SWIFT_REWARD_REGISTRIES:
        try:
            orms = importlib.import_module(module).orms
            break
        except (ImportError, AttributeError):
            continue
    if orms is None:
        return
    names = [name for name in reward_funcs if isinstance(name, str)]
    unknown = [name for name in names if name not in orms]
    if not unknown:
        return
    name = unknown[0]
    close = difflib.get_close_matches(name, list(orms), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise RewardFunctionError(
        f"ms-swift {installed_version('ms-swift')} has no reward function named {name!r}{hint}; registered: "
        f"{', '.join(sorted(orms))}. Fix: use a registered name, or register your own in a plugin file "
        f"(orms[{name!r}] = YourORM, with `from {module} import ORM, orms`) and pass it with --external_plugins "
        "your_plugin.py. Refused before the model loads (grpo_compat)."
    )


def count_checked(function: Any, trl_version: str) -> Any:
    """``function`` refusing, at every call, a reward count other than the number of completions.

    Same name, signature and sync / async kind (trl tells them apart per call), and the rewards pass
    through untouched: only the count is read.
    """

    def check(result: Any, args: tuple, kwargs: dict) -> Any:
        completions = kwargs["completions"] if "completions" in kwargs else (args[0] if args else None)
        if _is_sequence(result) and completions is not None and len(result) != len(completions):
            silently = " trl < 1.10 copies one value to every completion without a word;" if len(result) == 1 else ""
            raise RewardFunctionError(
                f"reward function {name_of(function)!r} returned {len(result)} rewards for {len(completions)} "
                f"completions during training (trl {trl_version});{silently} every completion needs its own reward. "
                "Fix: return one reward per completion, in the order of `completions` (grpo_compat)."
            )
        return result

    if is_async(function):

        async def checked_async(*args: Any, **kwargs: Any) -> Any:
            return check(await function(*args, **kwargs), args, kwargs)

        return functools.update_wrapper(checked_async, function)

    def checked(*args: Any, **kwargs: Any) -> Any:
        return check(function(*args, **kwargs), args, kwargs)

    return functools.update_wrapper(checked, function)
