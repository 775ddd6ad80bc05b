"""``grpo-compat check``: validate GRPO settings from a TRL config file or ms-swift arguments, no torch.

grpo-compat check grpo.yaml --world-size 8
grpo-compat check --swift --nproc-per-node 2 -- --num_generations 4 --per_device_train_batch_size 1
"""

from __future__ import annotations

import json
import math
import os
import weakref
from dataclasses import fields, replace
from pathlib import Path

from grpo_compat.core.versions import installed_version, release, window_problem
from grpo_compat.fixes.validation import (
    Finding,
    GRPOSettings,
    Rules,
    eval_is_enabled,
    field_getter,
    launched_world_size,
    refuse_unless_valid,
    rules_for,
    settings_from,
)
from grpo_compat.tools.arguments import InputError, read_input

DEEPSPEED_STAGES = {"zero0": 0, "zero1": 1, "zero2": 2, "zero2_offload": 2, "zero3": 3, "zero3_offload": 3}


def load_config_file(path: Path) -> dict:
    """A TRL config file as ``trl grpo --config`` reads it (YAML or JSON)."""
    data = read_input(str(path), "a TRL config file (YAML or JSON)", dash_is_stdin=False)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(f"{path} is not UTF-8 text (byte {error.start}): expected YAML or JSON") from None
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as error:  # JSONDecodeError; an int too long to convert
            raise InputError(f"{path} is not valid JSON: {error}") from None
    else:
        try:
            import yaml
        except ModuleNotFoundError:
            raise InputError("reading YAML needs PyYAML: pip install pyyaml (or pass a .json file)") from None
        try:
            data = yaml.safe_load(text)
        except (yaml.YAMLError, ValueError, RecursionError) as error:
            raise InputError(f"{path} is not valid YAML: {' '.join(str(error).split())}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path} must hold a mapping of GRPOConfig fields, got {type(data).__name__}")
    return data


# swift rlhf arguments the check reads that take a value: swift refuses them given as a bare flag.
SWIFT_VALUE_ARGUMENTS = frozenset(
    {f.name for f in fields(GRPOSettings) if f.type != "bool"} - {"world_size", "deepspeed_stage"} | {"deepspeed"}
)


def parse_swift_arguments(argv: list[str]) -> dict[str, object]:
    """``--key value [value ...]`` as swift's command line takes them; numbers become ints."""
    parsed: dict[str, object] = {}
    key = None
    for token in argv:
        if token.startswith("--"):
            key = token[2:].replace("-", "_")
            parsed[key] = True
        elif key is None:
            raise InputError(f"unexpected {token!r}: swift arguments look like --name value")
        else:
            value: object = int(token) if token.lstrip("-").isdigit() else token
            parsed[key] = (
                value
                if parsed[key] is True
                else [*([parsed[key]] if not isinstance(parsed[key], list) else parsed[key]), value]
            )
    missing = sorted(key for key in SWIFT_VALUE_ARGUMENTS if parsed.get(key) is True)
    if missing:
        raise InputError(f"--{missing[0]} needs a value (swift rlhf refuses it without one)")
    return parsed


def parse_keyword_arguments(tokens: list[str]) -> dict[str, object]:
    """``name=value`` as GRPOConfig(...) takes them: a Python literal, else the text."""
    import ast

    parsed: dict[str, object] = {}
    for token in tokens:
        name, sep, text = token.partition("=")
        if not sep or not name.strip().isidentifier():
            raise InputError(f"{token!r}: expected name=value, e.g. num_generations=4")
        try:
            parsed[name.strip()] = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            parsed[name.strip()] = text.strip()
    return parsed


def version_to_check(package: str, requested: str | None) -> str:
    """The release whose settings a config is checked against: the named one, else the installed, else the newest."""
    from grpo_compat.settings.history import load

    return requested or installed_version(package) or load(package).releases[-1]


def refused_settings(keys: list[str], package: str, version: str, context: str) -> list[Finding]:
    """A finding for each setting the release refuses: removed, renamed, newer than it, or unknown (a typo)."""
    from grpo_compat.settings.installed import refused_names

    return [
        Finding(f"{problem.kind}-setting", "error", problem.message)
        for problem in refused_names(list(keys), package, version, context)
    ]


def upgrade_between(pin: str, package: str, target: str | None) -> tuple[str, str]:
    """(old, new) releases of ``--from PACKAGE==OLD``: OLD must be a release the data holds, new the named or
    installed one."""
    from grpo_compat.settings.history import load

    name, sep, old = pin.partition("==")
    if not sep or name.strip().lower() != package:
        raise InputError(f"--from {pin!r}: expected {package}==VERSION, e.g. {package}=={load(package).releases[0]}")
    releases = load(package).releases
    if old.strip() not in releases:
        raise InputError(
            f"--from {pin!r}: {package} {old.strip()} is not a release known here ({releases[0]} ... {releases[-1]})"
        )
    new = target or installed_version(package)
    if not new:
        option = "--swift-version" if package == "ms-swift" else "--trl-version"
        raise InputError(f"--from compares with the installed {package}, and none is installed: pass {option} X.Y.Z")
    return old.strip(), new


def trl_settings(config: dict, world_size: int) -> GRPOSettings:
    return settings_from(config, world_size=world_size, eval_enabled=eval_is_enabled(config.get("eval_strategy", "no")))


