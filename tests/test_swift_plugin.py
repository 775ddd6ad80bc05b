"""grpo_compat's ms-swift plugin: `swift rlhf ... --external_plugins "$(grpo-compat plugin-path)"`.

The command-line runs use the real `swift` console script of the swift-4.6 cell env (built in CI);
ms-swift 3.5 and 3.12 are covered by the matrix (script "swift-cli").
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from grpo_compat.core.engine import Engine
from grpo_compat.core.report import ONE_LINE_MARK, Status
from grpo_compat.swift_plugin import plugin_path
from tests.helpers import REPO, cell_python, make_patch, smoke
from tests.helpers import UPSTREAM_SOURCE as SOURCE

CELL = "swift-4.6"


@pytest.fixture(scope="module")
def python() -> str:
    return cell_python(CELL)


@pytest.fixture(scope="module")
def model_dir(python, tmp_path_factory) -> Path:
    return tiny_model_for(python, tmp_path_factory.mktemp("tiny-qwen2-swift-cli"))


def tiny_model_for(python: str, directory: Path) -> Path:
    """The tiny Qwen2 saved by the cell's own transformers (its config and tokenizer files differ by version)."""
    build = f"from grpo_compat.testing.tiny_model import build_tiny_qwen2; build_tiny_qwen2({str(directory)!r}, seed=0)"
    subprocess.run([python, "-c", build], check=True, cwd=REPO, timeout=600)
    return directory


def swift_env(python: str) -> dict[str, str]:
    bin_dir = str(Path(python).parent)  # `swift` and `grpo-compat` of the cell env, as a user's shell finds them
    env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}
    env.update(MODELSCOPE_OFFLINE="1", HF_HUB_OFFLINE="1", CUDA_VISIBLE_DEVICES="", PYTHONDONTWRITEBYTECODE="")
    return env


