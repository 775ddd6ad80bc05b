"""The CI workflows are generated from cells files: this repository's is current, a user's runs their matrix."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_compat.matrix import workflow
from grpo_compat.matrix.cells import load_cells_file
from matrix.repository import cells_file, repository_project
from tests.helpers import REPO, fresh_env

WORKFLOW_FILE = repository_project().workflow_file


def render(cells=None) -> str:
    return workflow.render_workflow(cells or cells_file())


def job_block(text: str, job: str) -> str:
    """The lines of one job (two-space indented key under `jobs:`)."""
    jobs = text.split("\njobs:\n", 1)[1]
    match = re.search(rf"^  {re.escape(job)}:\n(.*?)(?=^  \S|\Z)", jobs, re.MULTILINE | re.DOTALL)
    assert match, f"no job {job!r}"
    return match.group(1)


def matrix_cells(block: str) -> list[str]:
    """The `strategy.matrix.cell` list of a job, as written by render_workflow."""
    listing = re.search(r"^ +cell:\n((?: +- .*\n)+)", block, re.MULTILINE)
    assert listing, "no matrix.cell list"
    return re.findall(r'- "([^"]+)"', listing.group(1))


def test_committed_workflow_is_current() -> None:
    assert WORKFLOW_FILE.read_text() == render(), "stale: run `grpo-compat matrix workflow`"
    assert workflow.stale_diff(WORKFLOW_FILE, render()) == ""


def test_every_cell_runs_in_its_job() -> None:
    cells = cells_file().cells
    text = render()
    cpu = [name for name, cell in cells.items() if cell.device == "cpu" and not cell.newest]
    gpu = [name for name, cell in cells.items() if cell.device == "cuda"]
    assert cpu and gpu
    cpu_job, gpu_job = job_block(text, "cpu"), job_block(text, "gpu")
    assert matrix_cells(cpu_job) == cpu
    assert matrix_cells(gpu_job) == gpu
    assert "runs-on: ubuntu-latest" in cpu_job and "--device cpu" in cpu_job
    assert "runs-on: [self-hosted, gpu]" in gpu_job and "--device cuda" in gpu_job
    for job in (cpu_job, gpu_job):
        assert "grpo-compat matrix run --cells ${{ matrix.cell }}" in job
        assert 'cat results/summary.md >> "$GITHUB_STEP_SUMMARY"' in job
        assert "actions/upload-artifact" in job
    assert "UV_EXTRA_INDEX_URL: https://download.pytorch.org/whl/cpu" in cpu_job
    assert "/opt/wheels" not in text


def test_the_newest_cells_run_in_a_weekly_scheduled_job_of_their_own() -> None:
    yaml = pytest.importorskip("yaml")
    cells = cells_file().cells
    newest = [name for name, cell in cells.items() if cell.newest]
    assert newest and not set(newest) & set(cells_file().quick), "newest cells exist, outside quick"
    data = yaml.safe_load(render())
    triggers = data.get("on", data.get(True))
    assert [entry["cron"].split()[2:] for entry in triggers["schedule"]] == [["*", "*", "1"]], "weekly"
    jobs = data["jobs"]
    assert jobs["newest"]["strategy"]["matrix"]["cell"] == newest
    assert "schedule" in jobs["newest"]["if"] and "workflow_dispatch" in jobs["newest"]["if"]
    # the schedule runs the newest cells only; a push or pull request runs every pinned cell and no newest one
    for job in ("cpu", "report", "gpu"):
        assert "github.event_name != 'schedule'" in jobs[job]["if"], job
    assert not set(newest) & set(jobs["cpu"]["strategy"]["matrix"]["cell"])


def test_workflow_is_valid_yaml() -> None:
    yaml = pytest.importorskip("yaml")
    data = yaml.safe_load(render())
    triggers = data.get("on", data.get(True))  # YAML 1.1 reads a bare `on` as true
    assert "pull_request" in triggers
    assert data["jobs"]["cpu"]["strategy"]["matrix"]["cell"] == matrix_cells(job_block(render(), "cpu"))
    assert data["jobs"]["cpu"]["steps"][1]["with"]["python-version"] == "3.11"


def test_check_reports_a_stale_file(tmp_path: Path) -> None:
    stale = tmp_path / "matrix.yml"
    stale.write_text(render().replace('"trl-0.16"', '"trl-0.15"'))
    diff = workflow.stale_diff(stale, render())
    assert '-          - "trl-0.15"' in diff and '+          - "trl-0.16"' in diff


def test_cells_without_gpu_cells_get_no_gpu_job(tmp_path: Path) -> None:
    path = tmp_path / "cells.toml"
    path.write_text('default_cell = "a"\n[cells.a]\ntorch = "2.13.0"\n[cells."1.16"]\ntorch = "2.13.0"\n')
    text = render(load_cells_file(path))
    assert "\n  gpu:\n" not in text
    assert matrix_cells(job_block(text, "cpu")) == ["a", "1.16"]


def test_a_users_workflow_runs_their_cells_file_nightly_and_keeps_junit(tmp_path: Path) -> None:
    from grpo_compat.matrix.cli import main as matrix_main

    yaml = pytest.importorskip("yaml")
    folder = tmp_path / "ci"
    folder.mkdir()
    (folder / "train.py").write_text("")
    (folder / "grpo-matrix.toml").write_text(
        'grpo_compat = "grpo-compat==0.1.0"\n[entries.train]\nscript = "train.py"\n'
        '[cells.pinned]\ntorch = "2.13.0"\ntrl = "1.16.0"\n[cells.newest]\ntorch = "2.13.0"\ntrl = "newest"\n'
    )
    output = tmp_path / "workflows" / "grpo-matrix.yml"
    arguments = ["workflow", "--cells-file", "ci/grpo-matrix.toml", "--output", str(output)]
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path)
        assert matrix_main(arguments) == 0
        assert matrix_main([*arguments, "--check"]) == 0
    text = output.read_text()
    data = yaml.safe_load(text)
    triggers = data.get("on", data.get(True))
    assert triggers["schedule"][0]["cron"] and "pull_request" in triggers
    cpu = job_block(text, "cpu")
    assert matrix_cells(cpu) == ["pinned", "newest"]
    assert "python -m pip install grpo-compat==0.1.0" in cpu and "--editable" not in text
    assert "grpo-compat matrix run --cells-file ci/grpo-matrix.toml --cells ${{ matrix.cell }}" in cpu
    assert "--junit results/junit-${{ matrix.cell }}.xml" in cpu
    assert "grpo-compat matrix report --cells-file ci/grpo-matrix.toml --results results/" in job_block(text, "report")
    assert "hashFiles('ci/grpo-matrix.toml')" in cpu


def test_a_users_workflow_installs_the_wheel_their_cells_file_names(tmp_path: Path) -> None:
    from grpo_compat.matrix.cli import main as matrix_main

    (tmp_path / "ci" / "dist").mkdir(parents=True)
    (tmp_path / "ci" / "dist" / "grpo_compat-0.1.0-py3-none-any.whl").write_bytes(b"")
    (tmp_path / "ci" / "train.py").write_text("")
    (tmp_path / "ci" / "cells.toml").write_text(
        'grpo_compat = "dist/grpo_compat-0.1.0-py3-none-any.whl"\n[entries.train]\nscript = "train.py"\n'
        '[cells.a]\ntorch = "2.13.0"\n'
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tmp_path)
        assert matrix_main(["workflow", "--cells-file", "ci/cells.toml"]) == 0
    text = (tmp_path / ".github" / "workflows" / "grpo-matrix.yml").read_text()
    assert "python -m pip install ./ci/dist/grpo_compat-0.1.0-py3-none-any.whl" in job_block(text, "cpu")


USERS_CELLS = '[entries.train]\nscript = "train.py"\n[cells.a]\ntorch = "2.13.0"\n'


def users_workflow(root: Path, cells: str = USERS_CELLS) -> tuple[int, str]:
    from grpo_compat.matrix.cli import main as matrix_main

    (root / "ci").mkdir(parents=True, exist_ok=True)
    (root / "ci" / "train.py").write_text("")
    (root / "ci" / "cells.toml").write_text(cells)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        code = matrix_main(["workflow", "--cells-file", "ci/cells.toml"])
    target = root / ".github" / "workflows" / "grpo-matrix.yml"
    return code, target.read_text() if target.exists() else ""


def test_a_users_workflow_installs_grpo_compat_as_their_repository_requires_it(tmp_path: Path) -> None:
    vcs = "grpo-compat @ git+https://example.org/team/grpo-compat.git@v0.1.0"
    (tmp_path / "requirements-train.txt").write_text(f"trl==1.16.0\n{vcs}  # our fork\n")
    code, text = users_workflow(tmp_path)
    assert code == 0 and f"python -m pip install '{vcs}'" in job_block(text, "cpu")


def git(cwd: Path, *arguments: str) -> str:
    done = subprocess.run(["git", *arguments], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def workflow_run_by(checkout: Path, user: Path) -> subprocess.CompletedProcess:
    """`grpo-compat matrix workflow` in the user's repository ``user`` (no grpo_compat line, no requirement on it),
    run by the grpo_compat of the source folder ``checkout``."""
    (user / "ci").mkdir(parents=True, exist_ok=True)
    (user / "ci" / "train.py").write_text("")
    (user / "ci" / "cells.toml").write_text(USERS_CELLS)
    return subprocess.run(
        [sys.executable, "-m", "grpo_compat", "matrix", "workflow", "--cells-file", "ci/cells.toml"],
        cwd=user,
        env={**os.environ, "PYTHONPATH": str(checkout)},
        capture_output=True,
        text=True,
        timeout=300,
    )


def clone_of_this_tree(tmp_path: Path) -> Path:
    """A clone (origin: a folder here) of a repository holding this checkout's files as they are now, so a
    subprocess of the clone runs the code under test."""
    origin = tmp_path / "origin"
    listed = git(REPO, "ls-files", "--cached", "--others", "--exclude-standard", "-z")
    for name in filter(None, listed.split("\0")):
        if (REPO / name).is_file():
            (origin / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, origin / name)
    git(origin, "init", "--quiet")
    git(origin, "add", "-A")
    git(origin, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "this tree")
    git(tmp_path, "clone", "--quiet", str(origin), "grpo-compat")
    return tmp_path / "grpo-compat"


def test_a_users_workflow_installs_a_checkout_outside_their_repository_from_its_origin_at_its_commit(tmp_path):
    checkout = clone_of_this_tree(tmp_path)
    commit = git(checkout, "rev-parse", "HEAD")
    refused = workflow_run_by(checkout, tmp_path / "user")  # its origin is a folder of this machine
    assert refused.returncode == 2 and "is a folder of this machine" in refused.stderr, refused.stderr
    assert "set grpo_compat in" in refused.stderr and not (tmp_path / "user" / ".github").exists()
    git(checkout, "remote", "set-url", "origin", "https://example.org/team/grpo-compat.git")
    made = workflow_run_by(checkout, tmp_path / "user")
    vcs = f"grpo-compat @ git+https://example.org/team/grpo-compat.git@{commit}"
    text = (tmp_path / "user" / ".github" / "workflows" / "grpo-matrix.yml").read_text()
    assert made.returncode == 0 and f"python -m pip install '{vcs}'" in job_block(text, "cpu"), made.stderr
    assert str(tmp_path) not in text
    (checkout / "README.md").write_text("changed")  # the installed files would not be the commit's
    changed = workflow_run_by(checkout, tmp_path / "user")
    assert changed.returncode == 2 and "has changes not committed" in changed.stderr
    git(checkout, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-am", "local")
    unpushed = workflow_run_by(checkout, tmp_path / "user")
    assert unpushed.returncode == 2 and "is on no branch of its origin" in unpushed.stderr


@pytest.mark.slow  # pip builds grpo-compat twice, in two new venvs
def test_a_users_workflow_install_step_runs_in_a_fresh_checkout_of_their_repository(tmp_path):
    """grpo-compat vendored in the user's repository and installed from there: the workflow installs that folder,
    and its install step, as written, installs grpo-compat in a fresh venv of a fresh clone of their repository."""
    user = tmp_path / "user"
    (user / "vendor" / "grpo-compat").mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "HEAD"], capture_output=True, timeout=120)
    subprocess.run(["tar", "-x", "-C", str(user / "vendor" / "grpo-compat")], input=archive.stdout, check=True)
    here = fresh_env(tmp_path / "here")
    installed = subprocess.run(
        ["python", "-m", "pip", "install", "--quiet", "./vendor/grpo-compat"],
        cwd=user,
        env=here,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    (user / "ci").mkdir()
    (user / "ci" / "train.py").write_text("")
    (user / "ci" / "cells.toml").write_text(USERS_CELLS)
    made = subprocess.run(
        ["grpo-compat", "matrix", "workflow", "--cells-file", "ci/cells.toml"],
        cwd=user,
        env=here,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert made.returncode == 0 and "./vendor/grpo-compat" in made.stdout, made.stdout + made.stderr
    git(user, "init", "--quiet")
    git(user, "add", "-A")
    git(user, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "ci")
    git(tmp_path, "clone", "--quiet", str(user), "checkout")
    text = (tmp_path / "checkout" / ".github" / "workflows" / "grpo-matrix.yml").read_text()
    step = re.search(r"- name: Install uv and grpo-compat\n +run: \|\n((?: {10}.+\n)+)", job_block(text, "cpu"))
    assert step, "the cpu job has no install step"
    fresh = fresh_env(tmp_path / "fresh")
    ran = subprocess.run(
        ["bash", "-euc", step.group(1)],
        cwd=tmp_path / "checkout",
        env=fresh,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    version = subprocess.run(
        ["python", "-c", "import grpo_compat; print(grpo_compat.__file__)"],
        cwd=tmp_path,
        env=fresh,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert version.stdout.startswith(fresh["VIRTUAL_ENV"]), version.stderr


def test_a_users_workflow_refuses_a_folder_outside_the_repository(tmp_path: Path, capsys) -> None:
    outside = tmp_path / "elsewhere" / "grpo_compat"
    outside.mkdir(parents=True)
    code, text = users_workflow(tmp_path / "repo", f'grpo_compat = "{outside}"\n{USERS_CELLS}')
    assert code == 2 and text == ""
    assert "is outside the repository" in capsys.readouterr().err
