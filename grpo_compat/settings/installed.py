"""The setting names an installed trl / ms-swift takes, read without importing it (``grpo-compat check`` loads no
torch): the release's own classes from the settings data (or, for a release newer than the data, from its source by
AST), transformers' training arguments from the installed transformers by AST, and for ``trl grpo --config`` the
``accelerate launch`` options its leftover keys go to.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path

from grpo_compat.core.versions import installed_version
from grpo_compat.settings import extract
from grpo_compat.settings.history import load

# Where transformers defines the training arguments each library's arguments inherit.
TRANSFORMERS_BASES = {
    "trl": ("transformers/training_args.py", "TrainingArguments"),
    "ms-swift": ("transformers/training_args_seq2seq.py", "Seq2SeqTrainingArguments"),
}
TOP_LEVEL = {"trl": "trl", "ms-swift": "swift", "transformers": "transformers", "accelerate": "accelerate"}
# Keys `trl grpo --config` reads itself: environment variables, and trl's named accelerate configs.
TRL_CONFIG_KEYS = frozenset({"env", "accelerate_config"})


def site_of(package: str) -> Path | None:
    """The folder holding an installed package's top-level folder (no import of it)."""
    try:
        spec = importlib.util.find_spec(TOP_LEVEL[package])
    except (ImportError, ValueError):
        return None
    locations = list(spec.submodule_search_locations or []) if spec else []
    return Path(locations[0]).parent if locations else None


@cache
def transformers_settings(package: str) -> dict[str, dict] | None:
    """The training arguments of the installed transformers that ``package``'s arguments inherit, with defaults."""
    site = site_of("transformers")
    if site is None:
        return None
    path, name = TRANSFORMERS_BASES[package]
    source = extract.Source(site, "transformers")
    ref = extract.find_class(source, path, name)
    return extract.dataclass_fields(source, ref)[0] if ref else None


def transformers_fields(package: str) -> frozenset[str] | None:
    inherited = transformers_settings(package)
    return None if inherited is None else frozenset(inherited)


@cache
def own_settings(package: str, version: str) -> dict[str, dict]:
    """The release's own settings: the data for a release it holds, else the installed source of that version."""
    data = load(package)
    if version in data.releases or installed_version(package) != version or site_of(package) is None:
        return data.at(version)
    return extract.READERS[package](site_of(package))["settings"]


@cache
def accelerate_launch_options() -> frozenset[str]:
    site = site_of("accelerate")
    launch = site / "accelerate" / "commands" / "launch.py" if site else None
    if launch is None or not launch.is_file():
        return frozenset()
    return frozenset(n.replace("-", "_") for n in re.findall(r"\"--([A-Za-z0-9_-]+)\"", launch.read_text()))


def valid_names(package: str, version: str, context: str) -> tuple[set[str], bool]:
    """(names the release takes, complete?) for ``context``: "config" (``trl grpo --config``), "python"
    (``GRPOConfig(...)``) or "cli" (``swift rlhf`` arguments). Not complete without transformers installed: then
    only names the history knows are judged."""
    settings = own_settings(package, version)
    names = {n for n, e in settings.items() if context != "python" or e.get("of") == "GRPOConfig"}
    inherited = transformers_fields(package)
    names |= set(inherited or ())
    if context == "config":
        names |= TRL_CONFIG_KEYS | accelerate_launch_options()
    return names, inherited is not None


def cli_accepts(name: str, valid: set[str]) -> bool:
    """argparse takes ``--no_X`` for a boolean X and any unambiguous prefix of an option (allow_abbrev)."""
    if name in valid or (name.startswith("no_") and name[3:] in valid):
        return True
    return len(name) > 2 and any(v.startswith(name) for v in valid)


def swift_argument_names(tokens: list[str], environ: Mapping[str, str]) -> list[str]:
    """The argument names of ``swift rlhf`` tokens that ms-swift's parse_args leaves unparsed unless it takes them;
    none where it reads its arguments elsewhere (RAY_SWIFT_ARGS, a json file) or ignores unknown ones."""
    names = [t[2:].split("=", 1)[0].replace("-", "_") for t in tokens if t.startswith("--") and len(t) > 2]
    if environ.get("RAY_SWIFT_ARGS") or (tokens and str(tokens[0]).endswith(".json")) or "ignore_args_error" in names:
        return []
    return names


def refused_names(keys: list[str], package: str, version: str, context: str) -> list:
    """The problems of the keys the release refuses (see grpo_compat.settings.drift)."""
    from grpo_compat.settings import drift

    if load(package).nearest(version) is None:
        return []  # older than the data (trl < 0.14, ms-swift < 3.4): its settings are not known here
    valid, complete = valid_names(package, version, context)
    history = load(package)
    if context == "config":
        accelerate = accelerate_launch_options()
        keys = [k for k in keys if k not in valid and not cli_accepts(k, accelerate)]
    elif context == "cli":
        keys = [k for k in keys if not cli_accepts(k, valid)]
    if not complete:
        # Without transformers the inherited fields are unknown: a name the history saw leave GRPOConfig may still
        # be a TrainingArguments field (per_device_train_batch_size left GRPOConfig in 0.15), so only the removals
        # recorded with their reason are judged.
        keys = [k for k in keys if k in history.settings and (package, k) in drift.RENAMES]
    return drift.problems(keys, package, version, valid)
