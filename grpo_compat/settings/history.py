"""The settings of every trl and ms-swift release, as ``trl.json`` / ``ms-swift.json`` hold them.

Each file is written by ``python -m matrix.settings_history`` from the released wheels (never by hand):
``releases`` in order, and per setting the spans of consecutive releases with the same type and default,
``[first, last, {"type", "default", "of"[, "deprecated"]}]``. A setting absent from a release was not there.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from grpo_compat.core.versions import release

DATA = Path(__file__).resolve().parent
PACKAGES = ("trl", "ms-swift")


class History:
    def __init__(self, data: dict) -> None:
        self.package: str = data["package"]
        self.releases: list[str] = data["releases"]
        self.settings: dict[str, list[list]] = data["settings"]
        self._index = {version: i for i, version in enumerate(self.releases)}

    def nearest(self, version: str) -> str | None:
        """The release a version reads as: itself, else the newest release before it (a dev build, a post)."""
        if version in self._index:
            return version
        key = release(version)
        older = [v for v in self.releases if release(v) <= key]
        return older[-1] if older else None

    def at(self, version: str) -> dict[str, dict]:
        """Every setting of a release (or of the release it reads as) with its type and default."""
        nearest = self.nearest(version)
        if nearest is None:
            return {}
        i = self._index[nearest]
        found = {}
        for name, spans in self.settings.items():
            for first, last, entry in spans:
                if self._index[first] <= i <= self._index[last]:
                    found[name] = entry
                    break
        return found

    def spans(self, name: str) -> list[list]:
        return self.settings.get(name, [])

    def removed_after(self, name: str, version: str) -> tuple[str, str] | None:
        """(last release with it, first release without it) for a setting the release reads as lacks."""
        nearest = self.nearest(version)
        if nearest is None:
            return None
        i = self._index[nearest]
        before = [span for span in self.spans(name) if self._index[span[1]] < i]
        if not before or any(self._index[f] <= i <= self._index[t] for f, t, _ in self.spans(name)):
            return None
        last = before[-1][1]
        return last, self.releases[self._index[last] + 1]

    def added_later(self, name: str, version: str) -> str | None:
        """The first release after ``version`` that has the setting, when it has none yet."""
        nearest = self.nearest(version)
        i = -1 if nearest is None else self._index[nearest]
        if any(self._index[first] <= i <= self._index[last] for first, last, _ in self.spans(name)):
            return None  # the release has it: a later span is a changed type or default, not an addition
        later = [span[0] for span in self.spans(name) if self._index[span[0]] > i]
        return later[0] if later and not self.removed_after(name, version) else None


@cache
def load(package: str) -> History:
    if package not in PACKAGES:
        raise ValueError(f"no settings data for {package!r}: {', '.join(PACKAGES)}")
    return History(json.loads((DATA / f"{package}.json").read_text(encoding="utf-8")))


def spans_of(per_release: dict[str, dict[str, dict]]) -> dict[str, list[list]]:
    """Per-release settings (releases in order) as spans of consecutive releases holding the same entry."""
    releases = list(per_release)
    spans: dict[str, list[list]] = {}
    for i, version in enumerate(releases):
        for name, entry in per_release[version].items():
            runs = spans.setdefault(name, [])
            previous = releases[i - 1] if i else None
            if runs and runs[-1][1] == previous and runs[-1][2] == entry:
                runs[-1][1] = version
            else:
                runs.append([version, version, entry])
    return dict(sorted(spans.items()))


def dump(package: str, releases: list[str], spans: dict[str, list[list]], reads: str) -> str:
    """The data file's text: one line per setting, so a new release shows as a small diff."""
    head = json.dumps({"package": package, "reads": reads, "releases": releases})[:-1]
    lines = [f"  {json.dumps(name)}: {json.dumps(runs)}" for name, runs in spans.items()]
    return head + ', "settings": {\n' + ",\n".join(lines) + "\n}}\n"
