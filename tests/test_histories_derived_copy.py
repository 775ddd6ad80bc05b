"""The histories' derived copy in the user's cache (grpo_compat.histories._decoded): the shipped JSON's data, key
for key, whether it was just decoded, read back from the copy, or the copy could not be read or written."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from grpo_compat import histories


def shipped(distribution: str) -> dict:
    with gzip.open(histories.DATA / f"{distribution}.json.gz", "rt", encoding="utf-8") as stream:
        return json.load(stream)


def as_plain(data) -> dict:
    """Every table as a plain dict or value (a lazily decoded table decodes each of its keys)."""
    return {table: dict(value.items()) if hasattr(value, "items") else value for table, value in data.items()}


def copies(cache: Path) -> list[str]:
    folder = cache / "grpo_compat" / "histories"
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


@pytest.mark.parametrize("distribution", ["trl", "requests"])
def test_the_copy_reads_back_as_the_shipped_data(distribution, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = histories.DATA / f"{distribution}.json.gz"
    expected = shipped(distribution)
    first = histories._decoded(path)  # decoded from the JSON; the copy written
    assert as_plain(first) == expected
    assert [name.split("-")[0] for name in copies(tmp_path)] == [distribution]
    again = histories._decoded(path)  # read from the copy, its keyed tables decoded on demand
    assert isinstance(again["imports"], histories._LazyTable)
    module = next(iter(expected["imports"]))
    assert again["imports"].get(module) == expected["imports"][module] and again["imports"].get("no.such") is None
    assert as_plain(again) == expected
    assert histories.ApiHistory(again).releases == histories.ApiHistory(expected).releases


def test_an_unreadable_copy_is_decoded_from_the_json_and_written_again(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = histories.DATA / "requests.json.gz"
    histories._decoded(path)
    (name,) = copies(tmp_path)
    written = tmp_path / "grpo_compat" / "histories" / name
    written.write_bytes(b"not marshal data")
    assert as_plain(histories._decoded(path)) == shipped("requests")
    assert written.read_bytes() != b"not marshal data"


def test_without_a_writable_cache_the_json_is_read(tmp_path, monkeypatch):
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))  # no folder can be made under a file
    assert as_plain(histories._decoded(histories.DATA / "requests.json.gz")) == shipped("requests")


def test_writing_a_copy_removes_older_copies_of_that_distribution_for_that_python_only(tmp_path, monkeypatch):
    import marshal
    import sys

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    folder = tmp_path / "grpo_compat" / "histories"
    folder.mkdir(parents=True)
    python = f"{sys.implementation.cache_tag}-{marshal.version}"
    older = folder / f"unsloth-0123456789abcdef-{python}.marshal"
    kept = [
        folder / f"unsloth-zoo-0123456789abcdef-{python}.marshal",  # another distribution, whose name starts alike
        folder / "unsloth-0123456789abcdef-cpython-399-4.marshal",  # another Python's copy
    ]
    for path in [older, *kept]:
        path.write_bytes(b"")
    histories._decoded(histories.DATA / "unsloth.json.gz")
    assert not older.exists() and all(path.exists() for path in kept)
    assert len([n for n in copies(tmp_path) if n.startswith("unsloth-") and python in n and "zoo" not in n]) == 1
