"""The matrix runner: a broken cell or a crashing run is a result with its reason, never a hang or a gap."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grpo_compat.matrix import runner
from grpo_compat.matrix.cells import Cell
from matrix import runs
from matrix.repository import cells_file, repository_project
from matrix.runs import Run, judge, planned_runs

CELL = Cell(name="local", pins={"torch": "2.13.0"})
PROJECT = repository_project()


@pytest.mark.slow
def test_unsatisfiable_pins_make_an_error_cell_with_the_reason(tmp_path):
    broken = Cell(name="broken-pins", pins={"torch": "2.13.0", "trl": "0.0.999"})
    record = runner.run_cell(broken, PROJECT, tmp_path)
    assert record["status"] == "error"
    assert record["reason"].startswith("env build failed")
    assert "trl==0.0.999" in record["reason"]  # uv's own reason, not the command it ran
    assert "trl==0.0.999" in record["env"]["error"]
    assert json.loads((tmp_path / "broken-pins.json").read_text())["status"] == "error"


@pytest.fixture
def fake_script(tmp_path, monkeypatch):
    def install(source: str) -> None:
        script = tmp_path / "script.py"
        script.write_text(source)
        monkeypatch.setitem(runs.SCRIPTS, "fake", runs.Script(script, "grpo"))

    return install


def run_fake(tmp_path: Path, **options) -> dict:
    run = Run("single", "plain", "fake", **options)
    return runner.execute(run, Path(sys.executable), CELL, tmp_path, PROJECT, None)[0]


def test_a_script_that_crashes_is_a_failed_run_with_its_output(fake_script, tmp_path):
    fake_script("raise RuntimeError('smoke script exploded')\n")
    outcome = run_fake(tmp_path)
    assert (outcome["status"], outcome["outcome"]) == ("fail", "crashed before writing a result")
    assert "smoke script exploded" in outcome["error"]


def test_runs_side_by_side_get_their_share_of_the_cores_and_a_users_thread_setting_is_kept(
    fake_script, tmp_path, monkeypatch
):
    fake_script("import os, sys\nprint('threads', os.environ.get('OMP_NUM_THREADS'))\nsys.exit(3)\n")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(runner.os, "cpu_count", lambda: 8)
    assert [runner.threads_per_run(jobs) for jobs in (1, 2, 3, 16)] == [None, 4, 2, 1]
    run = Run("single", "plain", "fake")
    shared = runner.execute(run, Path(sys.executable), CELL, tmp_path, PROJECT, None, runner.threads_per_run(2))
    assert "threads 4" in shared[0]["error"]
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert runner.threads_per_run(2) is None
    assert "threads 3" in run_fake(tmp_path)["error"]


def test_a_run_that_hangs_is_stopped_and_reported_as_a_timeout(fake_script, tmp_path):
    fake_script("import time\ntime.sleep(60)\n")
    outcome = run_fake(tmp_path, timeout_s=2)
    assert outcome["status"] == "timeout"
    assert outcome["wall_time_s"] < 30


def test_a_long_run_says_every_heartbeat_that_it_still_runs_and_keeps_its_log(fake_script, tmp_path, monkeypatch):
    from grpo_compat.matrix import envs

    monkeypatch.setattr(envs, "HEARTBEAT_S", 0.3)
    fake_script("import time\nprint('started', flush=True)\ntime.sleep(1.5)\nraise SystemExit(2)\n")
    said: list[str] = []
    run = Run("single", "plain", "fake")
    outcome = runner.execute(run, Path(sys.executable), CELL, tmp_path, PROJECT, None, None, said.append)[0]
    assert said and all(message.startswith("still running after ") for message in said)
    assert outcome["status"] == "fail" and "started" in (tmp_path / f"{run.slug}.log").read_text()


@pytest.mark.slow
def alive(pid: int) -> bool:
    """``pid`` runs: neither gone nor dead and waiting to be reaped."""
    from grpo_compat.testing.smoke import process_stat

    return process_stat(pid)[:1] not in ([], ["Z"])


def test_a_launch_that_times_out_inside_a_run_takes_its_ranks_with_it(tmp_path):
    from grpo_compat.testing.smoke import descendants, run_launcher

    ranks = tmp_path / "ranks"
    rank = "sleep 300 </dev/null >/dev/null 2>&1 &"  # a rank that does not hold the launcher's output open
    launcher = f"{rank} echo $! >> {ranks}; {rank} echo $! >> {ranks}; wait"
    with pytest.raises(subprocess.TimeoutExpired):
        run_launcher(["sh", "-c", launcher], timeout=2)
    launched = [int(pid) for pid in ranks.read_text().split()]
    deadline = time.monotonic() + 60  # SIGKILL is delivered asynchronously: a loaded machine takes a moment
    while any(map(alive, launched)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(map(alive, launched))
    done = run_launcher(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout=30)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")
    assert descendants(os.getpid()) == []


def test_a_runner_crash_is_the_cells_result_and_the_json_is_written(tmp_path, monkeypatch):
    def explode(*args, **kwargs):
        raise KeyError("no such run kind")

    monkeypatch.setattr(runs, "planned_runs", explode)
    cells = cells_file()
    default = cells.default
    record = runner.run_cell(cells.cells[default], PROJECT, tmp_path)
    assert record["status"] == "error"
    assert "runner crashed: KeyError" in record["reason"]
    assert json.loads((tmp_path / f"{default}.json").read_text())["reason"] == record["reason"]


def test_patched_run_must_reproduce_the_plain_weights():
    result = {"status": "ok", "all_trainable_params_changed": True, "weights_sha256": "b"}
    patched = Run("single", "patched", "grpo")
    plain = {**result, "weights_sha256": "a"}
    assert judge(patched, result, plain) == ("fail", "trained, but weights differ from the plain run")
    assert judge(patched, result, result) == ("pass", "trained")
    unchanged = {**result, "all_trainable_params_changed": False, "unchanged_params": ["w"]}
    assert judge(patched, unchanged, result)[0] == "fail"


def test_a_multi_turn_run_needs_an_environments_method_as_a_tool_and_patched_the_plain_runs_resets():
    # What tests of the tools / environments pairs asserted beside the weights: the matrix's pairs now judge it
    run = Run("environments", "patched", "grpo", flags=("--multi-turn", "environments"), checks=("multi-turn",))
    plain = {"status": "ok", "all_trainable_params_changed": True, "weights_sha256": "a"}
    plain |= {"environment_resets": 12, "tools": ["add", "echo", "increment"]}
    assert judge(run, plain, plain) == ("pass", "trained (12 environment resets, tools add, echo, increment)")
    assert judge(run, {**plain, "environment_resets": 13}, plain) == (
        "fail",
        "trained, but 13 environment resets where the plain run had 12",
    )
    status, outcome = judge(run, {**plain, "tools": ["add"]}, plain)
    assert (status, outcome) == ("fail", "no method of an environment became a tool: tools add")
    assert judge(run, {**plain, "environment_resets": 0}, plain)[0] == "fail"
    assert judge(run, plain, {"status": "error", "error": "ValueError: upstream"})[0] == "pass"  # nothing to compare


def test_a_resumed_run_must_end_at_its_steps_having_run_those_after_its_checkpoint():
    flags = ("--steps", "4", "--resume-from-step", "1")
    run = Run("repro:resume-between-generations", "patched", "grpo", flags=flags, checks=("resumed-steps",))
    trained = {"status": "ok", "all_trainable_params_changed": True, "steps": 4, "resumed_steps_run": 3}
    assert judge(run, trained, None) == ("pass", "trained (resumed from checkpoint-1 for 3 steps to step 4)")
    status, outcome = judge(run, {**trained, "resumed_steps_run": 4}, None)
    assert (status, outcome) == ("fail", "the resumed trainer ran 4 steps to step 4, not 3 from checkpoint-1 to 4")
    assert judge(run, {**trained, "steps": 3, "resumed_steps_run": 2}, None)[0] == "fail"


def test_weights_corrupted_at_load_fail_the_run_even_when_it_trains():
    result = {"status": "ok", "all_trainable_params_changed": True, "corrupted_at_load": ["layers.0.k_proj.weight"]}
    status, outcome = judge(Run("zero3", "plain", "grpo"), result, None)
    assert (status, outcome) == ("fail", "weights corrupted at load: layers.0.k_proj.weight")


def test_a_skipped_run_is_reported_with_its_reason_and_not_started(tmp_path):
    outcome, result = runner.execute(
        Run("zero3", "plain", "grpo", skip="why not"), Path("/nonexistent/python"), CELL, tmp_path, PROJECT, None
    )
    assert result == {}
    assert (outcome["status"], outcome["outcome"]) == ("skipped", "why not")


def test_expected_upstream_failure_passes_only_with_the_expected_message():
    run = Run("repro:x", "plain", "grpo", expect_error=r"evenly divisible")
    assert judge(run, {"status": "error", "error": "ValueError: must be evenly divisible"}, None)[0] == "pass"
    assert judge(run, {"status": "error", "error": "ValueError: something else"}, None)[0] == "fail"
    assert judge(run, {"status": "ok", "error": None}, None)[0] == "fail"


def test_run_plan_follows_the_cells_versions():
    trl_cell = planned_runs({"trl": "0.16.1", "deepspeed": "0.16.5"}, "cpu")
    names = [run.name for run in trl_cell]
    assert {f"{kind}/{mode}" for kind in ("single", "ddp", "zero2", "zero3") for mode in ("plain", "patched")} <= set(
        names
    )
    assert "repro:single-generation/plain" in names
    zero3 = [run for run in trl_cell if run.kind == "zero3"]
    assert all(run.skip and "DeepSpeed < 0.19.8" in run.skip for run in zero3)
    newest = planned_runs({"trl": "1.16.0", "deepspeed": "0.19.8"}, "cpu")
    assert not [run for run in newest if run.skip and run.script != "upstream"]
    assert all(run.skip for run in trl_cell if run.variant and run.variant.stage == 3)
    # One GPU per lent machine: no multi-process kinds on cuda cells.
    cuda_kinds = {r.kind for r in planned_runs({"trl": "1.16.0", "deepspeed": "0.19.8"}, "cuda")}
    assert "single" in cuda_kinds and not cuda_kinds & {"ddp", "zero2", "zero3"}
    swift = {run.name for run in planned_runs({"trl": "0.19.0", "ms-swift": "3.5.3"}, "cpu")}
    assert {"swift/plain", "swift/patched"} <= swift and "single/plain" not in swift


def test_a_version_skew_cell_runs_its_smoke_kinds_against_the_skew_and_only_its_reproducer():
    # A crash grpo_compat shims: plain smoke runs expect the crash, patched ones train.
    shimmed = {run.name: run for run in planned_runs({"trl": "0.16.1", "transformers": "4.52.4"}, "cpu")}
    assert shimmed["single/plain"].expect_error and "_get_train_sampler" in shimmed["single/plain"].expect_error
    assert shimmed["single/patched"].expect_error is None
    assert {name for name in shimmed if name.startswith("repro:")} == {
        "repro:train-sampler-signature/plain",
        "repro:train-sampler-signature/patched",
    }
    # A crash grpo_compat refuses: plain smoke runs expect the crash, patched ones the refusal.
    refused = {run.name: run for run in planned_runs({"trl": "0.14.0", "transformers": "4.45.2"}, "cpu")}
    assert "processing_class" in refused["ddp/plain"].expect_error
    assert "UnsupportedCombinationError" in refused["ddp/patched"].expect_error
    # A silent skew (its reproducer is a probe): plain smoke runs train, wrongly; patched ones are refused.
    silent = {run.name: run for run in planned_runs({"trl": "0.14.0", "transformers": "4.52.4"}, "cpu")}
    assert silent["single/plain"].expect_error is None and "wrongly" in silent["single/plain"].expectation
    assert "UnsupportedCombinationError" in silent["single/patched"].expect_error
    assert "repro:num-logits-to-keep-ignored/plain" in silent
    # At the window's edge nothing is refused: trl 0.14 on transformers 4.51.3 trains, patched too.
    edge = planned_runs({"trl": "0.14.0", "transformers": "4.51.3"}, "cpu")
    assert not [run for run in edge if run.kind in ("single", "ddp") and run.expect_error]


def test_a_skew_that_stops_trls_trainer_importing_shows_only_its_own_patchs_effect():
    versions = {"trl": "0.26.2", "ms-swift": "4.6.0", "transformers": "5.19.0", "torch": "2.13.0"}
    (effects,) = [run for run in planned_runs(versions, "cpu") if run.kind == "effects"]
    assert effects.flags == ("--patches", "swift.refuse-trl-optional-imports")
    # A skew that lets the trainer import (ms-swift 3.2.0 + trl 0.16) still shows every patch of its window.
    versions = {"trl": "0.16.1", "ms-swift": "3.2.0", "transformers": "4.49.0", "torch": "2.13.0"}
    (effects,) = [run for run in planned_runs(versions, "cpu") if run.kind == "effects"]
    assert len(effects.flags[1].split(",")) > 1


def test_quick_cells_exist_and_include_the_newest_and_trl_0_16():
    cells = cells_file()
    assert set(cells.quick) <= set(cells.cells)
    assert {cells.default, "trl-0.16"} <= set(cells.quick)


def test_cli_names_unknown_cells_and_lists_the_valid_ones():
    import subprocess

    result = subprocess.run(
        [sys.executable, "-m", "grpo_compat", "matrix", "run", "--cells", "trl-9.99"], capture_output=True, text=True
    )
    assert result.returncode != 0
    assert "unknown cell(s) trl-9.99; " in result.stderr and "cells.toml has " in result.stderr
    assert "trl-0.16, " in result.stderr.split(" has ", 1)[1]
    assert "Traceback" not in result.stderr


def test_cli_rebuilds_reports_from_the_cell_json(tmp_path):
    import subprocess

    (tmp_path / "trl-0.16.json").write_text(json.dumps({"cell": "trl-0.16", "status": "pass", "runs": []}))
    result = subprocess.run(
        [sys.executable, "-m", "grpo_compat", "matrix", "report", "--results", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "summary.md").exists() and (tmp_path / "report.html").exists()


@pytest.mark.slow
def test_a_cell_env_builds_with_no_network_from_its_wheelhouse(tmp_path):
    """The GPU machines have no network: a cell must build from wheels carried in beforehand.

    A cell like the cuda ones (torch preinstalled on the target, seen through system site-packages),
    built inside a network namespace with no interfaces when the machine allows it.
    """
    import shutil
    import subprocess

    import torch

    from grpo_compat.matrix.envs import TargetMachine, uv_command
    from matrix.repository import ENVS, REPO

    cell = Cell(name="offline-check", pins={"torch": "preinstalled"}, exclude_newer="2026-11-01")
    # The target is this env, as its `pip freeze` says: what it holds at the resolved version is left out
    freeze = subprocess.run(
        [*uv_command(), "pip", "freeze", "--python", sys.executable], capture_output=True, text=True, check=True
    ).stdout
    target = TargetMachine.from_freeze(freeze)
    wheelhouse = ENVS.fill_wheelhouse(cell, tmp_path / "wheels", target=target)
    assert not list(wheelhouse.glob("torch-*.whl")) and not list(wheelhouse.glob("numpy-*.whl"))
    assert list(wheelhouse.glob("uv-*.whl")) and list(wheelhouse.glob("setuptools-*.whl"))  # the offline builds
    no_network = (
        ["unshare", "-n"]
        if shutil.which("unshare") and subprocess.run(["unshare", "-n", "true"]).returncode == 0
        else []
    )
    # `project.py ensure` takes cells from cells.toml; this ad-hoc cell is built through the module.
    code = (
        "import sys; from pathlib import Path; from grpo_compat.matrix.cells import Cell; "
        "from matrix.repository import ENVS; "
        f"print(ENVS.ensure(Cell(name='offline-check', pins={{'torch': 'preinstalled'}}, exclude_newer='2026-11-01'), "
        f"Path({str(tmp_path / 'env')!r}), wheelhouse=Path({str(wheelhouse)!r})))"
    )
    command = [*no_network, sys.executable, "-c", code]
    built = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    assert built.returncode == 0, built.stderr[-2000:]
    python = built.stdout.strip().splitlines()[-1]
    # torch is the running interpreter's, whether that is a system python or a venv's (as on the GPU images)
    code = "import datasets, numpy, torch, grpo_compat.testing.tiny_model; print(torch.__file__)"
    check = subprocess.run([python, "-c", code], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr[-2000:]
    assert check.stdout.strip() == torch.__file__


def test_trls_own_suites_run_in_trl_cells_outside_quick_and_say_why_when_skipped(monkeypatch):
    monkeypatch.delenv(runs.TRL_SOURCE_ENV, raising=False)
    newest = {"trl": "1.16.0", "deepspeed": "0.19.8"}
    upstream = [run for run in planned_runs(newest, "cpu") if run.kind.startswith("upstream:")]
    assert [run.name for run in upstream] == [
        f"upstream:{s}/{m}" for s in ("grpo", "sft") for m in ("plain", "patched")
    ]
    assert all(runs.TRL_SOURCE_ENV in run.skip for run in upstream)
    assert not [run for run in planned_runs(newest, "cpu", quick=True) if run.kind.startswith("upstream:")]
    assert not [run for run in planned_runs({"trl": "0.19.0", "ms-swift": "3.5.3"}, "cpu") if run.script == "upstream"]


def test_a_patched_upstream_suite_passes_only_with_every_outcome_and_loss_of_the_plain_pass():
    run = Run("upstream:grpo", "patched", "upstream", flags=("--suite", "grpo"))
    tests = {"t::a": {"outcome": "passed", "final_loss": 0.5}, "t::b": {"outcome": "skipped", "final_loss": None}}
    plain = {"status": "ok", "trl": "1.9.2", "tag": "v1.9.0", "suite": "grpo", "tests": tests}
    assert judge(run, plain, plain)[0] == "pass"
    changed_loss = {**plain, "tests": {**tests, "t::a": {"outcome": "passed", "final_loss": 0.25}}}
    status, outcome = judge(run, changed_loss, plain)
    assert status == "fail" and "t::a: final loss 0.5 -> 0.25" in outcome
    failed = {**plain, "tests": {**tests, "t::b": {"outcome": "failed", "final_loss": None}}}
    assert judge(run, failed, plain)[0] == "fail"
    assert judge(run, {"status": "error", "error": "RuntimeError: pytest exited 2"}, plain)[0] == "fail"


def test_the_default_cell_runs_in_the_development_env_only_while_it_holds_the_cells_pins(tmp_path, monkeypatch):
    from matrix import repository

    cells = cells_file()
    default, other = cells.cells[cells.default], cells.cells["trl-0.16"]
    development = tmp_path / "venv"
    (development / "bin").mkdir(parents=True)
    (development / "bin" / "python").write_text("")
    monkeypatch.setattr(repository, "DEVELOPMENT_ENV", development)
    envs = repository.RepositoryEnvs(tmp_path / "envs", repository.ENVS.source)
    fingerprint = default.fingerprint(envs.source.key())

    (development / ".grpo-compat-env").write_text(f"{fingerprint} dev")  # setup.sh's .venv of the default pins
    monkeypatch.setattr(envs, "_refresh_grpo_compat", lambda *args: None)
    assert envs.is_ready(default) and envs.ensure(default) == development / "bin" / "python"
    assert not envs.is_ready(other)  # every other cell keeps its own env

    (development / ".grpo-compat-env").write_text("0123456789ab dev")  # built from other pins
    assert not envs.is_ready(default)
    assert (development / "bin" / "python").exists()


def test_a_wheelhouse_for_another_machine_leaves_out_what_its_image_holds_at_the_resolved_version(tmp_path):
    from grpo_compat.matrix.envs import TargetMachine

    image = "# pip freeze of the GPU image\nnumpy==2.5.2\nPyYAML==6.0.3\nsetuptools==81.0.0\ngrpo-compat @ file:///x\n"
    target = TargetMachine.from_freeze(image, python="3.12")
    assert target.installed == {"numpy": "2.5.2", "pyyaml": "6.0.3", "setuptools": "81.0.0"}
    closure = tmp_path / "requirements.txt"
    closure.write_text("numpy==2.5.2\n    # via transformers\npyyaml==6.0.2\nsetuptools==81.0.0\ntrl==1.16.0\n")
    target.leave_out_installed(closure)
    # another version than the image's is carried; the build tools always are
    kept = ["#", "via", "transformers", "pyyaml==6.0.2", "setuptools==81.0.0", "trl==1.16.0"]
    assert closure.read_text().split() == kept
    cell = Cell(name="gpu", pins={"torch": "preinstalled", "trl": "1.16.0", "numpy": "2.4.0"})
    arguments = target.resolution(cell, tmp_path)
    assert arguments[:4] == ["--python-version", "3.12", "--python-platform", "x86_64-manylinux_2_28"]
    # the image's versions are preferred where the cell pins nothing (uv keeps an output file's versions it can)
    assert (tmp_path / "requirements.txt").read_text().split() == ["pyyaml==6.0.3", "setuptools==81.0.0"]
    assert "download" in target.fetch() and "3.12" in target.fetch()
