"""`grpo-compat run -- <command>`: grpo_compat in every Python process a launch starts, with no change to the script.

Real processes throughout: plain python, torchrun and accelerate with 2 gloo CPU processes, DeepSpeed ZeRO-2
through accelerate, `trl grpo --config`. `swift rlhf` without --external_plugins: test_zero_code_run_swift.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grpo_compat.core.report import ONE_LINE_MARK
from tests.helpers import REPO, TEARDOWN_ABORT, TRACEBACK_FRAME, default_port_held, free_port, grpo_compat_frames

BIN = Path(sys.executable).parent
USER_SCRIPT = REPO / "tests" / "user_scripts" / "train_grpo.py"
GRPO_COMPAT = [sys.executable, "-m", "grpo_compat"]


def run(*command: str, env: dict | None = None, cwd: Path = REPO, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*GRPO_COMPAT, "run", "--", *command],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )


def test_the_command_replaces_grpo_compat_run_so_its_pid_streams_and_status_are_its_own():
    child = subprocess.Popen(
        [*GRPO_COMPAT, "run", "--", sys.executable, "-c", "import os, sys; print(os.getpid()); sys.exit(7)"],
        stdout=subprocess.PIPE,
        text=True,
    )
    out, _ = child.communicate(timeout=60)
    assert (int(out), child.returncode) == (child.pid, 7)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_a_signal_reaches_the_command_as_it_would_without_grpo_compat():
    sleeper = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"]
    statuses = []
    for prefix in ([], [*GRPO_COMPAT, "run", "--"]):
        # A test runner started as a background job or under nohup inherits SIGINT ignored, and so would
        # its children: give them the default disposition a terminal's command has.
        child = subprocess.Popen([*prefix, *sleeper], stdout=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
        assert child.stdout.readline() == "up\n"
        child.send_signal(signal.SIGINT)  # Ctrl-C
        statuses.append(child.wait(timeout=60))
    assert statuses[0] == statuses[1] != 0


def test_a_missing_command_exits_127_and_no_command_exits_2():
    missing = run("no-such-command-here")
    assert missing.returncode == 127 and missing.stderr == "grpo-compat run: no-such-command-here: command not found\n"
    nothing = subprocess.run([*GRPO_COMPAT, "run"], capture_output=True, text=True, timeout=60)
    assert nothing.returncode == 2 and "give the command to run after --" in nothing.stderr


def test_unknown_patch_ids_are_refused_before_anything_runs():
    result = subprocess.run(
        [*GRPO_COMPAT, "run", "--skip", "trl.no-such-patch", "--", "true"], capture_output=True, text=True
    )
    assert result.returncode == 2 and "--skip 'trl.no-such-patch': expected patch ids among" in result.stderr


CHECK_ACTIVE = "import sys, grpo_compat; print(grpo_compat.report().active, any('startup' in p for p in sys.path))"


def test_every_python_process_is_patched_however_deep_and_sees_its_own_sys_path(tmp_path):
    (tmp_path / "grandchild.py").write_text(CHECK_ACTIVE)
    (tmp_path / "child.py").write_text(f"import os\nos.system('{sys.executable} grandchild.py')\n")  # via a shell
    result = run(sys.executable, "child.py", cwd=tmp_path)
    assert result.stdout.split() == ["True", "False"], result.stderr


def test_a_module_run_with_python_m_is_patched(tmp_path):
    (tmp_path / "users_entry_point.py").write_text(CHECK_ACTIVE)
    assert run(sys.executable, "-m", "users_entry_point", cwd=tmp_path).stdout.split() == ["True", "False"]


def test_nothing_is_active_in_a_process_not_started_through_run():
    result = subprocess.run(
        [sys.executable, "-c", CHECK_ACTIVE],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO / "grpo_compat" / "startup")},
    )  # the folder alone does nothing
    assert result.stdout.split() == ["False", "False"]


def test_the_users_own_sitecustomize_and_pythonpath_keep_working(tmp_path):
    (tmp_path / "sitecustomize.py").write_text("import os\nos.environ['USERS_SITECUSTOMIZE'] = 'ran'\n")
    (tmp_path / "users_module.py").write_text("VALUE = 42\n")
    code = "import os, users_module, grpo_compat\nprint(os.environ['USERS_SITECUSTOMIZE'], users_module.VALUE, "
    code += "grpo_compat.report().active)"
    result = run(sys.executable, "-c", code, env={"PYTHONPATH": str(tmp_path)})
    assert result.stdout.split() == ["ran", "42", "True"], result.stderr


def test_a_python_without_grpo_compat_is_stopped_where_it_imports_trl_and_says_what_to_install(tmp_path):
    bare = getattr(sys, "_base_executable", None)
    if (
        not bare
        or subprocess.run([bare, "-c", "import grpo_compat"], capture_output=True, cwd=tmp_path).returncode == 0
    ):
        pytest.skip("no interpreter without grpo_compat here")
    helper = run(bare, "-c", "print('a helper that trains nothing runs as before')", cwd=tmp_path)
    assert helper.returncode == 0 and "runs as before" in helper.stdout
    trainer = run(bare, "-c", "import trl", cwd=tmp_path)
    assert trainer.returncode == 1
    assert f"{bare} cannot import grpo_compat" in trainer.stderr and f"{bare} -m pip install {REPO}" in trainer.stderr


def test_print_env_gives_the_exports_for_a_job_script():
    result = subprocess.run([*GRPO_COMPAT, "run", "--strict", "--print-env"], capture_output=True, text=True)
    exported = dict(line.removeprefix("export ").split("=", 1) for line in result.stdout.splitlines())
    assert exported["GRPO_COMPAT_RUN"] == "1" and exported["GRPO_COMPAT_RUN_STRICT"] == "1"
    assert exported["PYTHONPATH"].split(os.pathsep)[0] == str(REPO / "grpo_compat" / "startup")


def test_strict_run_passes_where_every_patch_applies_or_is_outside_its_window():
    # The installed trl has patches outside their windows (fixes for other releases): not applicable, no failure.
    code = "import trl.trainer.grpo_trainer, grpo_compat\nprint({p.status.value for p in grpo_compat.report().patches})"
    result = subprocess.run(
        [*GRPO_COMPAT, "run", "--strict", "--", sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert "outside version window" in result.stdout and "applied" in result.stdout


# A patch declared in its window, on the installed trl's GRPOTrainer, whose target attribute no trl release has:
# the install is not what the patch was written for. Outside its window the same declaration is not applicable.
MOVED_TARGET = """
import sys
from grpo_compat.core.engine import Engine
from grpo_compat.core.registry import Patch, Target

