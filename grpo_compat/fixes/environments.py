"""trl's environments and tools checked before the model loads: names resolve, factories build, tools can be called.

trl's GRPOTrainer takes ``tools`` (0.28 and 1.16 read: rendered with transformers' get_json_schema, called as
``tool(**arguments)``) and, from 0.29, ``environment_factory``. What is wrong with them surfaces after the model
loaded: jmespath missing where trl needs it to parse tool calls, and an environment without ``reset``, in
GRPOTrainer.__init__; an `environment` name the dict lacks (refused where every example names one, warned where
only some do: those train until a batch draws one), or the `environment` column that ``remove_unused_columns=True``
removed, at the first batch ("not among the
environments passed to `environment_factory`"; a KeyError in the pull requests that added the dict, trl #6001 /
#6002); a tool without a docstring or type hints when its schema is first rendered into a prompt; and a tool trl
cannot call by keyword (``tool(**arguments)``) never at all: every call returns its error to the model as the tool's
answer (``tools/failure_frequency``), and the run trains on. :func:`check` finds each of them first.

Building an environment runs user code (it may start a process or open a client), so it is done once per
environment name, as trl's own probe does, and only while ``GRPO_COMPAT_REWARD_CHECK`` is on; the instances are
returned for the reward dry run (trl passes them to reward functions as ``environments``). Environments are built,
never reset and no tool is called: that would start an episode.
"""

from __future__ import annotations

import difflib
import inspect
import logging
import sys
from collections.abc import Callable
from typing import Any

from grpo_compat.core.errors import GRPOSettingsError
from grpo_compat.fixes.rewards import CHECK_ENV, DRY_RUN_ROWS, check_enabled, random_state_kept

ENVIRONMENT_COLUMN = "environment"  # the column a dict environment_factory routes each example by
# The columns remove_unused_columns=True keeps (GRPOTrainer._set_signature_columns_if_needed, trl 1.8 and 1.16)
KEPT_COLUMNS = ("prompt", "image", "images")
NOT_TOOLS = ("reset", "get_reward")  # an environment's methods trl does not expose as tools
SUFFIX = "Refused before the model loads (grpo_compat)."
logger = logging.getLogger("grpo_compat")


def factories_of(environment_factory: Any) -> dict[Any, Any]:
    """{name: factory}, as trl normalises it: one callable is the unnamed environment None."""
    if environment_factory is None:
        return {}
    return dict(environment_factory) if isinstance(environment_factory, dict) else {None: environment_factory}


def check(environment_factory: Any, tools: Any, dataset: Any, config: Any) -> dict[Any, Any]:
    """Refuse what trl would fail on later; the environments built, one per name ({} when none was built)."""
    factories = factories_of(environment_factory)
    if (tools or factories) and jmespath_missing():
        raise GRPOSettingsError(
            "tools and environments need the jmespath package to parse the model's tool calls on this trl (< 1.10) "
            "or transformers (< 5.13), and it is not installed: trl raises ImportError when GRPOTrainer is built, "
            'after the model loaded. Fix: pip install jmespath (or pip install "trl>=1.10" "transformers>=5.13"). '
            + SUFFIX
        )
    if isinstance(environment_factory, dict):
        check_routing(factories, dataset, config)
    for tool in list(tools or []):
        check_tool(tool, "tool")
    if not factories or not check_enabled():
        return {}
    columns = column_names(dataset)
    if columns is not None and getattr(config, "remove_unused_columns", False):
        columns = [c for c in columns if c in KEPT_COLUMNS]  # what trl's dataloader leaves of each example
    with random_state_kept():  # a factory that draws random numbers must not shift the run's sampling
        return {
            name: build(name, factory, columns, isinstance(environment_factory, dict))
            for name, factory in factories.items()
        }


def jmespath_missing() -> bool:
    """Whether the imported trl GRPO trainer module would refuse tools for want of jmespath, by its own condition.

    trl 0.28-1.9 need jmespath for any tool; 1.10+ only on transformers < 5.13 (`_SUPPORTS_RESPONSE_TEMPLATE`).
    """
    module = sys.modules.get("trl.trainer.grpo_trainer")
    if module is None or getattr(module, "_SUPPORTS_RESPONSE_TEMPLATE", False):
        return False
    available = getattr(module, "is_jmespath_available", None)
    return available is not None and not available()


