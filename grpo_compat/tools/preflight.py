"""``grpo-compat check``: validate GRPO settings from a TRL config file or ms-swift arguments, no torch.

The command line only: what it reads and prints. ms-swift's settings by version, which the ms-swift patch
checks at run time too, are grpo_compat.fixes.swift_settings.

grpo-compat check grpo.yaml --world-size 8
grpo-compat check --swift --nproc-per-node 2 -- --num_generations 4 --per_device_train_batch_size 1
"""

from __future__ import annotations

import json
import os
from dataclasses import fields, replace
from pathlib import Path

from grpo_compat.core.versions import GRPO_COMPAT_VERSION, installed_version, is_version, release, window_problem
from grpo_compat.fixes.swift_settings import swift_settings as swift_settings  # the command's swift arguments
from grpo_compat.fixes.validation import Finding, GRPOSettings, Rules, eval_is_enabled, rules_for, settings_from
from grpo_compat.tools.arguments import InputError, read_input


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
            value: object = int(token) if token.lstrip("-").isdecimal() else token
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


def swift_rollout_findings(arguments: dict, swift_version: str) -> list[Finding]:
    """A finding when the arguments name a vllm_mode that this ms-swift cannot run without --use_vllm true."""
    from grpo_compat.fixes.swift_settings import vllm_mode_without_vllm

    problem = vllm_mode_without_vllm(arguments, swift_version)
    return [Finding("vllm-mode-without-use-vllm", "error", problem)] if problem else []


def upgrade_between(pin: str, package: str, target: str | None) -> tuple[str, str]:
    """(old, new) releases of ``--from PACKAGE==OLD``: OLD must be a release the data holds, new the named or
    installed one."""
    from grpo_compat.settings.history import load

    name, sep, old = pin.partition("==")
    if not sep or name.strip().lower() != package or not is_version(old):
        raise InputError(f"--from {pin!r}: expected {package}==VERSION, e.g. {package}=={load(package).releases[0]}")
    known_release(package, old.strip(), f"--from {pin!r}")
    new = target or installed_version(package)
    if not new:
        option = "--swift-version" if package == "ms-swift" else "--trl-version"
        raise InputError(f"--from compares with the installed {package}, and none is installed: pass {option} X.Y.Z")
    return old.strip(), new


def known_release(package: str, version: str | None, option: str, older_than_data: bool = False) -> str | None:
    """``version`` when the settings data holds that release of ``package``; else an InputError that says which it
    holds, rather than a check against the nearest older release's data. ``older_than_data``: a version before the
    data's first release passes (ms-swift's data begins at 3.4.0, its batch rules at 3.0)."""
    from grpo_compat.settings.history import load

    releases = load(package).releases
    if version is None or version in releases or (older_than_data and release(version) < release(releases[0])):
        return version
    series = [known for known in releases if release(known)[:2] == release(version)[:2]]
    hint = f": did you mean {' or '.join(series)}?" if series else ""
    if not series and release(version) > release(releases[-1]):
        hint = (
            f": grpo-compat {GRPO_COMPAT_VERSION} knows releases up to {releases[-1]}. To check a newer {package}, "
            f"install it and leave the option out (its settings are then read as {releases[-1]}'s, and the check "
            "says it is newer than tested), or upgrade grpo-compat"
        )
    known = f"({releases[0]} ... {releases[-1]})"
    raise InputError(f"{option}: {package} {version} is not a release known here {known}{hint}")


def newer_than_tested_here(trl_version: str | None, swift_version: str | None) -> list[dict]:
    """The packages the check is about (the installed ones; trl and ms-swift as named) that are newer than the
    version matrix has tested, with the patches acting on them through an open window (grpo_compat.core.tested)."""
    from grpo_compat.core.registry import declared_patches
    from grpo_compat.core.tested import newer_than_tested
    from grpo_compat.core.versions import installed_versions

    named = {"trl": trl_version, "ms-swift": swift_version}
    versions = {**installed_versions(), **{name: version for name, version in named.items() if version}}
    return newer_than_tested(versions, [p for p in declared_patches() if window_problem(p.requires, versions) is None])


def trl_settings(config: dict, world_size: int) -> GRPOSettings:
    return settings_from(config, world_size=world_size, eval_enabled=eval_is_enabled(config.get("eval_strategy", "no")))


def checked_version(option: str, version: str | None, package: str) -> str | None:
    """A version of ``package`` given on the command line, refused unless it reads as one and is a known release."""
    if version is not None and not is_version(version):
        raise InputError(f"{option} {version!r}: expected a version such as 0.16.1")
    return known_release(package, version, f"{option} {version}", older_than_data=True)


def world_size_of(world_size: int | None, nproc_per_node: int | None, nnodes: int | None) -> int:
    """The processes in total: --world-size, or --nproc-per-node x --nnodes; given both ways, they must agree."""
    for option, count in (("--world-size", world_size), ("--nproc-per-node", nproc_per_node), ("--nnodes", nnodes)):
        if count is not None and count < 1:
            raise InputError(f"{option} {count}: expected 1 or more")
    if nnodes is not None and nproc_per_node is None:
        raise InputError(f"--nnodes {nnodes}: give --nproc-per-node with it (processes per machine)")
    launched = None if nproc_per_node is None else nproc_per_node * (nnodes or 1)
    if world_size and launched and world_size != launched:
        machines = f" x --nnodes {nnodes}" if nnodes is not None else ""
        raise InputError(
            f"--world-size {world_size} disagrees with --nproc-per-node {nproc_per_node}{machines} = {launched} "
            "processes: give one of them"
        )
    if world_size or launched:
        return world_size or launched
    env = os.environ.get("WORLD_SIZE") or os.environ.get("NPROC_PER_NODE")
    return int(env) if env and env.isdecimal() else 1


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
