"""Reward functions called once before training, the way the installed trl or ms-swift calls them (census rows 26, 27).

A reward function's contract mistakes surface only after the model loaded and generated: a missing
``**kwargs`` (``unexpected keyword argument 'prompts'``), a dataset column that does not exist, the wrong
number of rewards (broadcast silently by trl < 1.10 and by ms-swift), strings instead of numbers.
:func:`dry_run` calls every Python reward function on two rows of the training dataset with the keyword
arguments the installed trl passes (docs/investigations/reward-contracts-2026-11.md) and completions in the
dataset's shape; :func:`swift_dry_run` does the same for ms-swift's GRPO trainer, which passes the
completions by position and the generated rows' columns by keyword. A :class:`RewardCaller` holds what
differs between the two callers and their versions.

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
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from grpo_compat.core.errors import RewardFunctionError
from grpo_compat.core.logs import log
from grpo_compat.core.versions import release

CHECK_ENV = "GRPO_COMPAT_REWARD_CHECK"
# (rows, generations) -> keyword arguments a run adds to those its trl passes every reward function
MoreKeywords = Callable[[list[dict], int], dict[str, Any]]
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
        kwargs["completion_ids"] = _token_ids(rows, texts)
    for column in rows[0]:
        if column not in excluded:
            kwargs[column] = [row.get(column) for row in rows for _ in texts]
    if trl >= (0, 20):
        from transformers import TrainerState

        kwargs["trainer_state"] = TrainerState()
    if trl >= (1,):  # release() drops trailing zeros: 1.0.0 is (1,)
        kwargs["log_extra"] = kwargs["log_metric"] = lambda *args, **kw: None
    return kwargs


def _token_ids(rows: list[dict], texts: list[str]) -> list[list[int]]:
    """Made-up token ids, one list per completion, about as long as its text in tokens."""
    return [list(range(1, len(t) // 4 + 2)) for _ in rows for t in texts]


def swift_keyword_arguments(swift_version: str, rows: list[dict], generations: int) -> dict[str, Any]:
    """What ms-swift's GRPO trainer passes a reward function for these rows (``completions`` goes first, by position).

    Every version passes the generated rows batched by column (``RowPreprocessor.rows_to_batched``): the
    dataset's columns, ``messages`` with the completion appended as the assistant turn, and ``is_truncated``;
    3.8 added ``trainer_state`` and the rollout's ``prompt_id``, ``request_id``, ``finish_reason`` and
    ``response_token_ids``, 4.4 (``GRPOSample.to_reward_row``) ``rollout_infos``. Keys a rollout adds only in
    some runs (multi-turn ``trajectory_inputs``, ``rollout_logprobs``) are left out.
    """
    swift = release(swift_version)
    texts = completion_texts(generations)
    generated = [
        {**row, "messages": [*(row.get("messages") or []), {"role": "assistant", "content": text}]}
        for row in rows
        for text in texts
    ]
    kwargs: dict[str, Any] = {"completions": [t for _ in rows for t in texts]}
    if swift >= (3, 8):
        from transformers import TrainerState

        kwargs["trainer_state"] = TrainerState()
    for column in rows[0]:
        kwargs[column] = [row.get(column) for row in generated]
    kwargs["is_truncated"] = [False] * len(generated)
    if swift >= (3, 8):
        kwargs["prompt_id"] = [f"prompt_{i // generations}" for i in range(len(generated))]
        kwargs["request_id"] = [f"chatcmpl-{i}" for i in range(len(generated))]
        kwargs["finish_reason"] = ["stop"] * len(generated)
        kwargs["response_token_ids"] = _token_ids(rows, texts)
    if swift >= (4, 4):
        kwargs["rollout_infos"] = [{} for _ in generated]
    return kwargs


@dataclass(frozen=True)
class RewardCaller:
    """How the installed trainer calls a reward function and scores what it returns."""

    library: str  # "trl" or "ms-swift"
    version: str
    keyword_arguments: Callable[[str, list[dict], int], dict[str, Any]]  # (version, rows, generations) -> kwargs
    when: str  # when the dry run happens: "before the model loads", ...
    broadcaster: str | None  # who copies one returned value to every completion without a word, if this one does
    scores_none: bool  # None is left out or scored NaN, not a crash
    reads_name: bool  # reads __name__ of every reward function (AttributeError without one)
    async_since: tuple[tuple[int, ...], tuple[int, ...]]  # the first version that awaits async functions / objects
    completions_by_position: bool = False  # reward_func(completions, **kwargs), as ms-swift calls it
    all_none_effect: str = "trl scores it 0 (trl < 1.6) or leaves it out (trl >= 1.6)"
    inf_effect: str = " (trl < 1.0 then writes NaN into the weights; later trl learns nothing from that group)"

    @property
    def label(self) -> str:
        return f"{self.library} {self.version}"


def trl_caller(trl_version: str) -> RewardCaller:
    trl = release(trl_version)
    return RewardCaller(
        library="trl",
        version=trl_version,
        keyword_arguments=trl_keyword_arguments,
        when="before the model loads",
        broadcaster="trl < 1.10" if trl < (1, 10) else None,
        scores_none=trl >= (0, 16),
        reads_name=trl < (1, 9),
        async_since=((0, 27), (1, 14)),
    )


def swift_caller(swift_version: str) -> RewardCaller:
    return RewardCaller(
        library="ms-swift",
        version=swift_version,
        keyword_arguments=swift_keyword_arguments,
        when="before the first generation",
        broadcaster="ms-swift",  # rewards_per_func[:, i] = torch.tensor(output): one value fills the column
        scores_none=True,  # None becomes NaN, summed over reward functions with nansum
        reads_name=False,  # callable objects are named by their class
        async_since=((3, 12, 1), (3, 12, 1)),
        completions_by_position=True,
        all_none_effect="ms-swift scores it 0 (its rewards are NaN, summed with nansum)",
        inf_effect="",
    )


class DryRun:
    """One reward function called once: what it returned or raised, judged against the installed trl or ms-swift."""

    def __init__(
        self, function: Any, kwargs: dict[str, Any], columns: Sequence[str], generations: int, caller: RewardCaller
    ) -> None:
        self.function, self.name = function, name_of(function)
        self.kwargs, self.columns, self.generations, self.caller = kwargs, list(columns), generations, caller
        self.count = len(kwargs["completions"])

    def arguments(self) -> tuple[tuple, dict[str, Any]]:
        """The call's positional and keyword arguments."""
        if self.caller.completions_by_position:
            return (self.kwargs["completions"],), {k: v for k, v in self.kwargs.items() if k != "completions"}
        return (), self.kwargs

    def refuse(self, problem: str, fix: str) -> None:
        raise RewardFunctionError(
            f"reward function {self.name!r} {problem}. Fix: {fix}. Found by calling it once on "
            f"{self.count // self.generations} dataset rows {self.caller.when} "
            f"(grpo_compat; {CHECK_ENV}=0 skips this check)."
        )

    def check_signature(self) -> None:
        try:
            signature = _signature(self.function)
        except (TypeError, ValueError):  # a builtin without a signature: the call below tells
            return
        args, kwargs = self.arguments()
        parameters = list(signature.parameters.values())
        positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        routine = inspect.isroutine(_unwrapped(self.function))  # else a callable object, e.g. an ms-swift ORM
        example = f"def {self.name}(completions, **kwargs)" if routine else "def __call__(self, completions, **kwargs)"
        if len(args) > len(positional) and not any(p.kind is p.VAR_POSITIONAL for p in parameters):
            self.refuse(
                f"takes no positional parameter for the completions, which {self.caller.library} passes first, "
                "by position",
                f"make the completions its first parameter: {example}",
            )
        taken = {p.name for p in positional[: len(args)]}
        parameters = [p for p in parameters if p.name not in taken]
        if any(p.kind is p.VAR_KEYWORD for p in parameters):
            accepted = set(kwargs)
        else:
            accepted = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        unexpected = [name for name in kwargs if name not in accepted]
        if unexpected:
            self.refuse(
                f"does not accept the keyword arguments {', '.join(unexpected)}, which {self.caller.library} passes "
                f"every reward function (all of them: {', '.join(kwargs)})",
                f"end its parameters with **kwargs, e.g. {example}",
            )
        for parameter in parameters:
            if (
                parameter.default is parameter.empty
                and parameter.name not in kwargs
                and parameter.kind
                in (
                    parameter.POSITIONAL_ONLY,
                    parameter.POSITIONAL_OR_KEYWORD,
                    parameter.KEYWORD_ONLY,
                )
            ):
                self.refuse(
                    f"needs {parameter.name!r}, which {self.caller.library} does not pass: the dataset has no column "
                    f"{parameter.name!r} (its columns: {', '.join(self.columns)})",
                    f"add a {parameter.name!r} column to the dataset, or give the parameter a default",
                )

    def call(self) -> Any:
        args, kwargs = self.arguments()
        try:
            if is_async(self.function):
                with concurrent.futures.ThreadPoolExecutor(1) as pool:  # its own event loop, even in a notebook
                    return pool.submit(asyncio.run, self.function(*args, **kwargs)).result()
            return self.function(*args, **kwargs)
        except KeyError as error:
            key = error.args[0] if error.args else None
            if isinstance(key, str) and key not in kwargs and _raised_in(error, self.function):
                self.refuse(
                    f"reads {key!r} from its keyword arguments, which the dataset lacks (its columns: "
                    f"{', '.join(self.columns)})",
                    f"add a {key!r} column to the dataset, or read it with kwargs.get({key!r})",
                )
            raise

    def check_result(self, result: Any) -> list[str]:
        """Refuse what the caller cannot score; return the warnings about what it can."""
        if isinstance(result, (str, bytes)) or not _is_sequence(result):
            self.refuse(
                f"returned {type(result).__name__} {_short(result)}, not a list with one reward per completion",
                f"return a list of {self.count} numbers (or None where it cannot score) for {self.count} completions",
            )
        values = list(result)
        if len(values) != self.count:
            silent = len(values) == 1 and self.caller.broadcaster is not None
            broadcast = (
                f" {self.caller.label} would copy that value to every completion without a word;" if silent else ""
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
        if any(v is None for v in values) and not self.caller.scores_none:
            self.refuse(
                f"returned None, which {self.caller.label} cannot score ('must be real number, not NoneType'); "
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
                f"function scores a completion, {self.caller.all_none_effect}"
            )
        elif any(math.isinf(v) for v in numbers_):
            warnings.append(
                f"reward function {self.name!r} returned inf: its group's advantages become inf / NaN"
                f"{self.caller.inf_effect}"
            )
        groups = [values[i : i + self.generations] for i in range(0, len(values), self.generations)]
        constant = self.generations > 1 and all(len(set(group)) == 1 and group[0] is not None for group in groups)
        if self.generations > 1:
            _remember_verdict(self.function, constant)
        if constant:
            warnings.append(
                f"reward function {self.name!r} gave all {self.generations} different completions of each prompt the "
                f"same reward ({groups[0][0]!r}) in the dry run: fine if it scores only correct answers, which the "
                "dry run's made-up text is not; otherwise every advantage will be 0 and nothing is learnt"
            )
        return warnings


def _signature(function: Any) -> inspect.Signature:
    """inspect.signature, except for an object whose class's ``__call__`` is a staticmethod.

    inspect drops the first parameter of such a ``__call__`` as if it were ``self`` (Python 3.11), though the call
    passes it one argument more.
    """
    if not inspect.isroutine(function) and not isinstance(function, functools.partial):
        call = next((vars(c)["__call__"] for c in type(function).__mro__ if "__call__" in vars(c)), None)
        if isinstance(call, staticmethod):
            return inspect.signature(call.__func__)
    return inspect.signature(function)


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


def dry_run(
    reward_funcs: Any, dataset: Any, generations: int, trl_version: str, more: MoreKeywords | None = None
) -> None:
    """Call every Python reward function once, as trl would; refuse contract mismatches, log the rest.

    ``more(rows, generations)``: keyword arguments this run adds, e.g. the ``environments`` of an environment run.
    """
    dry_run_as(trl_caller(trl_version), reward_funcs, dataset, generations, more)


def swift_dry_run(reward_funcs: Any, dataset: Any, generations: int, swift_version: str) -> None:
    """Call every Python reward function (ORM instances included) once, as ms-swift's GRPO trainer would.

    Rows without ``messages`` (a dataset swift already encoded) are not dry-run: the kwargs would not be swift's.
    """
    rows = dataset_rows(dataset) if check_enabled() else None
    if rows is not None and "messages" in rows[0]:
        dry_run_as(swift_caller(swift_version), reward_funcs, dataset, generations)


def dry_run_as(
    caller: RewardCaller, reward_funcs: Any, dataset: Any, generations: int, more: MoreKeywords | None = None
) -> None:
    if not check_enabled():
        return
    functions = python_reward_functions(reward_funcs)
    rows = dataset_rows(dataset) if functions else None
    if rows is None:
        return
    refuse_unnamed(functions, caller)
    refuse_unsupported_async(functions, caller)
    with random_state_kept():  # a reward that draws random numbers must not shift the run's sampling
        _dry_run(functions, rows, generations, caller, more)


@contextlib.contextmanager
def random_state_kept() -> Any:
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


def _dry_run(
    functions: list[Any], rows: list[dict], generations: int, caller: RewardCaller, more: MoreKeywords | None
) -> None:
    start = time.perf_counter()
    generations = max(1, int(generations or 1))
    kwargs = caller.keyword_arguments(caller.version, rows, generations)
    if more is not None:
        kwargs.update(more(rows, generations))
    warnings: list[str] = []
    for function in functions:
        run = DryRun(function, kwargs, list(rows[0]), generations, caller)
        run.check_signature()
        try:
            result = run.call()
        except RewardFunctionError:
            raise
        except Exception as error:  # noqa: BLE001 - the function's own failure on made-up text: a warning
            unreset = (
                " (and environments built but not reset: it may read what reset sets)"
                if "environments" in kwargs
                else ""
            )
            warnings.append(
                f"reward function {run.name!r} raised {type(error).__name__}: {error} on the dry run's made-up "
                f"completions{unreset}; it will raise the same in training if the model writes such text"
            )
            continue
        warnings += run.check_result(result)
    for warning in warnings:
        log("warning", "%s", warning)
    elapsed = (time.perf_counter() - start) * 1000
    log(
        "debug",
        "reward dry run (%s): %d function(s) on %d row(s) x %d completions, %.1f ms",
        caller.label,
        len(functions),
        len(rows),
        generations,
        elapsed,
    )


def refuse_unnamed(functions: list[Any], caller: RewardCaller) -> None:
    """trl < 1.9 reads ``__name__`` of every reward function (0.17-1.8 in __init__, after the model loaded)."""
    if not caller.reads_name:
        return
    for function in functions:
        if not hasattr(function, "__name__"):
            name = name_of(function)
            raise RewardFunctionError(
                f"reward function {name!r} has no __name__ (a callable object or functools.partial), which "
                f"{caller.label} reads to name its reward (AttributeError after the model loaded). Fix: give it "
                f'one ({name}.__name__ = {name!r}) or wrap it in a def, or pip install "trl>=1.9".'
            )


def refuse_unsupported_async(functions: list[Any], caller: RewardCaller) -> None:
    """Async reward functions need trl >= 0.27 (objects with ``async def __call__`` 1.14) or ms-swift >= 3.12.1."""
    for function in functions:
        inner = _unwrapped(function)
        if not is_async(function):
            continue
        needed = caller.async_since[0] if inspect.iscoroutinefunction(inner) else caller.async_since[1]
        if release(caller.version) < needed:
            minimum = ".".join(map(str, needed))
            raise RewardFunctionError(
                f"reward function {name_of(function)!r} is async, which {caller.label} calls as a plain function "
                f"and fails on the coroutine it gets back ('coroutine' object is not iterable) after the model "
                f'loaded. Fix: pip install "{caller.library}>={minimum}", or make it a plain def.'
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


def count_check_reward_functions(trainer: Any, caller: RewardCaller) -> None:
    """Replace, in its own list, each Python reward function of a built trainer by its :func:`count_checked` twin."""
    functions = getattr(trainer, "reward_funcs", None)
    if isinstance(functions, list):
        checked = {id(f) for f in python_reward_functions(functions)}
        functions[:] = [count_checked(f, caller) if id(f) in checked else f for f in functions]


def count_checked(function: Any, caller: RewardCaller) -> Any:
    """``function`` refusing, at every call, a reward count other than the number of completions.

    Same name, signature and sync / async kind (trl and ms-swift tell them apart), and the rewards pass
    through untouched: only the count is read.
    """

    def check(result: Any, args: tuple, kwargs: dict) -> Any:
        completions = kwargs["completions"] if "completions" in kwargs else (args[0] if args else None)
        if _is_sequence(result) and completions is not None and len(result) != len(completions):
            broadcaster = caller.broadcaster if len(result) == 1 else None
            silently = f" {broadcaster} copies one value to every completion without a word;" if broadcaster else ""
            raise RewardFunctionError(
                f"reward function {name_of(function)!r} returned {len(result)} rewards for {len(completions)} "
                f"completions during training ({caller.label});{silently} every completion needs its own reward. "
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


# What the dry run saw of each reward function: True when it gave every made-up completion of a prompt the same
# reward. The learning watchdog reads it as evidence (a constant reward is not helped by a longer completion).
_VERDICTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _remember_verdict(function: Any, constant: bool) -> None:
    with contextlib.suppress(TypeError):  # an object that cannot be weakly referenced: no evidence, no harm
        _VERDICTS[function] = constant


def constant_on_dry_run(reward_funcs: Any) -> list[str] | None:
    """Names of the reward functions the dry run found constant per prompt; None when it judged not all of them."""
    functions = python_reward_functions(reward_funcs)
    if not functions:
        return None
    constant = []
    for function in functions:
        original = inspect.unwrap(function)  # the count check's twin wraps the function the dry run called
        verdict = next((_VERDICTS.get(f) for f in (function, original) if _is_weakly_keyed(f)), None)
        if verdict is None:
            return None
        if verdict:
            constant.append(name_of(original))
    return constant


def _is_weakly_keyed(function: Any) -> bool:
    try:
        return function in _VERDICTS
    except TypeError:
        return False