def check_routing(factories: dict[Any, Any], dataset: Any, config: Any) -> None:
    """Every example of a dict environment_factory's dataset names one of its environments."""
    known = ", ".join(repr(name) for name in factories)
    if getattr(config, "remove_unused_columns", False):
        raise GRPOSettingsError(
            f"remove_unused_columns=True removes the dataset's {ENVIRONMENT_COLUMN!r} column, by which trl routes each "
            f"example to one of the environment_factory's environments ({known}): every example would name none, "
            "and the first batch fails after the model loaded. Fix: remove_unused_columns=False (trl's default). "
            + SUFFIX
        )
    columns = column_names(dataset)
    if columns is None:  # no dataset (trl refuses that itself) or a streaming one, which is not read ahead
        return
    if ENVIRONMENT_COLUMN not in columns:
        raise GRPOSettingsError(
            f"environment_factory is a dict of environments ({known}), which trl routes by the dataset's "
            f"{ENVIRONMENT_COLUMN!r} column, and the dataset has none (its columns: {', '.join(columns)}). Fix: add "
            f"an {ENVIRONMENT_COLUMN!r} column naming each example's environment, or pass one factory. " + SUFFIX
        )
    named = distinct(dataset, ENVIRONMENT_COLUMN)
    unknown = [name for name in named if name not in factories]
    if not unknown:
        return
    close = difflib.get_close_matches(str(unknown[0]), [str(name) for name in factories], n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    count = sum(1 for name in dataset[ENVIRONMENT_COLUMN] if name in unknown)
    finding = (
        f"{count} example(s) of the dataset name an environment environment_factory lacks: "
        f"{', '.join(repr(name) for name in unknown[:5])}{hint}; its environments: {known}. trl finds the first at "
        "the batch that holds it, after the model loaded. Fix: name one of its environments in the "
        f"{ENVIRONMENT_COLUMN!r} column, or add the missing one to environment_factory."
    )
    if count == len(dataset):  # the first batch holds one, whatever the sampler draws: the run cannot train a step
        raise GRPOSettingsError(f"{finding} {SUFFIX}")
    # Others train until a batch draws one, or to the end if none is drawn (max_steps, a dropped remainder): a
    # refusal would stop a run that trains plain (trl's own upstream test, a misnamed row never drawn).
    logger.warning("%s trl stops the run with a ValueError at that batch (grpo_compat).", finding)


def build(name: Any, factory: Any, columns: list[str] | None, routed: bool) -> Any:
    """One environment, built as trl builds it, its reset / get_reward / tool methods checked."""
    label = "environment_factory" if name is None else f"environment_factory[{name!r}]"
    if not callable(factory):
        raise GRPOSettingsError(
            f"{label} is a {type(factory).__name__}, not a callable that builds an environment. Fix: pass the "
            "environment's class (or a function returning a new instance). " + SUFFIX
        )
    try:
        environment = factory()
    except Exception as error:  # the user's factory failing is the finding
        raise GRPOSettingsError(
            f"{label}() raised {type(error).__name__}: {error}; trl calls it when GRPOTrainer is built, after the "
            f"model loaded. Fix: make it build an environment without arguments ({CHECK_ENV}=0 skips this check, "
            "which builds one environment per name). " + SUFFIX
        ) from error
    kind = type(environment).__name__
    reset = inspect.getattr_static(type(environment), "reset", None)
    if not inspect.isfunction(reset):
        raise GRPOSettingsError(
            f"{label}() built a {kind}, which has no reset method; trl resets every environment before each "
            f"rollout and refuses it after the model loaded. Fix: define `def reset(self, **kwargs)` on {kind} "
            "(it returns None, or a string appended to the prompt). " + SUFFIX
        )
    if columns is not None:
        passed = [c for c in columns if not (routed and c == ENVIRONMENT_COLUMN)]
        problem = binding_problem(environment.reset, passed)
        if problem:
            raise GRPOSettingsError(
                f"{kind}.reset {problem}, which trl passes it by keyword (every column of the example: "
                f"{', '.join(passed)}) at the first batch, after the model loaded. Fix: end its parameters with "
                "**kwargs, e.g. `def reset(self, **kwargs)`. " + SUFFIX
            )
    get_reward = inspect.getattr_static(type(environment), "get_reward", None)
    if inspect.isfunction(get_reward):
        problem = binding_problem(environment.get_reward, [])
        if problem:
            raise GRPOSettingsError(
                f"{kind}.get_reward {problem}; trl calls it without arguments to score each rollout. Fix: "
                "`def get_reward(self)`, reading what it needs from the environment. " + SUFFIX
            )
    for method_name, _ in inspect.getmembers(type(environment), predicate=inspect.isfunction):
        if method_name not in NOT_TOOLS and not method_name.startswith("_"):
            check_tool(getattr(environment, method_name), f"{kind}'s tool")
    return environment


def check_tool(tool: Any, what: str) -> None:
    """A schema transformers can write for it, and a call by keyword with every parameter the schema declares."""
    name = getattr(tool, "__name__", type(tool).__name__)
    if not callable(tool):
        raise GRPOSettingsError(
            f"{what} {name!r} is a {type(tool).__name__}, not a function. Fix: pass functions. " + SUFFIX
        )
    try:
        from transformers.utils import get_json_schema
    except ImportError:  # a transformers without tool schemas: trl refuses tools there itself
        return
    try:
        schema = get_json_schema(tool)
    except Exception as error:  # transformers' DocstringParsingException, TypeHintParsingException
        raise GRPOSettingsError(
            f"{what} {name!r}: transformers cannot describe it to the model ({type(error).__name__}: {error}); trl "
            "renders every tool's schema into the prompt at the first batch, after the model loaded. Fix: give it "
            "type hints and a Google-style docstring with a line under `Args:` for each parameter. " + SUFFIX
        ) from error
    declared = list(schema.get("function", {}).get("parameters", {}).get("properties", {}))
    problem = binding_problem(tool, declared)
    if problem:
        raise GRPOSettingsError(
            f"{what} {name!r} {problem}, which its schema declares and trl passes by keyword (tool(**arguments)): "
            "every call would fail, and trl hands the error to the model as the tool's answer and trains on "
            "without a word. Fix: make its parameters keyword-capable (no `/`). " + SUFFIX
        )


def binding_problem(function: Callable[..., Any], keywords: list[str]) -> str | None:
    """Why ``function(**{k: ... for k in keywords})`` cannot bind, in words; None when it can."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # a builtin without a signature: nothing to check
        return None
    try:
        signature.bind(**dict.fromkeys(keywords))
    except TypeError as error:
        return f"cannot take {', '.join(keywords) or 'no arguments'} ({error})"
    return None


def column_names(dataset: Any) -> list[str] | None:
    """A map-style dataset's columns; None without one or for a streaming one (reading it may touch the network)."""
    if dataset is None or not hasattr(dataset, "__len__") or not hasattr(dataset, "__getitem__"):
        return None
    names = getattr(dataset, "column_names", None)
    return list(names) if isinstance(names, (list, tuple)) else None


def routable(dataset: Any, environment_factory: Any) -> Any:
    """What the reward dry run may draw from: the dataset, or where its first rows name an environment a dict
    environment_factory lacks (warned by check_routing), the first rows that name one it has, as trl draws them."""
    columns = column_names(dataset)
    if not isinstance(environment_factory, dict) or columns is None or ENVIRONMENT_COLUMN not in columns:
        return dataset
    first = [dataset[i][ENVIRONMENT_COLUMN] for i in range(min(DRY_RUN_ROWS, len(dataset)))]
    if all(name in environment_factory for name in first):  # the usual case: the whole column is not read
        return dataset
    names = dataset[ENVIRONMENT_COLUMN]
    return [dataset[i] for i, name in enumerate(names) if name in environment_factory][:DRY_RUN_ROWS]


def distinct(dataset: Any, column: str) -> list[Any]:
    """The distinct values of a column, in order of first appearance."""
    values = dataset.unique(column) if hasattr(dataset, "unique") else list(dict.fromkeys(dataset[column]))
    return list(values)


def environments_per_completion(environments: dict[Any, Any], rows: list[dict], generations: int, routed: bool) -> list:
    """What trl passes reward functions as ``environments``: each completion's environment (built ones, not reset)."""
    return [environments[row.get(ENVIRONMENT_COLUMN) if routed else None] for row in rows for _ in range(generations)]
