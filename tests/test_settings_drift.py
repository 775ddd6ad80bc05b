"""Removed, renamed and misspelt settings are refused before anything loads, naming the release and what to use."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys

import pytest

from grpo_compat.settings.installed import refused_names, swift_argument_names
from tests.test_check_cli import check


def test_check_refuses_max_prompt_length_on_trl_1_16_naming_0_28_and_what_to_do(config_file):
    result = check(config_file("max_prompt_length: 256\nnum_generations: 4\nper_device_train_batch_size: 4\n"))
    assert result.returncode == 1
    assert "`max_prompt_length` was removed in trl 0.28.0 (last in 0.27.2)" in result.stdout
    assert "filter or truncate overlong prompts in the dataset" in result.stdout
    assert "ok: these settings can train" not in result.stdout and "TORCH_LOADED" not in result.stdout


def test_check_names_the_intended_setting_of_each_typo(config_file):
    result = check(config_file("num_generation: 4\nlearning_rte: 0.1\n"))
    assert result.returncode == 1
    assert "`num_generation` is not a setting of trl 1.16.0: did you mean `num_generations`?" in result.stdout
    assert "`learning_rte` is not a setting of trl 1.16.0: did you mean `learning_rate`?" in result.stdout


def test_a_typo_is_named_instead_of_batch_advice_for_the_defaults_it_left(config_file):
    result = check(config_file("num_generation: 2\n"))
    assert result.returncode == 1
    assert "did you mean `num_generations`" in result.stdout
    assert "per_device_train_batch_size" not in result.stdout


def test_python_style_settings_are_checked_as_grpoconfig_keywords():
    result = check("max_prompt_length=256", "num_generations=4", "--json")
    assert result.returncode == 1
    assert '"rule": "removed-setting"' in result.stdout and "trl 0.28.0" in result.stdout
    # a trl grpo script argument is no GRPOConfig keyword
    assert check("model_name_or_path='x'").returncode == 1
    assert check("num_generations=4", "per_device_train_batch_size=4").returncode == 0


def test_a_setting_of_an_older_release_is_fine_when_checked_for_that_release(config_file):
    assert check(config_file("max_prompt_length: 256\n"), "--trl-version", "0.19.0").returncode == 0


def test_a_setting_newer_than_the_checked_release_names_the_release_that_has_it(config_file):
    result = check(config_file("vllm_structured_outputs_regex: a+\n"), "--trl-version", "0.19.0")
    assert result.returncode == 1 and "is new in trl 0.2" in result.stdout and "upgrade trl" in result.stdout


def test_swift_arguments_renamed_or_misspelt_are_named():
    renamed = check("--swift", "--swift-version", "4.6.0", "--", "--eval_datasets", "x", "--num_generations", "4")
    assert renamed.returncode == 1
    assert "`eval_datasets` was renamed to `eval_dataset` in ms-swift 3.6.0" in renamed.stdout
    moved = check("--swift", "--swift-version", "4.6.0", "--", "--gpu_memory_utilization", "0.5")
    assert "renamed to `vllm_gpu_memory_utilization` in ms-swift 3.10.0" in moved.stdout
    # (--num_generation is an argparse prefix of --num_generations, which swift's parser takes: not refused)
    typo = check("--swift", "--swift-version", "4.6.0", "--", "--num_generatoins", "4")
    assert typo.returncode == 1 and "did you mean `num_generations`" in typo.stdout


def test_swift_arguments_are_checked_only_where_swift_parse_args_reads_them_from_the_command_line():
    # grpo-compat run's check before launching and the launched patch share this: neither refuses what swift ignores.
    tokens = ["--num_generation", "4", "--model=m", "--", "x"]
    assert swift_argument_names(tokens, {}) == ["num_generation", "model"]
    assert swift_argument_names(tokens, {"RAY_SWIFT_ARGS": '["--model", "m"]'}) == []
    assert swift_argument_names(["args.json", "--num_generation", "4"], {}) == []
    assert swift_argument_names([*tokens, "--ignore-args-error", "true"], {}) == []


def test_every_setting_the_installed_trl_takes_passes():
    """Do no harm: nothing `trl grpo --config` or GRPOConfig(...) of the installed trl accepts is refused."""
    from trl import GRPOConfig
    from trl.scripts.grpo import make_parser

    config_fields = [f.name for f in dataclasses.fields(GRPOConfig) if f.init]
    assert refused_names(config_fields, "trl", _trl_version(), "python") == []
    parser_fields = [f.name for t in make_parser().dataclass_types for f in dataclasses.fields(t) if f.init]
    assert (
        refused_names([*parser_fields, "env", "num_processes", "accelerate_config"], "trl", _trl_version(), "config")
        == []
    )


def _trl_version() -> str:
    import trl

    return trl.__version__


def test_grpoconfig_refuses_a_removed_setting_after_apply_naming_the_release(tmp_path):
    code = """
import grpo_compat
grpo_compat.apply()
from trl import GRPOConfig
from grpo_compat.core.errors import SettingNotTakenError
try:
    GRPOConfig(output_dir={0!r}, max_prompt_length=256)
except SettingNotTakenError as error:
    assert isinstance(error, TypeError)
    print("REFUSED", error)
