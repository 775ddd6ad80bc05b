"""swift.refuse-server-mode-without-vllm on real installs: ms-swift #5185 (census row 20).

`--vllm_mode server` without `--use_vllm true`: ms-swift 3.5-3.11 generate with the model and then ask a vLLM
server client they never created. No server and no vLLM are needed to see it. The cell swift-3.7-trl0.20 is the
report's pair, released (ms-swift 3.7.3, trl 0.20.0); ms-swift 3.12 refuses the pair itself.
"""

from __future__ import annotations

import pytest

from tests.helpers import smoke

CELL = "swift-3.7-trl0.20"
pytestmark = [pytest.mark.slow, pytest.mark.cells(CELL, "swift-3.12")]  # real ms-swift runs in cell envs
SERVER_MODE = 'vllm_mode="server"'
PATCH = "swift.refuse-server-mode-without-vllm"


def patch_status(result: dict) -> str:
    return {p["id"]: p["status"] for p in result["grpo_compat"]["patches"]}[PATCH]


def test_server_mode_without_use_vllm_fails_after_the_model_loaded_and_is_refused_before_patched(model_dir, tmp_path):
    plain = smoke(CELL, "plain", model_dir, tmp_path, SERVER_MODE, script="smoke_swift.py")
    assert plain["status"] == "error" and "'GRPOTrainer' object has no attribute 'vllm_client'" in plain["error"]
    assert plain["weights_sha256"] is not None and plain["steps"] == 0  # the model loaded; training began
    patched = smoke(CELL, "patched", model_dir, tmp_path, SERVER_MODE, script="smoke_swift.py")
    first_line = patched["error"].splitlines()[0]
    assert first_line.startswith("GRPOSettingsError: --vllm_mode server without --use_vllm true cannot train")
    assert "Set --use_vllm true" in first_line and "remove --vllm_mode server" in first_line
    assert patched["weights_sha256"] is None and patched["train_time_s"] is None  # refused before any model
    assert patch_status(patched) == "applied"


def test_the_default_rollout_trains_to_the_same_weights_patched(model_dir, tmp_path):
    runs = [smoke(CELL, mode, model_dir, tmp_path, script="smoke_swift.py") for mode in ("plain", "patched")]
    assert runs[0]["status"] == runs[1]["status"] == "ok", runs[1].get("error")
    assert runs[1]["all_trainable_params_changed"]
    assert runs[0]["weights_sha256"] == runs[1]["weights_sha256"]
    assert patch_status(runs[1]) == "applied"


def test_ms_swift_3_12_refuses_the_pair_itself_and_the_patch_stands_aside(model_dir, tmp_path):
    patched = smoke("swift-3.12", "patched", model_dir, tmp_path, SERVER_MODE, script="smoke_swift.py")
    assert "ValueError: vllm_mode is not supported when use_vllm is false" in patched["error"]
    assert patch_status(patched) == "outside version window"