def unchanged(wrapped, *args, **kwargs):
    return wrapped(*args, **kwargs)

def declared(patch_id, window):
    target = Target.parse("trl.trainer.grpo_trainer:GRPOTrainer.a_method_no_trl_release_has", unchanged)
    return Patch(patch_id, (window,), (target,))

outside = Engine([declared("test.outside-window", "trl<0.1")])
outside.apply(strict=True)
inside = Engine([declared("test.moved-target", sys.argv[1])])
inside.apply(strict=sys.argv[2] == "strict")
import trl.trainer.grpo_trainer
statuses = outside.report().status_of("test.outside-window"), inside.report().status_of("test.moved-target")
print(*statuses, sep="|")
"""


def test_strict_stops_the_process_at_a_patch_in_its_window_whose_target_is_missing():
    from grpo_compat.core.versions import installed_version

    window = f"trl>={installed_version('trl')}"
    strict = subprocess.run(
        [sys.executable, "-c", MOVED_TARGET, window, "strict"], capture_output=True, text=True, timeout=300
    )
    assert strict.returncode == 1 and not strict.stdout, strict.stdout + strict.stderr
    assert "PatchFailedError: grpo_compat.apply(strict=True): test.moved-target target missing" in strict.stderr
    assert "test.outside-window" not in strict.stderr
    lenient = subprocess.run(
        [sys.executable, "-c", MOVED_TARGET, window, "lenient"], capture_output=True, text=True, timeout=300
    )
    assert lenient.returncode == 0, lenient.stderr
    assert lenient.stdout == "outside version window|target missing\n"


# A run that dies of a real upstream error a catalogue record names (torch's sampling on a NaN probability: the
# training-diverged record), after output on both streams; it waits for a line on stdin first, so that a test can
# see its output arrive while it still runs.
DIVERGES = """
import sys, torch
print("step 1 on stdout")
print("step 1 on stderr", file=sys.stderr)
sys.stdin.readline()
torch.multinomial(torch.tensor([float("nan"), 1.0]), 1)
"""


def test_run_explain_keeps_the_output_live_and_the_status_and_explains_a_failure_after_it(tmp_path):
    (tmp_path / "diverges.py").write_text(DIVERGES)
    child = subprocess.Popen(
        [*GRPO_COMPAT, "run", "--explain", "--", sys.executable, "diverges.py"],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout.readline() == "step 1 on stdout\n"  # while the command still runs: no print flushed it
    assert child.stderr.readline() == "step 1 on stderr\n"
    out, err = child.communicate("go\n", timeout=300)
    assert child.returncode == 1  # the command's own (explain's would be 0: a known failure matched)
    assert out == ""  # the explanation goes to stderr, after the traceback
    traceback_at = err.index("probability tensor contains either")
    assert traceback_at < err.index("failed; what its output shows:") < err.index("training-diverged")


def test_run_explain_says_nothing_after_a_success_and_dies_of_the_signal_that_killed_the_command():
    ok = subprocess.run(
        [*GRPO_COMPAT, "run", "--explain", "--", sys.executable, "-c", "print('trained')"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, "trained\n", "")
    killed = "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"
    statuses = [
        subprocess.run([*prefix, sys.executable, "-c", killed], capture_output=True, timeout=120).returncode
        for prefix in ([], [*GRPO_COMPAT, "run", "--explain", "--"])
    ]
    assert statuses == [-signal.SIGTERM, -signal.SIGTERM]


# -- training through every launcher --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from grpo_compat.testing.tiny_model import build_tiny_qwen2

    return str(build_tiny_qwen2(tmp_path_factory.mktemp("model") / "tiny", seed=0))


ACCELERATE = [
    str(BIN / "accelerate"),
    "launch",
    "--num_processes",
    "2",
    "--num_machines",
    "1",
    "--mixed_precision",
    "no",
    "--dynamo_backend",
    "no",
    "--main_process_port",
    "{port}",
]
# Each launch's rendezvous at a free port ({port}: launch_command), never the launchers' default 29500, which
# another job on the machine may hold.
LAUNCHERS = {
    "python": [sys.executable],
    "torchrun-2": [str(BIN / "torchrun"), "--nproc_per_node", "2", "--master_port", "{port}"],
    "accelerate-2": [*ACCELERATE, "--multi_gpu"],  # gloo CPU processes
    "accelerate-zero2": [*ACCELERATE, "--use_deepspeed", "--deepspeed_config_file", "{zero2}"],
    # DeepSpeed's own launcher; the script's GRPOConfig(deepspeed=...) names the config
    "deepspeed-zero2": [
        str(BIN / "deepspeed"),
        "--num_gpus",
        "2",
        "--master_port",
        "{port}",
        "--no_local_rank",
        "{script}",
        "--deepspeed",
        "{zero2}",
    ],
}


def launch_command(launcher: str, zero2: Path | None = None) -> list[str]:
    """A launcher's command line from LAUNCHERS, at a port free now."""
    return [part.format(zero2=zero2, script=USER_SCRIPT, port=free_port()) for part in LAUNCHERS[launcher]]


