"""The CI workflow is generated from matrix/cells.toml, and the committed file is current."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from matrix import workflow
from matrix.envs import load_cells


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
    assert workflow.WORKFLOW_FILE.read_text() == workflow.render_workflow(), "stale: run `grpo-compat matrix workflow`"
    assert workflow.check() == ""


def test_every_cell_runs_in_its_job() -> None:
    cells, _ = load_cells()
    text = workflow.render_workflow()
    cpu = [name for name, cell in cells.items() if cell.device == "cpu"]
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


def test_workflow_is_valid_yaml() -> None:
    yaml = pytest.importorskip("yaml")
    data = yaml.safe_load(workflow.render_workflow())
    triggers = data.get("on", data.get(True))  # YAML 1.1 reads a bare `on` as true
    assert "pull_request" in triggers
    assert data["jobs"]["cpu"]["strategy"]["matrix"]["cell"] == matrix_cells(
        job_block(workflow.render_workflow(), "cpu")
    )
    assert data["jobs"]["cpu"]["steps"][1]["with"]["python-version"] == "3.11"


def test_check_reports_a_stale_file(tmp_path: Path) -> None:
    stale = tmp_path / "matrix.yml"
    stale.write_text(workflow.render_workflow().replace('"trl-0.16"', '"trl-0.15"'))
    diff = workflow.check(stale)
    assert '-          - "trl-0.15"' in diff and '+          - "trl-0.16"' in diff


def test_cells_without_gpu_cells_get_no_gpu_job(tmp_path: Path) -> None:
    cells_file = tmp_path / "cells.toml"
    cells_file.write_text('default_cell = "a"\n[cells.a]\ntorch = "2.13.0"\n[cells."1.16"]\ntorch = "2.13.0"\n')
    text = workflow.render_workflow(cells_file)
    assert "\n  gpu:\n" not in text
    assert matrix_cells(job_block(text, "cpu")) == ["a", "1.16"]