def write_prompts(path: Path) -> Path:
    """A `swift rlhf --dataset` file: one user turn per line, as docs/swift.md describes it."""
    rows = [{"messages": [{"role": "user", "content": f"What is {i} plus {i}?"}]} for i in range(8)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


# -- the plugin file ---------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.cells("swift-4.6")
def test_plugin_path_prints_a_file_swift_imports_without_shadowing_anything(python):
    printed = subprocess.run(
        [str(Path(python).parent / "grpo-compat"), "plugin-path"], capture_output=True, text=True, check=True
    ).stdout.strip()
    path = Path(printed)
    assert path.is_absolute() and path.is_file() and printed == plugin_path()
    # ms-swift 3.x imports the file by its base name, up to the first dot, from its folder put first on sys.path.
    assert path.name != "plugin.py" and path.name.count(".") == 1
    assert sorted(p.name for p in path.parent.glob("*.py")) == ["__init__.py", path.name]
    importable = f"import importlib.util, sys; print(importlib.util.find_spec({path.stem!r}) is None)"
    assert subprocess.run([python, "-c", importable], capture_output=True, text=True).stdout.strip() == "True"


# -- engine support: a report logged when its statuses are final, and honest about removed wrappers ----


@pytest.fixture
def logged():
    messages: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("grpo_compat")
    logger.addHandler(handler)
    yield messages
    logger.removeHandler(handler)


def test_a_deferred_report_is_logged_once_when_its_module_loads_not_at_the_first_target(upstream, logged):
    target, final = upstream("impl", SOURCE), upstream("trainer", "import sys\n")
    engine = Engine([make_patch(target, "double")])
    engine.defer_report([final, "no_such_module.anywhere"])
    engine.apply()
    importlib.import_module(target)
    assert not [m for m in logged if ONE_LINE_MARK in m]
    importlib.import_module(final)
    assert len([m for m in logged if ONE_LINE_MARK in m]) == 1
    engine.revert()


def test_a_wrapper_that_upstream_deletes_after_wrapping_is_not_reported_as_applied(upstream):
    module = importlib.import_module(upstream("impl", SOURCE))
    engine = Engine([make_patch(module.__name__, "Model.step")])
    assert engine.apply().status_of("test.add-one") is Status.APPLIED
    del module.Model.step  # what ms-swift does to trl's GRPOTrainer.__init__
    entry = engine.report()["test.add-one"]
    assert entry.status is Status.TARGET_MISSING
    assert entry.reason.startswith(f"not in effect: {module.__name__}.Model.step was deleted or replaced")
    engine.revert()


def test_a_wrapper_wrapped_again_by_a_second_patch_is_still_in_effect(upstream):
    module = importlib.import_module(upstream("impl", SOURCE))
    first, second = (make_patch(module.__name__, "Model.step", patch_id=f"test.add-{n}") for n in ("one", "two"))
    engine = Engine([first, second])
    report = engine.apply()
    assert module.Model().step(1) == 3
    assert [report.status_of(p.id) for p in (first, second)] == [Status.APPLIED, Status.APPLIED]
    engine.revert()


# -- the matrix: the command line on every ms-swift cell ------------------------------------------------


def test_swift_cells_run_the_command_line_on_one_and_two_ranks_and_its_refusals():
    from matrix.runs import planned_runs

    runs = {run.name: run for run in planned_runs({"trl": "0.19.0", "ms-swift": "3.5.3"}, "cpu")}
    for mode in ("plain", "patched"):
        assert runs[f"swift-cli/{mode}"].script == "swift-cli"
        assert runs[f"swift-cli-2proc/{mode}"].script == "swift-cli"
        for reproducer in ("single-generation-swift-cli", "impossible-batch-swift-cli"):
            assert runs[f"repro:{reproducer}/{mode}"].script == "swift-cli"
    # Refused before the model loads: the patched expectation demands the phase.
    assert runs["repro:single-generation-swift-cli/patched"].expect_error.endswith("phase: config")
    assert not [run for run in planned_runs({"trl": "1.16.0"}, "cpu") if run.script == "swift-cli"]


def test_the_error_of_a_swift_run_is_the_first_exception_a_rank_raised():
    from grpo_compat.matrix.launchers import error_of

    output = (
        "[INFO:swift] Successfully imported external_plugins\n"
        "[rank1]: Traceback (most recent call last):\n"
        '[rank1]:   File "x.py", line 1, in <module>\n'
        "[rank1]: grpo_compat.core.errors.GRPOSettingsError: the eval batch is wrong.\n"
        "[rank1]: Set per_device_eval_batch_size=4.\n"
        "[rank1]:\n"
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: swift/cli/rlhf.py FAILED\n"
    )
    assert error_of(output) == "GRPOSettingsError: the eval batch is wrong.\nSet per_device_eval_batch_size=4."
    assert error_of("[INFO:swift] all fine\n") is None


# The tail of a 2-rank CI run (swift-4.6, 2026-11-25): both ranks trained and saved, then rank 1 aborted at exit.
ABORTED_AT_EXIT = """
Train: 100%|##########| 3/3 [00:00<00:00,  4.76it/s]
[INFO:swift] last_model_checkpoint: /tmp/smoke_swift_cli__d8g6kw8/out/checkpoint-3
[INFO:swift] End time of running main: 2026-11-25 01:13:04.429933
terminate called without an active exception
W1125 01:13:04.575000 9918 multiprocessing/api.py:1028] Sending process 9923 closing signal SIGTERM
E1125 01:13:04.640000 9918 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -6) local_rank: 1
"""


def test_only_an_exit_abort_after_every_rank_trained_counts_as_trained():
    from matrix.smoke_swift_cli import aborted_after_training

    two_ranks, both_ended = SimpleNamespace(nproc=2), {"0": {}, "1": {}}
    assert aborted_after_training(two_ranks, ABORTED_AT_EXIT, both_ended)
    assert not aborted_after_training(two_ranks, ABORTED_AT_EXIT, {"0": {}})  # a rank never ended training
    before_main_ended = ABORTED_AT_EXIT.replace("[INFO:swift] End time of running main", "[INFO:swift] Saved")
    assert not aborted_after_training(two_ranks, before_main_ended, both_ended)
    a_rank_raised = ABORTED_AT_EXIT + "[rank1]: Traceback (most recent call last):\n[rank1]: RuntimeError: boom\n"
    assert not aborted_after_training(two_ranks, a_rank_raised, both_ended)


# -- the command line, for real ---------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.cells("swift-4.6")
def test_two_ranks_train_with_the_plugin_and_a_user_plugin_and_log_one_report(model_dir, tmp_path):
    # smoke_swift_cli.py refuses a run that trained without the user plugin's reward in the metrics, without
    # grpo_compat applied and its watchdog among the trainer's callbacks on every rank, or with != 1 report.
    result = smoke(CELL, "patched", model_dir, tmp_path, script="smoke_swift_cli.py", flags=("--nproc", "2"))
    assert result["status"] == "ok", result["error"]
    assert result["all_trainable_params_changed"] and result["steps"] == 3
    assert result["report_count"] == 1
    assert sorted(result["ranks"]) == ["0", "1"]
    assert all("LearningWatchdog" in rank["callbacks"] for rank in result["ranks"].values())
    statuses = {p["id"]: (p["status"], p["reason"]) for p in result["grpo_compat"]["patches"]}
    assert statuses["trl.learning-watchdog"][0] == "applied"
    # ms-swift deletes trl's GRPOTrainer.__init__: patches there must not claim to be in effect.
    assert statuses["trl.grpo-trainer-check"][0] == "not needed"
    assert "GRPOTrainer.__init__ was deleted" in statuses["trl.launch-guard"][1]


@pytest.mark.slow
@pytest.mark.cells("swift-4.6")
def test_single_generation_gets_grpo_compats_message_before_the_model_loads(model_dir, tmp_path):
    result = smoke(CELL, "patched", model_dir, tmp_path, "num_generations=1", script="smoke_swift_cli.py")
    assert result["error"].startswith("SwiftFailed: GRPOSettingsError: GRPO needs at least 2 completions per prompt")
    assert "Set num_generations=2 (--num_generations 2)" in result["error"].splitlines()[0]
    assert result["phase"] == "config"  # no model had started loading


# ms-swift 4.x moved the public names (swift.llm -> swift, swift.plugin -> swift.rewards) and renamed train_type.
IN_PROCESS_IMPORTS = {
    "swift-3.5": ("from swift.llm import RLHFArguments, rlhf_main\nfrom swift.plugin import ORM, orms", "train_type"),
    CELL: ("from swift import RLHFArguments, rlhf_main\nfrom swift.rewards import ORM, orms", "tuner_type"),
}


@pytest.mark.slow
@pytest.mark.parametrize("cell", IN_PROCESS_IMPORTS)
def test_in_process_apply_checks_rlhf_arguments_and_rlhf_main_trains(cell, tmp_path_factory, tmp_path):
    python = cell_python(cell)
    model_dir = tiny_model_for(python, tmp_path_factory.mktemp(f"tiny-qwen2-{cell}"))
    imports, tuner = IN_PROCESS_IMPORTS[cell]
    dataset = write_prompts(tmp_path / "prompts.jsonl")
    code = f"""
import grpo_compat
grpo_compat.apply()  # before RLHFArguments: it is checked while it is built
{imports}

class Length(ORM):
    def __call__(self, completions, **kwargs):
        return [len(c) / 10 for c in completions]

orms["length"] = Length
common = dict(
    rlhf_type="grpo", model={str(model_dir)!r}, model_type="qwen2", template="qwen2_5", {tuner}="full",
    torch_dtype="float32", check_model=False, dataset=[{str(dataset)!r}], split_dataset_ratio=0,
    reward_funcs=["length"], output_dir={str(tmp_path / "out")!r}, add_version=False, max_steps=1,
    num_generations=4, max_completion_length=8, save_strategy="steps", save_steps=1, save_only_model=True,
    report_to=["none"], dataloader_num_workers=0, dataset_num_proc=1, eval_strategy="no",  # 3.x: else save_strategy
)
try:
    RLHFArguments(**common, per_device_train_batch_size=3)
except grpo_compat.GRPOSettingsError as error:
    print("REFUSED", str(error).splitlines()[0])
rlhf_main(RLHFArguments(**common, per_device_train_batch_size=4))
print("WATCHDOG", grpo_compat.report().status_of("trl.learning-watchdog"))
"""
    completed = subprocess.run(
        [python, "-c", code], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=swift_env(python)
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "REFUSED every prompt's 4 completions must land in the same generation batch" in completed.stdout
    assert "WATCHDOG applied" in completed.stdout
    assert_weights_changed(model_dir, tmp_path / "out")


def assert_weights_changed(model_dir: Path, output_dir: Path) -> None:
    check = f"""
import glob, torch
from safetensors.torch import load_file
before = load_file({str(model_dir / "model.safetensors")!r})
(saved,) = glob.glob({str(output_dir / "checkpoint-*" / "model.safetensors")!r})
after = load_file(saved)
print(sorted(name for name in before if name in after and torch.equal(before[name], after[name])))
"""
    unchanged = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True)
    assert unchanged.returncode == 0, unchanged.stderr[-2000:]
    assert unchanged.stdout.strip() == "[]"


# -- the documented command line (docs/swift.md), as written ------------------------------------------


def documented_block(language: str, must_contain: str) -> str:
    blocks = re.findall(rf"```{language}\n(.*?)```", (REPO / "docs" / "swift.md").read_text(), re.S)
    (block,) = [b for b in blocks if must_contain in b]
    return block


@pytest.mark.slow
@pytest.mark.cells("swift-4.6")
def test_readme_command_line_trains_with_the_plugin_and_the_users_reward(python, model_dir, tmp_path):
    command = documented_block("bash", "--reward_funcs my_length")  # the full example, not the quick start line
    rewards = documented_block("python", "# my_rewards.py")
    (tmp_path / "my_rewards.py").write_text(rewards)
    dataset = re.search(r"--dataset (\S+)", command).group(1)
    write_prompts(tmp_path / dataset)
    # The one substitution: the tiny local model for the hub model. For a local folder swift cannot tell
    # qwen2 from qwen2_gte, nor the chat template, so those come with it.
    model = re.search(r"--model (\S+)", command).group(1)
    command = command.replace(f"--model {model}", f"--model {model_dir} --model_type qwen2 --template qwen2_5")
    completed = subprocess.run(
        ["bash", "-c", command], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=swift_env(python)
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output[-3000:]
    assert output.count(ONE_LINE_MARK) == 1
    assert "'rewards/MyLength/mean'" in output
    assert list(tmp_path.glob("output/**/checkpoint-*/adapter_model.safetensors"))


def planned_pair(kind: str, swift: str) -> dict:
    """The plain and patched runs of one kind the matrix plans for an ms-swift cell, by mode."""
    from matrix.runs import planned_runs

    versions = {"trl": "0.29.1", "ms-swift": swift}
    return {run.mode: run for run in planned_runs(versions, "cpu") if run.kind == kind}


def test_gdpo_with_an_unscorable_reward_is_trained_plain_and_patched_on_the_ms_swift_that_has_gdpo():
    # ms-swift #8123 did not reproduce on any swift rlhf release (catalogue swift-gdpo-unscorable-reward): the matrix
    # keeps it so on 4.x, and grpo_compat must train it as upstream does (identical weights).
    runs = planned_pair("swift-gdpo-unscorable-reward", "4.6.0")
    assert set(runs) == {"plain", "patched"} and runs["patched"].same_as_plain
    assert all(run.expect_error is None and "scale_rewards=gdpo" in run.settings for run in runs.values())
    assert planned_pair("swift-gdpo-unscorable-reward", "3.12.6") == {}  # no 'gdpo' before 4.0: argparse refuses it


def test_on_policy_distillation_without_rewards_is_trained_plain_and_patched_where_ms_swift_has_it():
    # ms-swift #9928 (catalogue swift-grpo-teacher-without-opd): 4.4 on trains it; the patched run must not be stopped
    # or warned about by the watchdog (the judge fails a run expected to learn on any watchdog warning).
    runs = planned_pair("swift-opd-no-rewards", "4.6.0")
    assert set(runs) == {"plain", "patched"} and runs["patched"].same_as_plain
    assert all(run.flags == ("--teacher",) and run.expect_error is None for run in runs.values())
    assert planned_pair("swift-opd-no-rewards", "4.3.2") == {}