def once_more_after_a_teardown_abort(launch, result_file: Path) -> subprocess.CompletedProcess:
    """``launch()``, and once more when a rank trained, wrote its result and then aborted in gloo's teardown.

    An upstream teardown race after the run (tests.helpers.TEARDOWN_ABORT), not what this test is about.
    """
    completed = launch()
    # The whole log: the launcher's own traceback after the abort runs to some 2,500 characters (a CI run, 2026-11-27).
    if completed.returncode != 0 and result_file.exists() and TEARDOWN_ABORT in completed.stderr:
        print(f"gloo teardown abort after a finished run ({result_file.name}): launched once more")
        result_file.unlink()
        completed = launch()
    return completed


def trained(result_file: Path, completed: subprocess.CompletedProcess) -> dict:
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(result_file.read_text())


@pytest.fixture
def default_port_taken():
    """29500 held by another job, as on a shared machine: each launch's rendezvous must be at a free port."""
    with default_port_held():
        yield


@pytest.mark.slow
@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
def test_a_script_that_never_imports_grpo_compat_is_patched_on_every_rank(
    launcher, tiny_model, tmp_path, default_port_taken
):
    zero2 = tmp_path / "zero2.json"
    zero2.write_text(
        json.dumps(
            {
                "zero_optimization": {"stage": 2},
                "train_micro_batch_size_per_gpu": "auto",
                "gradient_accumulation_steps": "auto",
                "train_batch_size": "auto",
            }
        )
    )
    launch = launch_command(launcher, zero2)
    script = [*([] if str(USER_SCRIPT) in launch else [str(USER_SCRIPT)]), "--model", tiny_model]
    # The documented way, apply() in the script, without grpo-compat run: the weights to reproduce.
    in_script = once_more_after_a_teardown_abort(
        lambda: subprocess.run(
            [*launch, *script, "--output", str(tmp_path / "a.json"), "--apply"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=600,
        ),
        tmp_path / "a.json",
    )
    zero_code = once_more_after_a_teardown_abort(
        lambda: run(*launch, *script, "--output", str(tmp_path / "b.json"), cwd=tmp_path), tmp_path / "b.json"
    )
    expected, got = trained(tmp_path / "a.json", in_script), trained(tmp_path / "b.json", zero_code)
    assert got == expected and got["applied"]
    ranks = sorted(tmp_path.glob("b.json.rank*"))
    assert len(ranks) == (1 if launcher == "python" else 2)
    assert all(json.loads(rank.read_text())["applied"] for rank in ranks)  # every rank patched
    assert zero_code.stderr.count(ONE_LINE_MARK) == 1  # once per launch, on rank 0
    refused = run(*launch, *script, "--output", str(tmp_path / "c.json"), "--num-generations", "1", cwd=tmp_path)
    assert (
        refused.returncode != 0 and "GRPOSettingsError: GRPO needs at least 2 completions per prompt" in refused.stderr
    )
    assert not grpo_compat_frames(refused.stderr), refused.stderr[-6000:]  # the user's frames and upstream's only
    assert "Loading checkpoint" not in refused.stderr and not (tmp_path / "c.json").exists()


@pytest.mark.slow
def test_trl_grpo_config_trains_patched_and_an_impossible_config_is_refused(tiny_model, tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.jsonl").write_text(
        "".join(json.dumps({"prompt": f"count {n}"}) + "\n" for n in range(8))
    )
    (tmp_path / "user_rewards.py").write_text(
        "def length_reward(completions, **kwargs):\n    return [float(len(c)) for c in completions]\n"
    )
    config = {
        "model_name_or_path": tiny_model,
        "dataset_name": str(tmp_path / "data"),
        "reward_funcs": ["user_rewards.length_reward"],
        "output_dir": str(tmp_path / "out"),
        "max_steps": 2,
        "per_device_train_batch_size": 2,
        "num_generations": 2,
        "max_completion_length": 8,
        "use_cpu": True,
        "bf16": False,
        "report_to": "none",
        "save_strategy": "no",
        "logging_steps": 1,
    }
    (tmp_path / "grpo.yaml").write_text(json.dumps(config))  # JSON is YAML
    result = run(str(BIN / "trl"), "grpo", "--config", "grpo.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    # trl's launcher process imports trl too; the report comes from the process that trains
    assert (result.stdout + result.stderr).count(ONE_LINE_MARK) == 1
    (tmp_path / "grpo.yaml").write_text(json.dumps({**config, "num_generations": 1}))
    refused = run(str(BIN / "trl"), "grpo", "--config", "grpo.yaml", cwd=tmp_path)
    assert refused.returncode != 0 and "GRPOSettingsError: GRPO needs at least 2 completions" in refused.stderr
    frames = TRACEBACK_FRAME.findall(refused.stderr)
    assert not grpo_compat_frames(refused.stderr) and any("/trl/" in path for path in frames)  # trl's stay, ours not


@pytest.mark.slow
def test_sigterm_reaches_torchruns_ranks_and_the_exit_status_is_torchruns(tmp_path):
    (tmp_path / "rank.py").write_text(
        "import os, time\nopen(f\"rank{os.environ['RANK']}.pid\", 'w').write(str(os.getpid()))\ntime.sleep(120)\n"
    )
    statuses = []
    for prefix in ([], [*GRPO_COMPAT, "run", "--"]):
        for pid_file in tmp_path.glob("*.pid"):
            pid_file.unlink()
        launch = subprocess.Popen(
            [*prefix, *launch_command("torchrun-2"), "rank.py"],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 120
        while len(list(tmp_path.glob("*.pid"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        ranks = [int(path.read_text()) for path in tmp_path.glob("*.pid")]
        assert len(ranks) == 2
        launch.send_signal(signal.SIGTERM)  # as a scheduler does
        statuses.append(launch.wait(timeout=120))
        for pid in ranks:
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
    assert statuses[0] == statuses[1] != 0
