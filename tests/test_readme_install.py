"""The README's install lines, as written, install grpo_compat in a fresh env where no package index holds
grpo-compat, and `grpo_compat.apply()` runs: the clone form (`pip install .`) and a wheel built in the clone. The
commands are read from the README's marked blocks, never retyped here. The URL form cannot be fetched on these
machines: its one substitution, made for the clone too, is the repository's address for a local copy of this
checkout. No line names a tag or a release file: none exists."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO, fresh_env

REPOSITORY_URL = "https://github.com/grpo-compat/grpo-compat"
APPLY = "import grpo_compat; grpo_compat.apply(); print(grpo_compat.__file__)"


def install_block(form: str) -> list[str]:
    """The command lines of the README's block marked ``<!-- install: FORM -->``, comments dropped."""
    block = re.search(rf"<!-- install: {form} -->\n```bash\n(.*?)```", (REPO / "README.md").read_text(), re.S)
    assert block, f"README.md has no block marked <!-- install: {form} -->"
    return [line.split("  #")[0].strip() for line in block.group(1).splitlines() if line.strip()]


def run_lines(lines: list[str], cwd: Path, env: dict[str, str]) -> None:
    """The lines in one bash, as a user pastes them (a `cd` carries over), stopping at the first failure."""
    done = subprocess.run(
        ["bash", "-euc", "\n".join(lines)], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def assert_installed_and_applies(env: dict[str, str], cwd: Path) -> None:
    applied = subprocess.run(["python", "-c", APPLY], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert applied.returncode == 0, applied.stderr[-3000:]
    assert applied.stdout.strip().startswith(env["VIRTUAL_ENV"])  # the installed copy, not a source folder
    # doctor's pointer for a known failure works from the installed files alone (the catalogue ships)
    shown = subprocess.run(
        ["grpo-compat", "doctor", "--failure", "reward-function-contract"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert shown.returncode == 0 and "## reward-function-contract" in shown.stdout, shown.stderr[-3000:]


def local_clone_lines(form: str, tmp_path: Path) -> list[str]:
    """The README's block of ``form``, the repository's address replaced by a local copy of this checkout under the
    address's own name (so `cd grpo-compat` finds the clone)."""
    origin = tmp_path / "origin"
    origin.mkdir()
    cloned = subprocess.run(
        ["git", "clone", "--quiet", "--bare", str(REPO), str(origin / "grpo-compat")], capture_output=True, text=True
    )
    assert cloned.returncode == 0, cloned.stderr
    return [line.replace(REPOSITORY_URL, str(origin / "grpo-compat")) for line in install_block(form)]


@pytest.mark.slow  # pip builds and installs grpo-compat in a new venv
def test_the_readmes_clone_form_installs_grpo_compat_and_apply_runs(tmp_path):
    lines = local_clone_lines("clone", tmp_path)
    assert any(line.startswith("git clone ") for line in lines) and "pip install ." in lines
    (tmp_path / "work").mkdir()
    env = fresh_env(tmp_path)
    run_lines(lines, tmp_path / "work", env)
    assert_installed_and_applies(env, tmp_path)


@pytest.mark.slow
def test_the_readmes_wheel_form_builds_a_wheel_in_the_clone_that_installs_and_apply_runs(tmp_path):
    clone = local_clone_lines("clone", tmp_path)[:2]  # git clone, cd: the wheel is built in the clone
    (tmp_path / "work").mkdir()
    env = fresh_env(tmp_path)
    run_lines(clone + install_block("wheel"), tmp_path / "work", env)
    (wheel,) = (tmp_path / "work" / "grpo-compat" / "dist").glob("grpo_compat-*-py3-none-any.whl")
    assert_installed_and_applies(env, tmp_path)
    # A launch's Python without grpo_compat is told an install line that works: the wheel it was installed from
    bare = Path(sys.base_prefix) / "bin" / "python3"
    stopped = subprocess.run(
        ["grpo-compat", "run", "--", str(bare), "-c", "import trl"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert f"{bare} -m pip install {wheel}" in stopped.stderr, stopped.stderr


def test_no_install_line_names_a_tag_or_a_release_file():
    """Nothing was released: the URL form installs the default branch, the matrix's the same with its extra."""
    (line,) = install_block("url")
    assert line == f'pip install "git+{REPOSITORY_URL}"'
    with_uv = f'pip install "grpo-compat[matrix] @ git+{REPOSITORY_URL}"'  # the matrix's, in CI
    assert with_uv in (REPO / "docs" / "ci.md").read_text()
    for page in (REPO / "README.md", REPO / "docs" / "ci.md", REPO / "docs" / "quickstart.md"):
        text = page.read_text()
        assert not re.search(rf"{REPOSITORY_URL}@v\d|attached to the v\d|release's wheel", text), page.name
