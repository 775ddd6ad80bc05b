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
            found.append(Change(name, default_before, default_after, "default", "default changed" + borrowed))
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
