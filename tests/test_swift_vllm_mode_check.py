"""`grpo-compat check --swift`: a --vllm_mode without --use_vllm true is named on every ms-swift that cannot run it.

ms-swift 3.5-3.11 take --vllm_mode server with use_vllm false and fail at the first generation (ms-swift #5185;
reproduced in cells swift-3.5 and swift-3.7-trl0.20: tests/test_swift_server_mode_without_vllm.py); 3.12 and later
refuse any --vllm_mode without --use_vllm true while they parse (run on 3.12.6 there too).
"""

from __future__ import annotations

import pytest

from grpo_compat.tools.cli import main

BATCH = ("--num_generations", "4", "--per_device_train_batch_size", "4", "--per_device_eval_batch_size", "4")


def check(capsys, swift_version: str, *arguments: str) -> tuple[int, str]:
    status = main(["check", "--swift", "--swift-version", swift_version, "--", *BATCH, *arguments])
    return status, capsys.readouterr().out


@pytest.mark.parametrize("version", ["3.5.3", "3.7.3", "3.11.2"])
def test_server_mode_without_use_vllm_is_named_with_the_crash_it_would_meet_on_ms_swift_3_5_to_3_11(capsys, version):
    status, out = check(capsys, version, "--vllm_mode", "server")
    assert status == 1
    assert f"--vllm_mode server without --use_vllm true cannot train on ms-swift {version}" in out
    assert "'GRPOTrainer' object has no attribute 'vllm_client'" in out and "Set --use_vllm true" in out


@pytest.mark.parametrize("version", ["3.12.6", "4.6.0"])
@pytest.mark.parametrize("mode", ["server", "colocate"])
def test_any_vllm_mode_without_use_vllm_is_named_as_ms_swift_3_12_refuses_it(capsys, version, mode):
    status, out = check(capsys, version, "--vllm_mode", mode)
    assert status == 1
    assert f"ms-swift {version} refuses --vllm_mode {mode} without --use_vllm true" in out


@pytest.mark.parametrize(
    "version, arguments",
    [
        ("3.7.3", ("--vllm_mode", "colocate")),  # 3.5-3.11 generate with the model: it trains
        ("3.7.3", ("--use_vllm", "true", "--vllm_mode", "server", "--vllm_server_host", "127.0.0.1")),
        ("4.6.0", ("--use_vllm", "true", "--vllm_mode", "colocate")),
        ("4.6.0", ()),
    ],
)
def test_settings_ms_swift_runs_pass(capsys, version, arguments):
    status, out = check(capsys, version, *arguments)
    assert status == 0 and "ok: these settings can train" in out, out