config = GRPOConfig(output_dir={0!r}, num_generations=2, per_device_train_batch_size=2, use_cpu=True, bf16=False)
print("BUILT", config.num_generations)
""".format(str(tmp_path))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "REFUSED GRPOConfig on trl 1.16.0: `max_prompt_length` was removed in trl 0.28.0" in result.stdout
    assert "BUILT 2" in result.stdout, result.stderr[-2000:]


def test_run_refuses_a_trl_config_before_launching(config_file):
    path = config_file("max_prompt_length: 256\nnum_generation: 4\n")
    result = subprocess.run(
        [sys.executable, "-m", "grpo_compat.tools.cli", "run", "--", "trl", "grpo", "--config", path],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert "removed in trl 0.28.0" in result.stderr and "did you mean `num_generations`" in result.stderr
    skipped = subprocess.run(
        [
            sys.executable,
            "-m",
            "grpo_compat.tools.cli",
            "run",
            "--skip",
            "trl.grpo-config-settings",
            "--",
            "true",
            "trl",
            "grpo",
            "--config",
            path,
        ],
        capture_output=True,
        text=True,
    )
    assert skipped.returncode == 0


def test_check_from_an_older_trl_lists_the_defaults_that_changed_and_the_settings_gone(config_file):
    path = config_file("beta: 0.04\nmax_prompt_length: 256\nnum_generations: 4\nper_device_train_batch_size: 4\n")
    result = check(path, "--from", "trl==0.19.0")
    assert result.returncode == 1  # max_prompt_length is refused on the installed trl all the same
    table = result.stdout[result.stdout.index("What this config means on trl 1.16.0") :]
    assert re.search(r"loss_type\s+'bnpo'\s+'dapo'\s+default changed", table)
    assert re.search(r"max_prompt_length\s+256\s+-\s+your value; removed in trl 0.28.0", table)
    assert "beta" not in table  # the config sets it: the same value on both releases
    report = json.loads(check(path, "--from", "trl==0.19.0", "--json").stdout)["upgrade"]
    assert {"setting": "loss_type", "before": "'bnpo'", "after": "'dapo'", "change": "default"}.items() <= next(
        c for c in report["changes"] if c["setting"] == "loss_type"
    ).items()
    assert any(s["setting"] == "vllm_structured_outputs_regex" for s in report["new_settings"])


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        (("--from", "trl==0.19.9"), "trl 0.19.9 is not a release known here (0.14.0 ... 1.16.0)"),
        (("--from", "trl=0.19"), "expected trl==VERSION"),
        (("--from", "ms-swift==3.5.3"), "expected trl==VERSION"),
    ],
)
def test_a_bad_from_is_one_line_and_exit_2(config_file, arguments, error):
    result = check(config_file("num_generations: 4\n"), *arguments)
    assert result.returncode == 2 and error in result.stderr and len(result.stderr.splitlines()) == 1


def test_an_empty_or_missing_file_or_no_swift_is_one_line_and_exit_2(config_file, tmp_path):
    for arguments, error in (
        ((config_file(""), "--from", "trl==0.19.0"), "is empty"),
        ((str(tmp_path / "missing.yaml"), "--from", "trl==0.19.0"), "cannot read"),
        (("--swift", "--from", "ms-swift==3.5.3", "--", "--num_generations", "4"), "ms-swift is not installed"),
    ):
        result = check(*arguments)
        assert result.returncode == 2 and error in result.stderr and "Traceback" not in result.stderr


def test_explain_names_the_release_of_each_refused_setting():
    from grpo_compat.catalogue.log_matching import explain

    log = "ValueError: remaining_argv: ['--eval_datasets', 'x', '--num_generatoins', '4']\n"
    match = next(m for m in explain(log, {"ms-swift": "4.6.0"}).matches if m.failure.id == "setting-removed-or-renamed")
    assert "`eval_datasets` was renamed to `eval_dataset` in ms-swift 3.6.0" in match.settings[0]
    assert "did you mean `num_generations`" in match.settings[1]
    log = "TypeError: GRPOConfig.__init__() got an unexpected keyword argument 'max_prompt_length'\n"
    match = explain(log, {"trl": "1.16.0"}).matches[0]
    assert "removed in trl 0.28.0" in match.settings[0]
    accelerate = "Accelerate launch command: error: unrecognized arguments: --use_liger_loss\n"
    assert (
        "renamed to `use_liger_kernel` in trl 0.28.0" in explain(accelerate, {"trl": "1.16.0"}).matches[0].settings[0]
    )


def test_doctor_names_what_changed_since_the_trl_a_config_records(config_file):
    from grpo_compat.tools.cli import main

    path = config_file("# trl_version: 0.19.0\nbeta: 0.04\nnum_generations: 4\n")
    result = subprocess.run(
        [sys.executable, "-m", "grpo_compat.tools.cli", "doctor", "--config", path], capture_output=True, text=True
    )
    assert "records trl 0.19.0; trl 1.16.0 is installed" in result.stdout
    assert f"grpo-compat check {path} --from trl==0.19.0" in result.stdout
    assert main(["doctor", "--config", config_file("num_generations: 4\n")]) in (0, 1)  # records none: no note


def test_explain_names_ms_swift_4s_moved_modules():
    from grpo_compat.catalogue.log_matching import explain

    found = explain("ModuleNotFoundError: No module named 'swift.plugin'\n", {"ms-swift": "4.6.0"}).matches
    assert [m.failure.id for m in found] == ["swift-4-moved-modules"] and found[0].expected_here
