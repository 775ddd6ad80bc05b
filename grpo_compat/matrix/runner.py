"""Run a matrix project: build each cell's env, run the runs its plan gives, judge them, write results.

    grpo-compat matrix run [--cells-file FILE] [--cells a,b | --quick] [--device cpu|cuda] [--jobs N] [--results DIR]

``--jobs N``: N runs at a time, across every cell; a kind's plain run still comes before its patched run.

The one runner of both kinds of project (grpo_compat.matrix.project): this repository's matrix and a
user's. One JSON per cell (``<results>/<cell>.json``, rewritten after every run so an interrupted matrix
still shows what it did), each run's own output under ``<results>/<cell>/``, then ``summary.md``
and ``report.html``. A cell that fails, cannot build its env, or crashes the runner is written as
such; the other cells go on.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from grpo_compat.matrix.cells import Cell, line_of
from grpo_compat.matrix.envs import EnvBuildError, Progress, uv_error, wait_with_heartbeat
from grpo_compat.matrix.project import MatrixProject
from grpo_compat.matrix.report import write_reports
from grpo_compat.testing.smoke import free_port

_print_lock = threading.Lock()
_started = time.monotonic()


def progress(message: str) -> None:
    elapsed = int(time.monotonic() - _started)
    with _print_lock:
        print(f"[{elapsed // 60:02d}:{elapsed % 60:02d}] {message}", flush=True)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def threads_per_run(jobs: int) -> int | None:
    """OpenMP threads for each of ``jobs`` runs sharing this machine's cores; None: torch's default (every core).

    Runs that each spread over every core oversubscribe it: a tiny model's matmuls then wait on descheduled
    threads. One run of trl-1.16's smoke beside others took 11.7 s of CPU with 2 threads and 7.6 s with 1, to the
    same weights. torchrun gives each rank one thread by the same reasoning. A user's OMP_NUM_THREADS is kept.
    """
    if jobs <= 1 or "OMP_NUM_THREADS" in os.environ:
        return None
    return max(1, (os.cpu_count() or 1) // jobs)


def run_environment(cell: Cell, env_dir: Path, project: MatrixProject, threads: int | None = None) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    env.update(
        HF_HUB_OFFLINE="1",
        MODELSCOPE_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        # DeepSpeed JIT-builds its CPU comm op once per env (CellEnvs.torch_extensions).
        TORCH_EXTENSIONS_DIR=str(project.envs.torch_extensions(env_dir)),
        # This repository's scripts import matrix.* (the checkout); grpo_compat comes from the cell's own install.
        PYTHONPATH=os.pathsep.join(filter(None, [*project.pythonpath, os.environ.get("PYTHONPATH")])),
    )
    if cell.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    if "MASTER_PORT" not in os.environ:
        # A single-process run that joins a process group (vLLM colocate, DeepSpeed) takes torch's default port
        # 29500; two such runs side by side (--jobs 2) then fail with EADDRINUSE. A user's MASTER_PORT is kept.
        env["MASTER_PORT"] = str(free_port())
    return env


def _record(run: Any, status: str, outcome: str, **fields: object) -> dict:
    record = {
        "name": run.name,
        "kind": run.kind,
        "mode": run.mode,
        "status": status,
        "expectation": run.expectation,
        "group": run.group,
        "outcome": outcome,
        "error": None,
        "exit_code": None,
        "loss": None,
        "kl": None,
        "weights_changed": None,
        "weights_sha256": None,
        "wall_time_s": None,
    }
    return {**record, **fields}


def _said_of(name: str, message: str) -> None:
    progress(f"{name}: {message}")


def execute(
    run: Any,
    python: Path,
    cell: Cell,
    folder: Path,
    project: MatrixProject,
    plain: dict | None,
    threads: int | None = None,
    heartbeat: Progress | None = None,
) -> tuple[dict, dict]:
    """Run one run of the project's plan: (its record for the cell's JSON, the result it wrote or {});
    ``threads``: its OpenMP threads (threads_per_run); ``heartbeat`` hears every 30 s that it still runs."""
    if run.skip:
        return _record(run, "skipped", run.skip), {}
    output = folder / f"{run.slug}.json"
    output.unlink(missing_ok=True)
    model_dir = (project.models or folder) / cell.name  # built by the cell's own transformers (its smoke scripts)
    argv = project.plan.command(run, python, model_dir, output, cell.device, folder)
    started = time.monotonic()
    process = subprocess.Popen(
        argv,
        cwd=project.workdir,
        env=run_environment(cell, python.parent.parent, project, threads),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log, timed_out = wait_with_heartbeat(process, run.timeout_s, heartbeat)
    if timed_out:
        os.killpg(process.pid, signal.SIGKILL)  # the launcher's worker processes too
        log, _ = process.communicate()
    (folder / f"{run.slug}.log").write_text(log or "")
    result = json.loads(output.read_text()) if output.exists() else None
    if timed_out:
        status, outcome = "timeout", f"no result after {run.timeout_s} s"
    else:
        status, outcome = project.plan.judge(run, result, plain)
    result = result or {}
    record = _record(
        run,
        status,
        outcome,
        error=result.get("error") or (None if status == "pass" else _tail(log or "")),
        exit_code=process.returncode,
        loss=result.get("final_loss"),
        kl=result.get("kl"),
        weights_changed=result.get("all_trainable_params_changed", result.get("weights_changed")),
        weights_sha256=result.get("weights_sha256"),
        wall_time_s=round(time.monotonic() - started, 1),
    )
    return record, result


def installed_versions_in(python: Path, cell: Cell, project: MatrixProject) -> dict[str, str | None]:
    code = "import json; from grpo_compat.core.versions import installed_versions as v; print(json.dumps(v()))"
    out = subprocess.run(
        [str(python), "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=run_environment(cell, python.parent.parent, project),
    )
    return json.loads(out.stdout)


def _line_to_change(project: MatrixProject, cell: Cell, reason: str) -> str:
    """The hint "; change line N of FILE: KEY = ..." for the pin (or grpo_compat line) uv names first."""
    said = reason.lower().replace("_", "-")
    places = [(f"cells.{cell.name}", name) for name in cell.pins] + [(None, "grpo_compat")]
    named = [(said.find(key.lower().replace("_", "-")), table, key) for table, key in places]
    for _, table, key in sorted(place for place in named if place[0] >= 0):
        found = line_of(project.cells.path, table, key)
        if found:
            return f"; change line {found[0]} of {project.cells.path}: {found[1]}"
    return ""


def _units(runs: list) -> list[list]:
    """The plan's runs in units that run one after another: a kind's plain run, then its patched run (judged
    against that plain run's result). Units are independent of each other and may run side by side."""
    units: list[list] = []
    for run in runs:
        if units and units[-1][-1].kind == run.kind:
            units[-1].append(run)
        else:
            units.append([run])
    return units


def run_cell(
    cell: Cell,
    project: MatrixProject,
    results: Path,
    wheelhouse: Path | None = None,
    quick: bool = False,
    only: str = "*",
    slots: threading.Semaphore | None = None,
    jobs: int = 1,
) -> dict:
    """Build ``cell``'s env and run its plan. ``slots``: what every cell's env builds and runs take one of
    (``jobs`` of them, shared by the matrix), so the units of one cell can use every core another cell left."""
    slots = slots or threading.Semaphore(jobs)
    record: dict = {
        "cell": cell.name,
        "order": cell.index,
        "description": cell.description,
        "device": cell.device,
        "pins": cell.pins,
        "versions": None,
        "env": {},
        "status": "error",
        "reason": None,
        "runs": [],
        "started": _now(),
    }
    path = results / f"{cell.name}.json"
    started = time.monotonic()
    saving = threading.Lock()

    def save() -> None:
        with saving:
            record["finished"], record["wall_time_s"] = _now(), round(time.monotonic() - started, 1)
            path.write_text(json.dumps(record, indent=2) + "\n")

    try:
        try:
            with slots:
                if cell.newest:
                    cell = project.envs.resolve_newest(cell, lambda message: progress(f"{cell.name}: {message}"))
                    record["pins"] = cell.pins
                cached = project.envs.is_ready(cell)
                progress(f"{cell.name}: {'reusing' if cached else 'building'} env")
                python = project.envs.ensure(
                    cell, wheelhouse=wheelhouse, progress=lambda message: progress(f"{cell.name}: {message}")
                )
        except EnvBuildError as error:
            record["env"] = {
                "status": "failed",
                "seconds": round(time.monotonic() - started, 1),
                "cached": False,
                "error": str(error),
            }
            why = f"{uv_error(error)}{_line_to_change(project, cell, uv_error(error))}"
            record["reason"] = f"env build failed: {why}"
            progress(f"{cell.name}: env build FAILED ({why})")
            return record
        record["env"] = {
            "status": "ok",
            "seconds": round(time.monotonic() - started, 1),
            "cached": cached,
            "error": None,
        }
        record["versions"] = installed_versions_in(python, cell, project)
        planned = project.plan.planned_runs(cell, record["versions"], quick)
        runs = [run for run in planned if fnmatch(run.kind, only)]
        folder = results / cell.name
        folder.mkdir(parents=True, exist_ok=True)
        outcomes: dict[int, dict] = {}  # plan position -> record; the JSON lists them in plan order
        position = {id(run): index for index, run in enumerate(runs, 1)}

        def run_unit(unit: list) -> None:
            plain: dict | None = None
            for run in unit:
                index = position[id(run)]
                with slots:
                    name = f"{cell.name} ({index}/{len(runs)}) {run.name}"
                    progress(f"{name} ...")
                    heartbeat = functools.partial(_said_of, name)
                    outcome, result = execute(
                        run, python, cell, folder, project, plain, threads_per_run(jobs), heartbeat
                    )
                if run.mode == "plain":
                    # What the patched run is compared with; a reproducer's plain run fails on purpose, mid-run.
                    plain = result if run.expect_error is None else None
                progress(
                    f"{cell.name} ({index}/{len(runs)}) {run.name}: {outcome['status']} - {outcome['outcome']}"
                    f" ({outcome['wall_time_s']} s)"
                )
                with saving:
                    outcomes[index] = outcome
                    record["runs"] = [outcomes[i] for i in sorted(outcomes)]
                save()

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as units:
            for finished in [units.submit(run_unit, unit) for unit in _units(runs)]:
                finished.result()
        failed = [r for r in record["runs"] if r["status"] not in ("pass", "skipped")]
        record["status"] = "fail" if failed or not runs else "pass"
        if not runs:  # never a silent pass: a --runs glob that selects nothing here is a mistake
            record["reason"] = f"no run kind of this cell matches --runs {only!r}"
    except Exception as error:  # noqa: BLE001 - a runner crash is this cell's result, not the matrix's end
        record["reason"] = f"runner crashed: {type(error).__name__}: {error}"
        record["runner_traceback"] = traceback.format_exc()
    finally:
        save()
    return record


def run_matrix(
    cells: list[Cell],
    project: MatrixProject,
    results: Path,
    jobs: int = 1,
    wheelhouse: Path | None = None,
    quick: bool = False,
    only: str = "*",
    junit: Path | None = None,
) -> int:
    """Run ``cells``, ``jobs`` runs at a time (``quick``: only the do-no-harm sweep's CI variants; ``only``: run
    kinds matching a glob; ``junit``: also write JUnit XML there)."""
    results.mkdir(parents=True, exist_ok=True)
    progress(f"matrix: {len(cells)} cell(s), {jobs} run(s) at a time -> {results}")
    # ``jobs`` runs at a time across all cells, not ``jobs`` cells: a cell that finishes early leaves its core
    # to the others' runs (the quick matrix's cells took 13.5 and 17 min side by side, one core idle at the end).
    slots = threading.Semaphore(max(1, jobs))
    with ThreadPoolExecutor(max_workers=max(1, len(cells))) as pool:
        records = list(
            pool.map(lambda cell: run_cell(cell, project, results, wheelhouse, quick, only, slots, jobs), cells)
        )
    summary, page = write_reports(results, junit)
    for record in records:
        progress(f"{record['cell']}: {record['status']}" + (f" ({record['reason']})" if record["reason"] else ""))
    progress(f"summary: {summary}\n        report:  {page}" + (f"\n        junit:   {junit}" if junit else ""))
    return 0 if all(record["status"] == "pass" for record in records) else 1
