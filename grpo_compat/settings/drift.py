"""Settings a release refuses, named with the release that removed or renamed them and what to use instead.

``problems(names, package, version, valid)``: for each name the installed release does not take, why (removed in
release R, renamed to N in R, new in a later release, or a typo of a valid name) and what to do. ``valid`` is what
the installed release really takes (its dataclass fields at run time, or its source read by AST); the release
history (``trl.json`` / ``ms-swift.json``) says when a name went away and what replaced it.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from grpo_compat.settings.history import load

# Removals the data cannot explain itself (no deprecation note naming the successor). Where the note names one,
# the note is used. Each: (replacement setting or None, what to do, upstream reference).
RENAMES: dict[tuple[str, str], tuple[str | None, str, str]] = {
    ("trl", "max_prompt_length"): (
        None,
        "no replacement: GRPO does not truncate prompts any more; filter or truncate overlong prompts in the "
        "dataset before training (deprecated in trl 0.26)",
        "trl PR #5964, axolotl #3386, unsloth PR #8330",
    ),
    ("trl", "use_liger_loss"): (
        "use_liger_kernel",
        "the Liger GRPO loss is switched on by use_liger_kernel",
        "trl PR #4364",
    ),
    ("trl", "vllm_guided_decoding_regex"): (
        "vllm_structured_outputs_regex",
        "vLLM renamed guided decoding to structured outputs",
        "trl PR #4797",
    ),
    ("trl", "wandb_log_unique_prompts"): (
        "log_unique_prompts",
        "the same switch for every logger",
        "trl 0.26 GRPOConfig",
    ),
    ("trl", "torch_dtype"): ("dtype", "transformers renamed torch_dtype to dtype", "trl 0.23 ModelConfig"),
    ("trl", "gradient_checkpointing_use_reentrant"): (
        None,
        "no replacement setting of trl: pass gradient_checkpointing_kwargs: "
        '{"use_reentrant": true} (a TrainingArguments field)',
        "trl 0.27 GRPOScriptArguments",
    ),
    ("ms-swift", "eval_datasets"): ("eval_dataset", "renamed", "ms-swift 3.6 BaseArguments"),
    ("ms-swift", "eval_datasets_args"): ("eval_dataset_args", "renamed", "ms-swift 3.6 BaseArguments"),
    ("ms-swift", "metric"): ("eval_metric", "renamed", "ms-swift 4.0 TrainArguments"),
    ("ms-swift", "train_type"): ("tuner_type", "renamed in 4.0; 4.0.x still took train_type", "ms-swift 4.0 arguments"),
}
_NAMED_IN_NOTE = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)`")


@dataclass(frozen=True)
class SettingProblem:
    name: str
    kind: str  # removed | renamed | newer | unknown
    message: str
    release: str | None = None  # the release that removed or renamed it, or that first has it (newer)
    replacement: str | None = None

    def __str__(self) -> str:
        return self.message


def _replacement(package: str, name: str, note: str, valid: set[str]) -> tuple[str | None, str, str]:
    """(new name or None, advice, reference) for a setting the installed release lacks."""
    if (package, name) in RENAMES:
        return RENAMES[(package, name)]
    named = [n for n in _NAMED_IN_NOTE.findall(note) if n != name and n in valid]
    if named:
        return named[0], f"its deprecation note: {note}", f"{package} deprecation note"
    for candidate in (f"vllm_{name}", *difflib.get_close_matches(name, sorted(valid), n=1, cutoff=0.85)):
        if candidate in valid:
            return candidate, "the closest setting the installed release has", "release history"
    return None, note or "no replacement recorded", f"{package} release notes"


def problems(names: list[str], package: str, version: str, valid: set[str]) -> list[SettingProblem]:
    """Why each name the installed release does not take is refused, and what to use instead."""
    data = load(package)
    found = []
    for name in names:
        if name in valid:
            continue
        gone = data.removed_after(name, version)
        if gone:
            last, first_without = gone
            note = data.spans(name)[-1][2].get("deprecated", "")
            new, advice, reference = _replacement(package, name, note, valid)
            if new:
                message = (
                    f"`{name}` was renamed to `{new}` in {package} {first_without} (`{name}` last in {last}): "
                    f"set `{new}` instead ({advice}; {reference})."
                )
            else:
                message = f"`{name}` was removed in {package} {first_without} (last in {last}): {advice} ({reference})."
            found.append(SettingProblem(name, "renamed" if new else "removed", message, first_without, new))
            continue
        newer = data.added_later(name, version)
        if newer:
            message = (
                f"`{name}` is new in {package} {newer}: the installed {package} {version} does not take it; "
                f"upgrade {package}, or remove it."
            )
            found.append(SettingProblem(name, "newer", message, newer))
            continue
        close = difflib.get_close_matches(name, sorted(valid), n=1, cutoff=0.75)
        hint = f"did you mean `{close[0]}`?" if close else "no setting has a close name."
        found.append(
            SettingProblem(
                name,
                "unknown",
                f"`{name}` is not a setting of {package} {version}: {hint}",
                None,
                close[0] if close else None,
            )
        )
    return found


def refuse(where: str, package: str, names: list[str], valid: set[str]) -> None:
    """Raise SettingNotTakenError for the names the installed release does not take (the patches' refusal)."""
    from grpo_compat.core.errors import SettingNotTakenError
    from grpo_compat.core.versions import installed_version

    version = installed_version(package) or "0"
    found = problems(names, package, version, valid)
    raise SettingNotTakenError(f"{where} on {package} {version}: " + " ".join(p.message for p in found))


def init_fields(dataclass_type: type) -> set[str]:
    """The keywords a dataclass's ``__init__`` takes: its own fields and the inherited ones."""
    fields = getattr(dataclass_type, "__dataclass_fields__", {})
    return {name for name, field in fields.items() if field.init}


def refuse_keywords(where: str, package: str, dataclass_type: type, keywords: dict) -> None:
    """Refuse, as :func:`refuse` does, the keywords a dataclass's ``__init__`` would reject with a bare TypeError;
    every keyword it takes passes."""
    taken = init_fields(dataclass_type)
    unknown = [name for name in keywords if name not in taken]
    if unknown and taken:
        refuse(where, package, unknown, taken)
