"""Helpers the tests share: subprocess runners, cell interpreters, smoke runs, a throwaway patch.

Fixtures live in conftest.py; everything a test module imports from another lives here, so no test module
imports another.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

from grpo_compat.core.registry import Patch, Target
from grpo_compat.matrix.envs import uv_command
from grpo_compat.testing.smoke import free_port as free_port  # binds port 0: a launch's rendezvous port, never 29500

DEFAULT_RENDEZVOUS_PORT = 29500  # torchrun's, accelerate's and DeepSpeed's default MASTER_PORT


@contextlib.contextmanager
def default_port_held():
    """Port 29500 held, as another job on the machine may hold it: a launch at its default port fails meanwhile.
    Where something else holds it already, that is the same condition."""
    import socket

    with socket.socket() as holder:
        with contextlib.suppress(OSError):
            holder.bind(("", DEFAULT_RENDEZVOUS_PORT))
            holder.listen()
        yield


REPO = Path(__file__).resolve().parent.parent


def fresh_env(folder: Path) -> dict[str, str]:
    """The environment of a new venv (FOLDER/venv) with pip, as a user has: first on PATH; no grpo_compat on
    PYTHONPATH."""
    venv = folder / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    environment = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**environment, "PATH": f"{venv / 'bin'}{os.pathsep}{environment['PATH']}", "VIRTUAL_ENV": str(venv)}


def run_python(
    code: str, env: dict[str, str] | None = None, python: str = sys.executable
) -> subprocess.CompletedProcess:
    """Run code in a fresh interpreter (import state is per process)."""
    return subprocess.run(
        [python, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**cell_environment(python), **(env or {})},
        timeout=600,
    )


def build_wheel(out: Path) -> Path:
    """This checkout's wheel, built into ``out``. One build at a time: setuptools writes build/ and the egg-info
    inside the checkout, which tests running side by side (pytest -n 2) would otherwise share."""
    import fcntl

    (REPO / ".matrix").mkdir(exist_ok=True)
    with open(REPO / ".matrix" / "wheel-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        built = subprocess.run(
            [*uv_command(), "build", "--wheel", "--out-dir", str(out), str(REPO)],
            capture_output=True,
            text=True,
            timeout=600,
        )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = out.glob("grpo_compat-*.whl")
    return wheel


def run_script(python: str, script: str, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """Run a script of this checkout (``matrix/...``, ``tests/...``) as the matrix runner does: matrix.* importable."""
    pythonpath = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        [python, str(REPO / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env={**cell_environment(python), "PYTHONPATH": pythonpath},
    )


# pytorch/pytorch#190489: a gloo rank may abort at exit after its run finished and wrote its result. Clean-clone CI
# runs saw it under DeepSpeed's launcher and torchrun (2026-11), 16 runs by hand did not: tests that launch ranks
# launch once more when they see it, and fail on any other error or on the abort twice.
TEARDOWN_ABORT = "terminate called without an active exception"
_CELL_PYTHONS: set[str] = set()  # the interpreters cell_python gave
# The cells the running test declares with pytest.mark.cells (conftest sets it before the test's fixtures run;
# None outside pytest). `pytest --cells` selects tests by those marks, so a test that runs in a cell it does not
# declare would run where it should not, or not run where it should: cell_python refuses it.
DECLARED_CELLS: frozenset[str] | None = None


def declared_cells(item) -> frozenset[str]:
    """The cells a test item declares: its pytest.mark.cells marks, and its ``cell`` parameter if it has one."""
    named = {name for mark in item.iter_markers("cells") for name in mark.args}
    parameter = getattr(getattr(item, "callspec", None), "params", {}).get("cell")
    return frozenset(named | ({parameter} if isinstance(parameter, str) else set()))


def cell_python(name: str) -> str:
    """The interpreter of a matrix cell: the default cell is the env the tests run in, others get their own."""
    from grpo_compat.core.versions import installed_version
    from matrix.repository import ENVS, cells_file

    cells = cells_file()
    cell = cells.cells[name]
    if DECLARED_CELLS is not None and name not in cells.quick and name not in DECLARED_CELLS:
        raise AssertionError(
            f"this test runs in the cell {name!r} without declaring it: add pytest.mark.cells({name!r}) "
            "(CI runs only the tests of the quick cells: tests/conftest.py, --cells)"
        )
    if name == cells.default and all(installed_version(d) == v for d, v in cell.pins.items() if d != "torch"):
        python = sys.executable
    else:
        python = str(ENVS.ensure(cell))
    _CELL_PYTHONS.add(python)
    return python


def cell_environment(python: str) -> dict[str, str]:
    """The environment a test runs ``python`` in, as the matrix runner runs a cell's interpreter: bytecode is
    written (cell envs are built without it: grpo_compat/matrix/envs.py) and DeepSpeed's CPU op is built once
    per env (CellEnvs.torch_extensions), the folder the matrix's runs of that cell use too."""
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    if python in _CELL_PYTHONS:
        from matrix.repository import ENVS

        environment["TORCH_EXTENSIONS_DIR"] = str(ENVS.torch_extensions(Path(python).parent.parent))
    return environment