def swift_settings(source: object, world_size: int, swift_version: str) -> GRPOSettings:
    """Settings of `swift rlhf` arguments (a mapping, or swift's RLHFArguments), with ms-swift's own GRPO
    defaults: they differ from TRL's and between versions."""
    get = field_getter(source)
    pdbs = get("per_device_train_batch_size", 1)
    ga = get("gradient_accumulation_steps", None)
    if ga is None:  # 3.12+ default to 1 for GRPO; earlier versions to ceil(16 / batch / processes)
        ga = (
            1
            if release(swift_version) >= (3, 12) or not isinstance(pdbs, int) or pdbs < 1
            else max(1, math.ceil(16 / pdbs / world_size))
        )
    # Evaluation needs validation data: a val_dataset, or a split (default 1% before 3.12, none after).
    split = get("split_dataset_ratio", 0.01 if release(swift_version) < (3, 12) else 0)
    has_eval_data = bool(get("val_dataset", None)) or split not in (0, "0", "0.0", None)
    deepspeed = get("deepspeed", None)
    return settings_from(
        source,
        per_device_train_batch_size=pdbs,
        gradient_accumulation_steps=ga,
        per_device_eval_batch_size=get("per_device_eval_batch_size", 1),
        world_size=world_size,
        eval_enabled=has_eval_data and eval_is_enabled(get("eval_strategy", None) or "steps"),
        deepspeed_stage=DEEPSPEED_STAGES.get(str(deepspeed)) if deepspeed else None,
        has_teacher=bool(get("teacher_model", None) or get("teacher_model_server", None)),
    )


def swift_settings_to_check(arguments: object, swift_version: str) -> GRPOSettings:
    """What grpo_compat checks of ms-swift's RLHFArguments: every rule on 4.x; sequence parallel on 3.x.

    ms-swift 3.x builds trl's GRPOConfig from them, which trl.grpo-config-check refuses before any
    model loads; the defaults for the rest pass every batch rule. 4.x skips trl's checks.
    """
    if release(swift_version) < (4,):
        return GRPOSettings(sequence_parallel_size=getattr(arguments, "sequence_parallel_size", 1))
    return swift_settings(arguments, launched_world_size(), swift_version)


# Arguments objects already checked: an in-process apply() and the swift plugin may both see one.
_checked_swift_arguments: weakref.WeakValueDictionary[int, object] = weakref.WeakValueDictionary()


def refuse_impossible_swift_grpo(arguments: object) -> None:
    """Raise GRPOSettingsError when ms-swift GRPO arguments cannot train (naming a fix); once per object."""
    if getattr(arguments, "rlhf_type", None) != "grpo" or _checked_swift_arguments.get(id(arguments)) is arguments:
        return
    from grpo_compat.core import versions  # read at call time: a test stands in an older ms-swift release there

    swift_version = versions.installed_version("ms-swift") or "4"  # swift's own arguments: it is installed
    rules = rules_for(versions.installed_version("trl"), swift_version)
    refuse_unless_valid(swift_settings_to_check(arguments, swift_version), rules)
    try:
        _checked_swift_arguments[id(arguments)] = arguments
    except TypeError:  # an object without weak references is checked again next time, which is harmless
        pass


def checked_version(option: str, version: str | None) -> str | None:
    """A version given on the command line, refused unless it reads as one."""
    try:
        version is None or release(version)
    except ValueError:
        raise InputError(f"{option} {version!r}: expected a version such as 0.16.1") from None
    return version


def world_size_of(world_size: int | None, nproc_per_node: int | None, nnodes: int) -> int:
    for option, count in (("--world-size", world_size), ("--nproc-per-node", nproc_per_node), ("--nnodes", nnodes)):
        if count is not None and count < 1:
            raise InputError(f"{option} {count}: expected 1 or more")
    if world_size:
        return world_size
    if nproc_per_node:
        return nproc_per_node * nnodes
    env = os.environ.get("WORLD_SIZE") or os.environ.get("NPROC_PER_NODE")
    return int(env) if env and env.isdigit() else 1


# The newest trl each ms-swift 3.x release series declares (its METADATA's trl upper bound, read for
# 3.2.2 ... 3.12.6): `check --swift-version` uses that trl's rules when the installed trl cannot run it.
# ms-swift 4.x decides its GRPO rules itself, whatever the trl.
SWIFT_NEWEST_TRL = (
    ("ms-swift>=3.0,<3.4", "0.16"),
    ("ms-swift>=3.4,<3.5", "0.17"),
    ("ms-swift>=3.5,<3.7", "0.19"),
    ("ms-swift>=3.7,<3.9", "0.20"),
    ("ms-swift>=3.9,<3.10", "0.23"),
    ("ms-swift>=3.10,<4", "0.24"),
)


def rules_here(trl_version: str | None, swift_version: str | None) -> Rules:
    """The rules to check with: a named trl; else the installed one, unless the named ms-swift cannot run with it."""
    if trl_version or not swift_version:
        return rules_for(trl_version or installed_version("trl"), swift_version)
    installed = installed_version("trl")
    swift = {"ms-swift": swift_version}
    newest = next((trl for window, trl in SWIFT_NEWEST_TRL if window_problem((window,), swift) is None), None)
    if newest is None or (installed and release(installed)[:2] <= release(newest)[:2]):
        return rules_for(installed, swift_version)
    rules = rules_for(newest, swift_version)
    why = f"ms-swift {swift_version} runs with trl <= {newest}, not the installed {installed or 'none'}"
    return replace(rules, name=f"{rules.name}; {why}")


def swift_version_here(requested: str | None) -> str:
    version = requested or installed_version("ms-swift")
    if not version:
        raise InputError("ms-swift is not installed here: pass --swift-version X.Y.Z to check for it")
    return version
