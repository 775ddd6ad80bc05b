"""Real GRPO smoke runs on the tiny model, in real installs of each cell's versions.

- do no harm: plain and patched runs with the same seed give bit-identical weights, and train;
- trl.grpo-config-check reproducer: num_generations=1 gives upstream's message unpatched
  (misleading "evenly divisible" on trl 0.16.1) and grpo_compat's, at config time, patched.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from matrix.envs import ensure_env, load_cells
from tests.conftest import REPO

CELLS, DEFAULT_CELL = load_cells()
SMOKE_CELLS = ["trl-1.16", "trl-0.16"]


def cell_python(name: str) -> str:
    """The default cell is the env the tests run in; other cells get their own uv env."""
    from grpo_compat.versions import installed_version

    cell = CELLS[name]
    if name == DEFAULT_CELL and all(installed_version(d) == v for d, v in cell.pins.items() if d != "torch"):
        return sys.executable
    return str(ensure_env(cell))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("tiny-qwen2")


def smoke(
    name: str, mode: str, model_dir, tmp_path, *settings: str, script: str = "smoke_grpo.py", flags: tuple = ()
) -> dict:
    output = tmp_path / f"{name}-{mode}-{len(list(tmp_path.iterdir()))}.json"
    command = [cell_python(name), str(REPO / "matrix" / script), "--mode", mode, "--steps", "3"]
    command += ["--model-dir", str(model_dir), "--output", str(output)]
    command += [arg for setting in settings for arg in ("--set", setting)] + list(flags)
    completed = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=REPO)
    assert output.exists(), completed.stderr[-3000:]
    return json.loads(output.read_text())


@pytest.mark.parametrize("name", SMOKE_CELLS)
def test_patched_run_trains_to_bit_identical_weights(name, model_dir, tmp_path):
    plain = smoke(name, "plain", model_dir, tmp_path)
    patched = smoke(name, "patched", model_dir, tmp_path)
    for result in (plain, patched):
        assert result["status"] == "ok", result["error"]
        assert result["versions"]["trl"] == CELLS[name].pins["trl"]
        assert result["steps"] == 3
        assert result["all_trainable_params_changed"], result["unchanged_params"]
        assert result["kl"] is not None
    assert patched["weights_sha256"] == plain["weights_sha256"]
    statuses = {p["id"]: p["status"] for p in patched["grpo_compat"]["patches"]}
    assert statuses["trl.grpo-config-check"] == "applied"


UPSTREAM_MESSAGE = {
    "trl-0.16": "must be evenly divisible by the number of generations per prompt (1)",
    "trl-1.16": "GRPO requires at least 2 generations per prompt",
}


@pytest.mark.parametrize("name", SMOKE_CELLS)
def test_single_generation_reproducer_fails_upstream_and_is_explained_patched(name, model_dir, tmp_path):
    plain = smoke(name, "plain", model_dir, tmp_path, "num_generations=1")
    assert plain["status"] == "error"
    assert UPSTREAM_MESSAGE[name] in plain["error"]
    patched = smoke(name, "patched", model_dir, tmp_path, "num_generations=1")
    assert patched["status"] == "error"
    first_line = patched["error"].splitlines()[0]
    assert first_line.startswith("GRPOSettingsError: GRPO needs at least 2 completions per prompt")
    assert "Set num_generations=2 (--num_generations 2)" in first_line
    # Raised while GRPOConfig is built, i.e. before GRPOTrainer loads any model.
    assert "grpo_trainer.py" not in patched["error"]