def smoke(
    name: str, mode: str, model_dir, tmp_path, *settings: str, script: str = "smoke_grpo.py", flags: tuple = ()
) -> dict:
    """Run a matrix smoke script (or probe) in a cell; its JSON result."""
    output = tmp_path / f"{name}-{mode}-{len(list(tmp_path.iterdir()))}.json"
    arguments = ["--mode", mode, "--steps", "3", "--model-dir", str(model_dir), "--output", str(output)]
    arguments += [arg for setting in settings for arg in ("--set", setting)] + list(flags)
    completed = run_script(cell_python(name), f"matrix/{script}", *arguments)
    assert output.exists(), completed.stderr[-3000:]
    return json.loads(output.read_text())


def reproducer_results(cell_name: str, patch_id: str, folder: Path) -> dict[str, tuple[dict, dict]]:
    """Run the matrix's reproducer runs of ``patch_id`` in the cell: {mode: (matrix record, result JSON)}."""
    from grpo_compat.matrix import runner
    from matrix.repository import cells_file, repository_project
    from matrix.reproducers import REPRODUCERS
    from matrix.runs import planned_runs

    project = replace(repository_project(), models=folder)  # the runs build their tiny model in folder/<cell>
    cell = cells_file().cells[cell_name]
    python = Path(cell_python(cell_name))
    versions = runner.installed_versions_in(python, cell, project)
    runs = [run for run in planned_runs(versions, cell.device) if run.kind.startswith("repro:")]
    ids = {f"repro:{r.id}" for r in REPRODUCERS if r.patch == patch_id}
    results = {}
    for run in (run for run in runs if run.kind in ids):
        results[run.mode] = runner.execute(run, python, cell, folder, project, None)
    assert set(results) == {"plain", "patched"}, f"no reproducer of {patch_id} is planned in {cell_name}"
    return results


# A module for the engine's mechanics, written to disk by conftest's ``upstream`` fixture.
UPSTREAM_SOURCE = """
    def double(x):
        return 2 * x

    class Base:
        def run(self, x):
            return x

    class Model(Base):
        def step(self, x, scale=1):
            return x * scale

        @staticmethod
        def helper(x):
            return x

        @classmethod
        def build(cls, x):
            return len(cls.__name__) + x
"""


def add_one(wrapped, *args, **kwargs):
    return wrapped(*args, **kwargs) + 1


def make_patch(module: str, *qualnames: str, patch_id: str = "test.add-one", **options) -> Patch:
    """A patch adding 1 to what each target returns."""
    targets = tuple(Target.parse(f"{module}:{q}", add_one) for q in qualnames)
    return Patch(patch_id, options.pop("requires", ("packaging>=20",)), targets, **options)


TRACEBACK_FRAME = re.compile(r'^\s*File "([^"]+)", line \d+, in ', re.MULTILINE)


def grpo_compat_frames(stderr: str) -> list[str]:
    """The traceback frames in ``stderr`` of grpo_compat's package or its patches (a checkout's ``patches/``, a
    wheel's ``grpo_compat/patches``): a refusal shows none (grpo_compat/core/tracebacks.py)."""
    return [
        path
        for path in TRACEBACK_FRAME.findall(stderr)
        if "/grpo_compat/" in path or path.startswith(str(REPO / "patches"))
    ]
