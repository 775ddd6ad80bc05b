"""A user's matrix plan: their entry points, each run plainly and with grpo_compat, in every cell.

An entry is a table of the user's cells file; it names one of three things to run:

    [entries.train]
    script = "train_grpo.py"              # a Python script, started with the cell's interpreter
    args = ["--max_steps", "2"]
    processes = 2                         # optional: 2 or more start it under a launcher
    launcher = "accelerate"               # "accelerate" (accelerate launch, the default) or "torchrun"

    [entries.cli]
    trl_config = "grpo.yaml"              # `trl grpo --config grpo.yaml`

    [entries.swift]
    swift_args = ["--rlhf_type", "grpo", "--model", "models/tiny", ...]   # `swift rlhf ...`

A patched run is the same command with grpo_compat applied without a code change: `grpo-compat run`
for scripts and `trl grpo`, grpo_compat's plugin (`--external_plugins`) for `swift rlhf`. A run passes
when it exits 0; a script that writes a JSON object to $GRPO_COMPAT_MATRIX_RESULT may say more (see
:data:`RESULT_KEYS`), and then a patched run must end with the plain run's weights.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from grpo_compat.matrix.cells import Cell, CellsFile, CellsFileError, load_cells_file
from grpo_compat.matrix.envs import CellEnvs, GrpoCompatSource
from grpo_compat.matrix.project import MatrixProject, NamedRun

MODES = ("plain", "patched")
LAUNCHERS = ("accelerate", "torchrun")
KINDS = ("script", "trl_config", "swift_args")
# What a user's script may write to $GRPO_COMPAT_MATRIX_RESULT (a JSON object; every key optional).
RESULT_KEYS = {
    "weights_sha256": "a digest of the trained weights: a patched run must end with the plain run's",
    "weights_changed": "false fails the run: it trained nothing",
    "final_loss": "shown in the report",
}


@dataclass(frozen=True)
class EntryRun(NamedRun):
    """One run of an entry in one mode (the runner's run interface)."""

    kind: str  # the entry's name
    mode: str
    command: tuple[str, ...]  # the entry's command, relative to the cell env's bin/ for its first word
    entry_kind: str  # script | trl_config | swift_args
    processes: int = 1
    launcher: str = "accelerate"
    timeout_s: int = 1800
    expectation: str = "trains"
    expect_error: str | None = None
    skip: str | None = None
    group: str | None = None
    environment: tuple[tuple[str, str], ...] = field(default=())


def _entry_runs(name: str, table: dict, where: str, folder: Path) -> list[EntryRun]:
    given = [key for key in KINDS if key in table]
    if len(given) != 1:
        raise CellsFileError(f"{where}: name exactly one of {', '.join(KINDS)} (found {', '.join(given) or 'none'})")
    kind = given[0]
    unknown = set(table) - {*KINDS, "args", "processes", "launcher", "timeout_s", "env"}
    if unknown:
        raise CellsFileError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
    args = table.get("args", [])
    if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        raise CellsFileError(f"{where}: args must be a list of strings")
    processes, launcher, timeout = (
        table.get("processes", 1),
        table.get("launcher", "accelerate"),
        table.get("timeout_s", 1800),
    )
    if not isinstance(processes, int) or isinstance(processes, bool) or processes < 1:
        raise CellsFileError(f"{where}: processes = {processes!r}: expected a whole number, 1 or more")
    if launcher not in LAUNCHERS:
        raise CellsFileError(f"{where}: launcher = {launcher!r}: expected one of {', '.join(LAUNCHERS)}")
    if not isinstance(timeout, int) or timeout < 1:
        raise CellsFileError(f"{where}: timeout_s = {timeout!r}: expected seconds, 1 or more")
    environment = table.get("env", {})
    if not isinstance(environment, dict) or not all(isinstance(v, str) for v in environment.values()):
        raise CellsFileError(f"{where}: env must be a table of strings")
    value = table[kind]
    if kind == "swift_args":
        if not isinstance(value, list) or not all(isinstance(arg, str) for arg in value):
            raise CellsFileError(f"{where}: swift_args must be a list of strings (the arguments of `swift rlhf`)")
        command = ("swift", "rlhf", *value, *args)
    else:
        if not isinstance(value, str) or not value:
            raise CellsFileError(f"{where}: {kind} must be a file path")
        path = folder / value
        if not path.is_file():
            raise CellsFileError(f"{where}: {kind} = {value!r}: no such file {path}")
        if kind == "trl_config" and processes > 1:
            raise CellsFileError(f"{where}: processes: `trl grpo` launches itself; give accelerate's options in args")
        command = ("python", str(path), *args) if kind == "script" else ("trl", "grpo", "--config", str(path), *args)
    return [
        EntryRun(
            kind=name,
            mode=mode,
            command=command,
            entry_kind=kind,
            processes=processes,
            launcher=launcher,
            timeout_s=timeout,
            expectation="trains" if mode == "plain" else "trains; the plain run's weights where it reports them",
            environment=tuple(sorted(environment.items())),
        )
        for mode in MODES
    ]


@dataclass(frozen=True)
class EntriesPlan:
    runs: tuple[EntryRun, ...]

    @classmethod
    def from_cells_file(cls, cells: CellsFile) -> EntriesPlan:
        if not cells.entries:
            raise CellsFileError(f"{cells.path} has no entries: add an [entries.<name>] table (what each cell runs)")
        runs = []
        for name, table in cells.entries.items():
            runs += _entry_runs(name, table, f"{cells.path} [entries.{name}]", cells.path.parent)
        return cls(tuple(runs))

    def planned_runs(self, cell: Cell, versions: dict[str, str | None], quick: bool = False) -> list[EntryRun]:
        """Every entry, plain and patched; a cell that asks for processes runs its scripts and swift that way."""
        if cell.processes is None:
            return list(self.runs)
        return [run if run.entry_kind == "trl_config" else replace(run, processes=cell.processes) for run in self.runs]

    def command(self, run: EntryRun, python: Path, model_dir: Path, output: Path, device: str, scratch: Path):
        """The entry, started by grpo_compat.matrix.entry_run in the cell env (it writes the result JSON)."""
        wrapper = [str(python), "-m", "grpo_compat.matrix.entry_run", "--mode", run.mode, "--output", str(output)]
        wrapper += ["--scratch", str(scratch / run.slug), "--processes", str(run.processes)]
        wrapper += ["--launcher", run.launcher, "--kind", run.entry_kind]
        wrapper += [arg for key, value in run.environment for arg in ("--env", f"{key}={value}")]
        return [*wrapper, "--", *run.command]

    def judge(self, run: EntryRun, result: dict | None, plain: dict | None) -> tuple[str, str]:
        if result is None:
            return "fail", "the entry runner wrote no result"
        if result.get("status") != "ok":
            return "fail", (result.get("error") or f"exit {result.get('exit_code')}").splitlines()[0][:200]
        if result.get("weights_changed") is False:
            return "fail", "exited 0, but the script reports that the weights did not change"
        plain_sha = (plain or {}).get("weights_sha256")
        sha = result.get("weights_sha256")
        if run.mode == "patched" and plain_sha and sha and sha != plain_sha:
            return "fail", "trained, but the weights differ from the plain run's"
        if run.mode == "patched" and plain_sha and sha:
            return "pass", "trained; weights identical to the plain run's"
        return "pass", "trained" if sha or result.get("weights_changed") else "exited 0"


def default_envs_folder() -> Path:
    """Cell envs of users' matrices: the user's cache (CI systems cache it between jobs)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "grpo-compat" / "matrix" / "envs"


def user_project(cells_file: Path, envs: Path | None = None) -> MatrixProject:
    """The matrix of a user's cells file: its entries, each plain and patched, in every cell."""
    from grpo_compat.matrix.running import RunningSourceError, running_source

    cells_file = cells_file.resolve()
    cells = load_cells_file(cells_file, require_torch=False)
    plan = EntriesPlan.from_cells_file(cells)
    envs = (envs or default_envs_folder()).resolve()
    if cells.grpo_compat is None:  # the grpo_compat running this command: no index needs to hold grpo-compat
        try:
            source = GrpoCompatSource(running_source(envs.parent))
        except RunningSourceError as error:
            raise CellsFileError(f"{cells_file}: {error}") from None
    else:
        local = cells_file.parent / cells.grpo_compat  # a wheel or folder named relative to the cells file
        source = GrpoCompatSource(str(local.resolve()) if local.exists() else cells.grpo_compat)
    return MatrixProject(
        cells=cells,
        plan=plan,
        envs=CellEnvs(envs, source),
        results=Path("grpo-matrix-results").resolve(),
        workdir=cells_file.parent,
    )
