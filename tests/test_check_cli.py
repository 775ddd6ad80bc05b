"""grpo-compat check: TRL config files and ms-swift arguments, validated without loading torch."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def check(*args: str, this_machine: bool = False) -> subprocess.CompletedProcess:
    """The command in a fresh process; the checks of the machine it runs on (a GPU for bf16, vLLM installed) only
    with ``this_machine``: the batch rules these tests prove answer alike on a CPU and a GPU machine."""
    args = args if this_machine else ("--other-machine", *args)
    code = (
        "import sys; from grpo_compat.tools.cli import main; rc = main(sys.argv[1:]); "
        "print('TORCH_LOADED' if 'torch' in sys.modules else ''); sys.exit(rc)"
    )
    return subprocess.run([sys.executable, "-c", code, "check", *args], capture_output=True, text=True)


def test_an_impossible_yaml_config_exits_1_with_the_rule_and_a_fix(config_file):
    result = check(config_file("num_generations: 4\nper_device_train_batch_size: 1\n"), "--trl-version", "1.16.0")
    assert result.returncode == 1
    assert "1 completions is not a multiple of num_generations 4 (trl 1.16.0)" in result.stdout
    assert "Set per_device_train_batch_size=4 (--per_device_train_batch_size 4)" in result.stdout
    assert "TORCH_LOADED" not in result.stdout


def test_the_world_size_changes_the_verdict(config_file):
    path = config_file('{"num_generations": 4, "per_device_train_batch_size": 1}', "grpo.json")
    assert check(path, "--trl-version", "0.16.1").returncode == 1
    assert check(path, "--trl-version", "0.16.1", "--nproc-per-node", "4").returncode == 0
    assert check(path, "--trl-version", "0.16.1", "--world-size", "2").returncode == 1


def test_json_output_carries_findings_and_fixes(config_file):
    result = check(config_file("num_generations: 1\n"), "--json", "--trl-version", "1.16.0")
    report = json.loads(result.stdout.replace("TORCH_LOADED", ""))
    assert report["ok"] is False and report["findings"][0]["rule"] == "min-generations"
    assert report["findings"][0]["suggestions"][0]["num_generations"] == 2


@pytest.mark.parametrize(
    ("version", "arguments", "expected"),
    [
        ("4.6.0", ["--num_generations", "1"], "in a group of one every advantage is 0"),
        ("4.6.0", ["--num_generations", "1", "--teacher_model", "Qwen/Qwen2.5-7B"], "ok: these settings can train"),
        ("3.5.3", ["--num_generations", "8"], "the eval batch (per_device_eval_batch_size 1 x 1 process(es) = 1)"),
        (
            "3.4.1",
            ["--num_generations", "8", "--split_dataset_ratio", "0", "--sequence_parallel_size", "2"],
            "it needs ms-swift 3.5 or newer",
        ),
    ],
)
def test_ms_swift_arguments_with_that_versions_defaults(version, arguments, expected):
    result = check("--swift", "--swift-version", version, "--trl-version", "0.19.0", "--", *arguments)
    assert expected in result.stdout, result.stdout + result.stderr


def test_a_named_ms_swift_3_is_checked_with_the_trl_it_runs_with_not_the_installed_one():
    # ms-swift 3.3's METADATA: trl>=0.13,<0.17; this env has trl 1.16, which 3.3 cannot run with.
    arguments = ("--", "--num_generations", "3", "--per_device_train_batch_size", "2")
    result = check("--swift", "--swift-version", "3.3.1", *arguments)
    first = result.stdout.splitlines()[0]
    assert "ms-swift 3.3.1 (trl 0.16)" in first and "not the installed 1.16" in first, first
    # trl 0.16's rule (the per-step batch must hold whole groups), not trl >= 0.18's (accumulated generation batch).
    assert "per_device_train_batch_size 2 x 1 process(es) = 2 completions is not a multiple" in result.stdout
    named = check("--swift", "--swift-version", "3.3.1", "--trl-version", "1.16.0", *arguments)
    assert named.stdout.startswith("GRPO settings checked against ms-swift 3.3.1 (trl 1.16.0), ")
    assert "x gradient_accumulation_steps 8 = 16 completions" in named.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["/no/such/file.yaml"], "cannot read /no/such/file.yaml"),
        (["a.yaml", "b.yaml"], "give one TRL config file"),
        (["--swift", "--swift-version", "4.6.0", "--", "stray"], "unexpected 'stray'"),
    ],
)
def test_bad_input_exits_2_with_a_message_and_no_traceback(args, message):
    result = check(*args)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_a_file_that_is_not_a_mapping_is_refused_clearly(config_file):
    result = check(config_file("- 1\n- 2\n"))
    assert result.returncode == 2 and "must hold a mapping of GRPOConfig fields, got list" in result.stderr
