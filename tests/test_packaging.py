"""The wheel: patches ship as grpo_compat.patches, never as a top-level package; the console script exists."""

from __future__ import annotations

import zipfile

import pytest

from tests.helpers import REPO, build_wheel

pytestmark = pytest.mark.slow  # builds a wheel


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    return zipfile.ZipFile(build_wheel(tmp_path_factory.mktemp("dist")))


def test_patches_ship_inside_grpo_compat(wheel):
    names = wheel.namelist()
    assert "grpo_compat/patches/trl/grpo_config_check.py" in names
    assert not [n for n in names if n.startswith("patches/")]
    shipped = {n.removeprefix("grpo_compat/") for n in names if n.startswith("grpo_compat/patches/")}
    on_disk = {str(p.relative_to(REPO)) for p in (REPO / "patches").rglob("*.py")}
    assert on_disk <= shipped
    assert "grpo_compat/catalogue/failures.toml" in names


def test_console_script_and_core_dependency(wheel):
    (metadata,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    text = wheel.read(metadata).decode()
    core = [line for line in text.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line]
    # packaging, PyYAML (`check` reads trl's YAML configs), and tomli only where tomllib is missing.
    assert [line.split(":", 1)[1].strip().split(">")[0] for line in core] == ["packaging", "PyYAML", "tomli"]
    assert 'python_version < "3.11"' in core[2]
    (entry_points,) = [n for n in wheel.namelist() if n.endswith("entry_points.txt")]
    assert "grpo-compat = grpo_compat.tools.cli:main" in wheel.read(entry_points).decode()


def test_the_ms_swift_plugin_file_ships_alone_in_its_folder(wheel):
    # swift puts the plugin's folder first on sys.path: nothing else there may become a top-level import name.
    folder = "grpo_compat/swift_plugin_file/"
    shipped = sorted(n.removeprefix(folder) for n in wheel.namelist() if n.startswith(folder))
    assert shipped == ["__init__.py", "grpo_compat_swift_plugin.py"]


def test_installing_the_wheel_adds_nothing_that_runs_at_interpreter_start(wheel):
    # No .pth file and no top-level sitecustomize: only `grpo-compat run` puts grpo_compat/startup on PYTHONPATH.
    names = wheel.namelist()
    assert not [n for n in names if n.endswith(".pth")]
    assert [n for n in names if n.endswith("sitecustomize.py")] == ["grpo_compat/startup/sitecustomize.py"]
    assert sorted(n for n in names if n.startswith("grpo_compat/startup/")) == [
        "grpo_compat/startup/__init__.py",
        "grpo_compat/startup/sitecustomize.py",
    ]


def test_the_wheel_carries_its_license_type_marker_and_project_urls(wheel):
    names = wheel.namelist()
    (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
    text = wheel.read(metadata).decode()
    assert [n for n in names if n.endswith(".dist-info/licenses/LICENSE")], names
    assert "License-Expression: Apache-2.0" in text
    assert "grpo_compat/py.typed" in names
    urls = [line for line in text.splitlines() if line.startswith("Project-URL:")]
    assert {line.split(":", 1)[1].split(",")[0].strip() for line in urls} >= {"Homepage", "Source", "Issues"}
