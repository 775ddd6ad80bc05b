"""Every long step of the matrix says it still runs (every HEARTBEAT_S, 30 s), as the docs promise: the bytecode
step of a cell env's build, the install steps, and each run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from grpo_compat.matrix import envs


@pytest.mark.slow  # imports torch, transformers, trl and DeepSpeed: 20-30 s on 2 shared cores
def test_the_bytecode_step_shows_a_heartbeat_while_it_imports_what_runs_import(tmp_path, monkeypatch):
    monkeypatch.setattr(envs, "HEARTBEAT_S", 0.5)  # the real step, importing torch, trl and DeepSpeed (seconds here)
    said: list[str] = []
    envs._warm_up(Path(sys.executable), tmp_path, tmp_path / "build.log", said.append)
    step = "writing the bytecode runs read (one import of what they import)"
    assert said[0] == f"{step} ..." and said[-1].startswith(f"{step}: done in ")
    heartbeats = [message for message in said[1:-1] if message.startswith(f"{step}: still running after ")]
    assert heartbeats and len(heartbeats) == len(said) - 2, said
    assert "warm-up import of torch" in (tmp_path / "build.log").read_text()


def test_a_step_past_its_timeout_is_ended_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(envs, "HEARTBEAT_S", 0.2)
    said: list[str] = []
    code = envs._run(
        [sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "log", "sleeping", said.append, timeout=1
    )
    assert code == -1 and "timed out after 1 s" in (tmp_path / "log").read_text()
    assert any("sleeping: still running after" in message for message in said)


def test_a_run_hears_the_heartbeat_and_keeps_its_whole_output(monkeypatch):
    monkeypatch.setattr(envs, "HEARTBEAT_S", 0.2)
    child = subprocess.Popen(
        [sys.executable, "-c", "import time\nfor n in range(4):\n    print(n, flush=True); time.sleep(0.3)"],
        stdout=subprocess.PIPE,
        text=True,
    )
    said: list[str] = []
    output, timed_out = envs.wait_with_heartbeat(child, 60, said.append)
    assert not timed_out and output.split() == ["0", "1", "2", "3"]
    assert said and all(message.startswith("still running after ") for message in said)


def test_the_install_step_names_each_package_once():
    from grpo_compat.matrix.cells import ALWAYS

    pins = ["trl==1.16.0", "datasets==5.2.0", *ALWAYS]  # a cell that pins datasets, which every cell installs
    assert envs.shown_requirements(pins) == "trl==1.16.0, datasets==5.2.0, tokenizers"
