"""What an upgrade changes under a config that still parses: ``grpo-compat check CONFIG --from trl==A``.

A setting's effective value is the config's own value, else the release's default. Every setting whose effective
value differs between release A and the installed (or named) release is listed, and every setting the config sets
that the newer release no longer has. A default inherited from transformers' training arguments is read from the
installed transformers for both releases (the transformers of release A may have had another).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path

from grpo_compat.settings.history import load
from grpo_compat.settings.installed import own_settings, transformers_settings

NOT_THERE = "-"


@dataclass(frozen=True)
class Change:
    setting: str
    before: object
    after: object
    change: str  # default | removed | set-but-removed | new
    note: str = ""


# trl settings whose value decides what GRPO optimises, so a changed default changes the loss of an unchanged config;
# each with the setting that must be on (non-zero) for it to act, or None. use_bias_correction_kl: False -> True in
# trl 1.10.0 (the KL term is multiplied by the importance ratio; census N18), and it acts only with beta != 0.
LOSS_SETTINGS: dict[str, str | None] = {
    **dict.fromkeys(("loss_type", "beta", "scale_rewards", "importance_sampling_level", "epsilon", "epsilon_high")),
    **dict.fromkeys(("delta", "mask_truncated_completions", "top_entropy_quantile", "num_iterations", "temperature")),
    "max_completion_length": None,
    "use_bias_correction_kl": "beta",
    **dict.fromkeys(("vllm_importance_sampling_correction", "vllm_importance_sampling_mode"), "use_vllm"),
    **dict.fromkeys(("vllm_importance_sampling_cap", "vllm_importance_sampling_clip_max"), "use_vllm"),
}


# Old spellings of the same value: trl 0.22 turned scale_rewards True / False into "group" / "none".
SAME_MEANING = {"scale_rewards": {True: "group", False: "none"}}
# Settings that act on some models only.
ONLY_FOR = {"router_aux_loss_coef": "; changes the loss of a mixture-of-experts model (1.14 on: the model's own)"}


def loss_note(name: str, config: dict, before: object, after_value: object, after: dict) -> str:
    """ "; changes the loss" for a trl setting of LOSS_SETTINGS, or why it does not for this config; "" otherwise."""
    spelled = SAME_MEANING.get(name, {})
    if spelled and spelled.get(before, before) == spelled.get(after_value, after_value):  # type: ignore[arg-type]
        return f"; the same meaning ({before!r} is {spelled.get(before, before)!r})"
    if name in ONLY_FOR:
        return ONLY_FOR[name]
    if name not in LOSS_SETTINGS:
        return ""
    switch = LOSS_SETTINGS[name]
    if switch is None:
        return "; changes the loss"
    value = config.get(switch, (after.get(switch) or {}).get("default"))
    if value in (None, False, 0, 0.0, "false", "False", "0"):
        return f"; changes the loss only with {switch} set (it is {value!r} here)"
    return f"; changes the loss ({switch}={value!r})"


def _show(value: object) -> str:
    if value is NOT_THERE:
        return NOT_THERE
    if isinstance(value, dict) and set(value) == {"expr"}:
        return str(value["expr"])
    return repr(value)


def changes(config: dict, package: str, old: str, new: str) -> list[Change]:
    """Every setting whose effective value differs between ``old`` and ``new``, and those ``new`` lacks."""
    data = load(package)
    before, after = data.at(old), own_settings(package, new)
    inherited = transformers_settings(package) or {}
    found = []
    for name in sorted(set(before) | set(after) | set(config)):
        default_before = (before.get(name) or inherited.get(name) or {}).get("default", NOT_THERE)
        default_after = (after.get(name) or inherited.get(name) or {}).get("default", NOT_THERE)
        borrowed = (
            "; transformers' default, read from the installed one"
            if name in inherited and not (name in before and name in after)
            else ""
        )
        if name in config:
            if default_before is not NOT_THERE and default_after is NOT_THERE:
                gone = data.removed_after(name, new)
                when = f"removed in {package} {gone[1]}" if gone else f"not a setting of {package} {new}"
                found.append(Change(name, config[name], NOT_THERE, "set-but-removed", f"your value; {when}"))
            continue
        if default_before == default_after:
            continue
        if default_after is NOT_THERE:
            gone = data.removed_after(name, new)
            note = f"removed in {package} {gone[1]}" if gone else ""
            found.append(Change(name, default_before, NOT_THERE, "removed", note))
        elif default_before is NOT_THERE:
            found.append(Change(name, NOT_THERE, default_after, "new", f"new since {package} {old}"))
        else:
            loss = loss_note(name, config, default_before, default_after, after) if package == "trl" else ""
            note = "default changed" + borrowed + loss
            found.append(Change(name, default_before, default_after, "default", note))
    return found


def as_json(found: list[Change], package: str, old: str, new: str) -> dict:
    return {
        "from": f"{package} {old}",
        "to": f"{package} {new}",
        "changes": [
            {**asdict(c), "before": _show(c.before), "after": _show(c.after)} for c in found if c.change != "new"
        ],
        "new_settings": [{"setting": c.setting, "default": _show(c.after)} for c in found if c.change == "new"],
    }


def table(found: list[Change], package: str, old: str, new: str) -> str:
    rows = [c for c in found if c.change != "new"]
    added = len(found) - len(rows)
    if not rows:
        lines = [f"No setting of this config means something else on {package} {new} than on {package} {old}."]
    else:
        header = ("setting", f"{package} {old}", f"{package} {new}", "")
        cells = [header, *[(c.setting, _show(c.before), _show(c.after), c.note) for c in rows]]
        widths = [min(40, max(len(row[i]) for row in cells)) for i in range(3)]
        lines = [f"What this config means on {package} {new} that it did not on {package} {old}:"]
        lines += [
            "  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=False)) + f"  {row[3]}"
            for row in cells
        ]
    if added:
        lines.append(f"({added} settings are new since {package} {old}, at their defaults: --json lists them)")
    return "\n".join(line.rstrip() for line in lines)


# A config file's record of the trl it was written for: a comment, since trl refuses an unknown key.
_SAVED_TRL = re.compile(r"^\s*#.*?\btrl(?:_version\s*[:=]\s*|\s*==\s*)v?(\d+(?:\.\d+)+)", re.MULTILINE)


def saved_trl_note(path: Path, text: str, config: dict, installed: str | None) -> str | None:
    """A line for `doctor --config`: the config (its ``text``, read as ``config``) was written for an older trl."""
    from grpo_compat.core.versions import release

    saved = _SAVED_TRL.search(text)
    if saved is None or not installed or release(installed) <= release(saved.group(1)):
        return None
    old = load("trl").nearest(saved.group(1)) or load("trl").releases[0]
    found = [c for c in changes(config, "trl", old, installed) if c.change != "new"]
    return (
        f"{path} records trl {saved.group(1)}; trl {installed} is installed: {len(found)} of its settings mean "
        f"something else now. `grpo-compat check {path} --from trl=={old}` lists them."
    )
