"""The settings data of every trl and ms-swift release: generated from the wheels, checked against the installed trl."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

import pytest

from grpo_compat.settings import extract, history


def installed_site(top_level: str) -> Path:
    spec = importlib.util.find_spec(top_level)
    return Path(next(iter(spec.submodule_search_locations))).parent


def test_the_committed_trl_data_is_what_the_generator_reads_from_the_installed_trl():
    version = importlib.metadata.version("trl")
    data = history.load("trl")
    assert version in data.releases, f"trl {version} is missing: run python -m matrix.settings_history"
    assert data.at(version) == extract.trl_release_settings(installed_site("trl"))["settings"]


def test_the_data_covers_every_release_from_the_floor_on():
    trl, swift = history.load("trl"), history.load("ms-swift")
    assert trl.releases[0] == "0.14.0" and "0.28.0" in trl.releases and "1.16.0" in trl.releases
    assert swift.releases[0] == "3.4.0" and {"3.5.3", "3.12.6", "4.6.0"} <= set(swift.releases)
    assert all(data.at(v) for data in (trl, swift) for v in data.releases)  # no release read as empty


def test_max_prompt_length_was_deprecated_in_trl_0_26_and_removed_in_0_28():
    trl = history.load("trl")
    assert trl.removed_after("max_prompt_length", "1.16.0") == ("0.27.2", "0.28.0")
    assert "deprecated" in trl.at("0.26.0")["max_prompt_length"]
    assert trl.at("0.19.0")["max_prompt_length"]["default"] == 512


def test_a_setting_new_in_a_later_release_is_named_with_it():
    trl = history.load("trl")
    first = trl.spans("vllm_structured_outputs_regex")[0][0]
    assert trl.added_later("vllm_structured_outputs_regex", "0.19.0") == first


def test_a_setting_the_release_has_is_not_added_later_when_a_later_release_changes_its_default():
    trl = history.load("trl")
    assert trl.at("0.19.0")["max_prompt_length"]["default"] == 512  # 0.26.0 changed it to None
    assert trl.added_later("max_prompt_length", "0.19.0") is None


def test_spans_merge_consecutive_releases_with_the_same_entry():
    entry, other = {"type": "int", "default": 1}, {"type": "int", "default": 2}
    per_release = {"1.0": {"a": entry}, "1.1": {"a": entry}, "1.2": {"a": other}, "1.3": {}, "1.4": {"a": other}}
    spans = history.spans_of(per_release)
    assert spans == {"a": [["1.0", "1.1", entry], ["1.2", "1.2", other], ["1.4", "1.4", other]]}


def test_type_text_reads_typing_and_pep604_alike():
    import ast

    def text(source: str) -> str:
        return extract.type_text(ast.parse(source, mode="eval").body)

    assert text("Optional[List[int]]") == text("list[int] | None") == "list[int] | None"
    assert text("Union[str, int, None]") == "str | int | None"


@pytest.mark.slow
def test_the_generator_reads_each_cached_wheel_as_the_committed_data():
    from matrix import settings_history

    for package in history.PACKAGES:
        wheels = settings_history.cached_wheels(package)
        if not wheels:
            pytest.skip("no cached wheels: run python -m matrix.settings_history once")
        data = history.load(package)
        for version in (data.releases[0], data.releases[len(data.releases) // 2], data.releases[-1]):
            assert data.at(version) == extract.READERS[package](wheels[version])["settings"], (package, version)
