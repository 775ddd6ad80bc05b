"""Build (and reuse) one virtual environment per matrix cell with uv.

An env lives in ``<envs>/<cell>-<hash>``; the hash covers the cell's pins, the install recipe and
where grpo_compat comes from, so changing a pin builds a new env and an unchanged cell reuses its env.
grpo_compat itself is installed from its :class:`GrpoCompatSource`: this repository's checkout
(editable, so code changes never need a rebuild), or a user's requirement, wheel or folder
(reinstalled when it changes). A cell pinning "newest" is first resolved to exact versions
(:func:`resolve_newest`), so its env is rebuilt when an upstream release comes out.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from grpo_compat.matrix.cells import Cell, normalised_name

SOURCE_STAMP = ".grpo-compat-project"  # what the env's grpo_compat was installed from (GrpoCompatSource.stamp)
# uv's --compile-bytecode compiles every file of every package: 10,892 files, 50 of an env's 81 s on 2 cores.
# Importing what the runs import compiles the third of them that runs read (about 15 s); a module these imports
# miss is compiled by the first run that imports it (runs write bytecode: see the runner's run_environment).
WARM_UP_MODULES = (
    "torch", "transformers", "datasets", "accelerate", "peft", "deepspeed", "liger_kernel",
    "trl", "trl.trainer.grpo_trainer", "swift.llm", "swift.trainers", "swift.rewards", "swift.plugin", "grpo_compat",
)  # fmt: skip
_WARM_UP = (
    "import importlib\n"
    f"for name in {WARM_UP_MODULES!r}:\n"
    "    try:\n"
    "        importlib.import_module(name)\n"
    "    except BaseException:\n"  # a module this cell lacks, or a skew this cell is about: not the build's business
    "        pass\n"
)


class EnvBuildError(RuntimeError):
    pass


@dataclass(frozen=True)
class GrpoCompatSource:
    """Where a cell env gets grpo_compat: a requirement ("grpo-compat==0.1.0"), a wheel, or a project folder."""

    spec: str
    editable: bool = False  # this repository's checkout: installed editable

    @property
    def path(self) -> Path | None:
        candidate = Path(self.spec)
        return candidate if candidate.exists() else None

    def key(self) -> str:
        """Part of the env's fingerprint: a checkout adds nothing (its envs keep their names)."""
        return "" if self.editable else self.spec

    def stamp(self) -> str:
        """Changes when what is installed from must be installed again: an editable checkout's pyproject (its
        code is live), a wheel's bytes, a folder's sources (copied at install)."""
        path = self.path
        if path is None:
            return self.spec
        if path.is_file() or self.editable:
            return hashlib.sha256((path / "pyproject.toml" if self.editable else path).read_bytes()).hexdigest()[:12]
        digest = hashlib.sha256()
        for folder, subfolders, files in os.walk(path):
            subfolders[:] = sorted(d for d in subfolders if not d.startswith(".") and d not in ("build", "__pycache__"))
            for name in sorted(f for f in files if f.endswith((".py", ".toml"))):
                info = os.stat(os.path.join(folder, name))
                digest.update(f"{os.path.join(folder, name)} {info.st_mtime_ns} {info.st_size}\n".encode())
        return digest.hexdigest()[:12]

    def fresh_build(self) -> list[str]:
        """uv reuses its build of a folder while the folder's pyproject.toml is unchanged: never for ours."""
        return [] if self.editable else ["--reinstall-package", "grpo-compat"]

    def install_arguments(self, extras: str = "") -> list[str]:
        target = f"{self.spec}[{extras}]" if extras else self.spec
        return ["--editable", target] if self.editable else [target]


def pip_command() -> list[str]:
    """A pip that runs here: uv-built envs (this one, maybe) have none of their own."""
    for pip in ([sys.executable, "-m", "pip"], ["python3", "-m", "pip"], ["pip"]):
        try:
            if subprocess.run([*pip, "--version"], capture_output=True, timeout=60).returncode == 0:
                return pip
        except (OSError, subprocess.SubprocessError):
            continue
    raise EnvBuildError("no pip found: install python3-pip")


def pip_find_links() -> list[str]:
    """The find-links of pip's configuration (uv does not read it; the CPU torch wheel is there)."""
    links = os.environ.get("PIP_FIND_LINKS", "").split()
    try:
        listing = subprocess.run([*pip_command(), "config", "list"], capture_output=True, text=True, timeout=60)
        for match in re.finditer(r"find-links='([^']*)'", listing.stdout):
            links += match.group(1).split()
    except (EnvBuildError, OSError, subprocess.SubprocessError):
        pass
    return list(dict.fromkeys(links))


def uv_command() -> list[str]:
    """The uv of this Python's env (the [matrix] extra installs it there, found without activating the env), else
    the one on PATH."""
    beside = Path(sys.executable).parent / "uv"  # not resolved: a venv's python is a link to the base one
    found = str(beside) if os.access(beside, os.X_OK) else shutil.which("uv")
    if found:
        return [found]
    raise EnvBuildError("uv is not installed: pip install uv (or grpo-compat's [matrix] extra) into this env")


Progress = Callable[[str], None]
HEARTBEAT_S = 30  # how often a long install step says it is still running


def wait_with_heartbeat(
    child: subprocess.Popen, timeout: float | None, heartbeat: Progress | None
) -> tuple[str | None, bool]:
    """``child.communicate()``, telling ``heartbeat`` every HEARTBEAT_S that it still runs and for how long (every
    step of the matrix that can pass 30 s goes through here); returns (its piped output, whether ``timeout`` passed).
    A timed-out child is left running: the caller ends it as it must (its process group, say)."""
    started = time.monotonic()
    while True:
        left = None if timeout is None else timeout - (time.monotonic() - started)
        if left is not None and left <= 0:
            return None, True
        try:
            return child.communicate(timeout=HEARTBEAT_S if left is None else min(HEARTBEAT_S, left))[0], False
        except subprocess.TimeoutExpired:  # communicate() again loses no output (subprocess's documentation)
            if heartbeat and (left is None or left > HEARTBEAT_S):
                heartbeat(f"still running after {time.monotonic() - started:.0f} s")


def _run(
    command: list[str],
    log: Path,
    step: str = "",
    progress: Progress | None = None,
    environment: dict[str, str] | None = None,
    timeout: float | None = None,
) -> int:
    """Run one build step, its output into ``log``; ``progress`` hears the step, a heartbeat every HEARTBEAT_S and
    its time. A failure raises EnvBuildError with the log's tail; past ``timeout`` the step is ended (exit -1)."""
    started = time.monotonic()
    if progress and step:
        progress(f"{step} ...")
    with log.open("a") as out:
        out.write("$ " + " ".join(command) + "\n")
        out.flush()
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, text=True, env=environment)
        heartbeat = (lambda message: progress(f"{step}: {message} (log: {log})")) if progress and step else None
        if wait_with_heartbeat(child, timeout, heartbeat)[1]:
            child.kill()
            child.wait()
            out.write(f"timed out after {timeout:.0f} s\n")
            return -1
        returncode = child.returncode
    if progress and step and returncode == 0:
        progress(f"{step}: done in {time.monotonic() - started:.0f} s")
    if returncode != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-25:])
        raise EnvBuildError(f"{' '.join(command[:4])} ... failed (exit {returncode}):\n{tail}")
    return returncode


WARM_UP_TIMEOUT_S = 900


def _warm_up(python: Path, env: Path, log: Path, progress: Progress | None = None) -> None:
    """Write the bytecode of the modules runs import (never fails the build: see WARM_UP_MODULES); minutes on 2
    cores, so it shows the heartbeat of every long step."""
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    environment.update(HF_HUB_OFFLINE="1", CUDA_VISIBLE_DEVICES="")
    with log.open("a") as out:
        out.write("# warm-up import of " + ", ".join(WARM_UP_MODULES) + "\n")
    step = "writing the bytecode runs read (one import of what they import)"
    try:
        if _run([str(python), "-c", _WARM_UP], log, step, progress, environment, WARM_UP_TIMEOUT_S) != 0:
            with log.open("a") as out:
                out.write("warm-up import timed out: the runs compile what it missed\n")
    except EnvBuildError:  # a crash of an import the cell is about: the runs will show it, not the build
        if progress:
            progress(f"{step}: the import failed (log: {log}); the runs compile what it missed")


def shown_requirements(requirements: list[str]) -> str:
    """The install step's line: a bare name is left out where a pin of the same package already says more
    ("datasets==5.2.0, tokenizers", not "datasets==5.2.0, datasets, tokenizers": the cells' ALWAYS list)."""
    constraint = re.compile(r"[<>=!~@ ;\[]")
    said = {normalised_name(constraint.split(r, 1)[0]) for r in requirements if constraint.search(r)}
    return ", ".join(r for r in requirements if constraint.search(r) or normalised_name(r) not in said)


def _listing(scratch: Path, cell: Cell, setting: str) -> str:
    """The path of a requirements file holding the cell's ``overrides`` or ``excludes``, for uv."""
    path = scratch / f"{cell.name}-{cell.fingerprint()}.{setting}.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(getattr(cell, setting)) + "\n")
    return str(path)


def _sources(cell: Cell, scratch: Path) -> list[str]:
    """Where uv finds packages: PyPI plus pip's find-links and the cell's torch index, the cell's release-era date,
    overrides and excludes."""
    links = [arg for link in pip_find_links() for arg in ("--find-links", link)]
    # The date holds back indirect dependencies; torch is pinned and newer than most dates.
    dated = ["--exclude-newer", cell.exclude_newer]
    dated += [arg for name in ("torch", *cell.undated) for arg in ("--exclude-newer-package", f"{name}=false")]
    overrides = ["--override", _listing(scratch, cell, "overrides")] if cell.overrides else []
    excludes = ["--excludes", _listing(scratch, cell, "excludes")] if cell.excludes else []
    prereleases = ["--prerelease", "allow"] if cell.prereleases else []
    # Best match across PyPI and the torch index: "2.13.0+cpu" wins over PyPI's 2.13.0 (the CI workflow's setting).
    torch_index = ["--extra-index-url", cell.torch_index, "--index-strategy", "unsafe-best-match"]
    torch_index = torch_index if cell.torch_index else []
    return links + (dated if cell.exclude_newer else []) + overrides + excludes + prereleases + torch_index


def uv_error(error: EnvBuildError) -> str:
    """The line of uv's output that says why (not the command line it ran)."""
    lines = [
        line.strip().lstrip("\u00d7\u2570\u2500\u25b6 ").removeprefix("cause: ") for line in str(error).splitlines()
    ]
    for prefix in ("Because", "error:", "No solution"):
        found = [line for line in lines if line.startswith(prefix)]
        if found:
            return found[0]
    return lines[0] if lines else ""


def _see_running_venv(env: Path) -> None:
    """Let ``env`` import what the running interpreter's venv holds (the preinstalled torch), after its own packages.

    ``--system-site-packages`` reaches only the base interpreter's site-packages, and GPU images often hold torch
    in a venv of their own (seen on the lent H100s: /opt/torch/.venv), where the cell's env would have no torch.
    """
    if sys.prefix == sys.base_prefix:
        return
    paths = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))
    found = subprocess.run(
        [str(env / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    Path(found.stdout.strip(), "_grpo_compat_preinstalled.pth").write_text("\n".join(paths) + "\n")


# A wheelhouse always carries them: the offline builds need their wheels. name -> version specifier.
BUILD_TOOLS = {"setuptools": ">=68", "uv": ""}


def _pin(line: str) -> tuple[str, str] | None:
    """(normalised name, version) of a ``name==version`` line of uv's output or pip freeze (None for others)."""
    name, _, version = line.split("#")[0].strip().partition("==")
    return (normalised_name(name), version.split(";")[0].strip()) if version else None


def _own_dependencies() -> list[str]:
    """grpo_compat's own requirements (no extras): a wheelhouse carries them where the target lacks them."""
    try:
        requires = importlib.metadata.requires("grpo-compat") or []
    except importlib.metadata.PackageNotFoundError:
        return []
    return [requirement for requirement in requires if "extra ==" not in requirement]


@dataclass(frozen=True)
class TargetMachine:
    """The offline machine a wheelhouse is for: its Python (X.Y, x86_64 manylinux) and what its image holds."""

    python: str | None = None  # None: this machine's
    installed: dict[str, str] = field(default_factory=dict)  # normalised name -> version, from its `pip freeze`

    @classmethod
    def from_freeze(cls, freeze: str, python: str | None = None) -> TargetMachine:
        return cls(python, dict(pin for pin in map(_pin, freeze.splitlines()) if pin))

    def resolution(self, cell: Cell, out: Path) -> list[str]:
        """uv's arguments: resolve for the target's Python, preferring its image's versions where the cell allows.

        The image's versions seed the output file, which uv prefers and leaves where the cell needs another
        (transformers 4.51 needs tokenizers < 0.22 whatever the image has); a constraint would fail there.
        """
        arguments = []
        if self.python:
            arguments += ["--python-version", self.python, "--python-platform", "x86_64-manylinux_2_28"]
        # A version the cell asks for wins; a name alone ("datasets") takes the image's
        pinned = [re.split(r"[=<>!~]", pin, maxsplit=1) for pin in cell.requirements()]
        own = {normalised_name(parts[0].split("[")[0]) for parts in pinned if len(parts) > 1}
        held = {name: version for name, version in sorted(self.installed.items()) if name not in own}
        (out / "requirements.txt").write_text("".join(f"{name}=={version}\n" for name, version in held.items()))
        if cell.exclude_newer:  # the image holds them whatever the cell's date; the build tools run there today
            undated = [*held, *BUILD_TOOLS]
            arguments += [arg for name in undated for arg in ("--exclude-newer-package", f"{name}=false")]
        return arguments

    def leave_out_installed(self, requirements: Path) -> None:
        """Drop from the closure what the image already holds at that version (the build tools stay)."""
        kept = []
        for line in requirements.read_text().splitlines():
            pin = _pin(line)
            if pin is None or pin[0] in BUILD_TOOLS or self.installed.get(pin[0]) != pin[1]:
                kept.append(line)
        requirements.write_text("\n".join(kept) + "\n")

    def fetch(self) -> list[str]:
        """pip's command for the wheels: built here for this machine, downloaded as binaries for another Python."""
        if not self.python:  # `wheel`, not `download`: packages published only as sdists (deepspeed) are built here
            return ["wheel", "--wheel-dir"]
        platforms = [arg for tag in MANYLINUX_X86_64 for arg in ("--platform", tag)]
        return ["download", "--only-binary=:all:", "--python-version", self.python, *platforms, "--dest"]


MANYLINUX_X86_64 = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64")


@dataclass(frozen=True)
class CellEnvs:
    """The cell envs of one matrix: the folder they live in and where they get grpo_compat."""

    folder: Path
    source: GrpoCompatSource

    def path(self, cell: Cell) -> Path:
        return self.folder / f"{cell.name}-{cell.fingerprint(self.source.key())}"

    def _scratch(self) -> Path:
        return self.folder.parent  # logs, locks and override files beside the envs

    @staticmethod
    def torch_extensions(env: Path) -> Path:
        """Where DeepSpeed JIT-builds its CPU ops for the runs of ``env`` (TORCH_EXTENSIONS_DIR): inside the env.

        The build (a minute or more of compiling) names the env's own DeepSpeed sources by absolute path, so two
        envs sharing one folder rebuild it each time the other ran (measured: 68, 74, 81 s alternating between
        the trl-1.16 cell and .venv, same torch and DeepSpeed; 2 s reloading in the env that built it).
        """
        return env / "torch_extensions"

    def is_ready(self, cell: Cell, path: Path | None = None, extras: str = "") -> bool:
        env = path or self.path(cell)
        marker = env / ".grpo-compat-env"
        expected = f"{cell.fingerprint(self.source.key())} {extras}"
        return marker.exists() and marker.read_text() == expected and (env / "bin/python").exists()

    def resolve_newest(self, cell: Cell, progress: Progress | None = None) -> Cell:
        """The cell with each "newest" pin replaced by the newest release uv resolves today."""
        if not cell.newest:
            return cell
        self.folder.mkdir(parents=True, exist_ok=True)
        wanted = self._scratch() / f"{cell.name}.newest.in"
        resolved = self._scratch() / f"{cell.name}.newest.txt"
        wanted.write_text("\n".join(cell.requirements()) + "\n")
        log = self._scratch() / f"{cell.name}.newest.log"
        log.write_text("")
        compile_ = [*uv_command(), "pip", "compile", "--quiet", "--python", sys.executable, "--no-header"]
        step = f"resolving the newest {', '.join(cell.newest)}"
        _run([*compile_, *_sources(cell, self._scratch()), str(wanted), "-o", str(resolved)], log, step, progress)
        versions = dict(pin for pin in map(_pin, resolved.read_text().splitlines()) if pin)
        found = {name: versions.get(normalised_name(name)) for name in cell.newest}
        missing = [name for name, version in found.items() if version is None]
        if missing:
            raise EnvBuildError(f"uv resolved no version of {', '.join(missing)}")
        return cell.with_versions(found)

    def ensure(
        self,
        cell: Cell,
        path: Path | None = None,
        extras: str = "",
        wheelhouse: Path | None = None,
        progress: Progress | None = None,
    ) -> Path:
        """The python of the cell's env, building it when missing or half-built.

        With ``wheelhouse`` nothing is downloaded: every package comes from that folder, filled
        beforehand by :meth:`fill_wheelhouse` (GPU machines have no network).
        """
        if cell.newest:
            raise EnvBuildError(f"cell {cell.name}: resolve its newest pins first (CellEnvs.resolve_newest)")
        env = path or self.path(cell)
        python = env / "bin" / "python"
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self._scratch() / f"{env.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self.is_ready(cell, env, extras):
                self._refresh_grpo_compat(env, extras, wheelhouse, progress)
                return python
            shutil.rmtree(env, ignore_errors=True)
            log = self._scratch() / f"{env.name}.log"
            log.write_text("")
            uv = uv_command()
            system = ["--system-site-packages"] if cell.uses_preinstalled_torch else []
            _run(
                [*uv, "venv", "--quiet", *system, "--python", sys.executable, str(env)],
                log,
                "creating the env",
                progress,
            )
            if cell.uses_preinstalled_torch:
                _see_running_venv(env)
            install = [*uv, "pip", "install", "--python", str(python)]
            if wheelhouse is None:
                sources = _sources(cell, self._scratch())
                pins = cell.requirements()
                _run([*install, *sources, *pins], log, f"installing {shown_requirements(pins)}", progress)
            else:
                # The wheelhouse's requirements.txt is the whole resolved closure (less a preinstalled torch).
                sources = ["--offline", "--no-index", "--find-links", str(wheelhouse)]
                step = f"installing from the wheelhouse {wheelhouse}"
                _run([*install, *sources, "--no-deps", "-r", str(wheelhouse / "requirements.txt")], log, step, progress)
            # From a wheelhouse its dependencies are in the closure, or in the image, where uv does not look
            offline = ["--no-deps"] if wheelhouse else []
            own = [*install, *sources, *offline, *self.source.fresh_build(), *self.source.install_arguments(extras)]
            _run(own, log, f"installing grpo_compat from {self.source.spec}", progress)
            _warm_up(python, env, log, progress)
            (env / SOURCE_STAMP).write_text(self.source.stamp())
            (env / ".grpo-compat-env").write_text(f"{cell.fingerprint(self.source.key())} {extras}")
        return python

    def file_only(self, cell: Cell, unresolved: tuple[str, ...] = (), progress: Progress | None = None) -> Path:
        """A folder holding the files of the cell's exact resolved set, nothing run or compiled (for checks that read
        files only, such as grpo_compat.static_check): resolved as its env is, then ``uv pip install --target
        --no-deps``, seconds from uv's cache where a whole env takes minutes. ``unresolved``: requirements added
        without their dependencies (a package whose own pins cannot install beside the cell's torch, vLLM's)."""
        if cell.newest:
            raise EnvBuildError(f"cell {cell.name}: resolve its newest pins first (CellEnvs.resolve_newest)")
        key = cell.fingerprint(" ".join(unresolved))
        folder = self.folder.parent / "files" / f"{cell.name}-{key}"
        folder.parent.mkdir(parents=True, exist_ok=True)
        with open(self._scratch() / f"{folder.name}.files.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if (folder / ".grpo-compat-files").exists():
                return folder
            shutil.rmtree(folder, ignore_errors=True)
            log = self._scratch() / f"{folder.name}.files.log"
            log.write_text("")
            sources = _sources(cell, self._scratch())
            wanted, resolved = (folder.parent / f"{folder.name}.{suffix}" for suffix in ("in", "txt"))
            wanted.write_text("\n".join(cell.requirements()) + "\n")
            compile_ = [*uv_command(), "pip", "compile", "--quiet", "--python", sys.executable, "--no-header"]
            _run([*compile_, *sources, str(wanted), "-o", str(resolved)], log, f"resolving {cell.name}", progress)
            install = [*uv_command(), "pip", "install", "--quiet", "--python", sys.executable, "--no-deps"]
            step = f"installing the files of {cell.name}"
            _run([*install, *sources, "--target", str(folder), "-r", str(resolved)], log, step, progress)
            if unresolved:
                _run([*install, "--target", str(folder), *unresolved], log, f"adding {', '.join(unresolved)}", progress)
            (folder / ".grpo-compat-files").write_text(resolved.read_text())
        return folder

    def _refresh_grpo_compat(
        self, env: Path, extras: str, wheelhouse: Path | None, progress: Progress | None = None
    ) -> None:
        """Reinstall grpo_compat when its source changed (pyproject.toml, the wheel), not the cell's pins."""
        stamp = self.source.stamp()
        if (env / SOURCE_STAMP).exists() and (env / SOURCE_STAMP).read_text() == stamp:
            return
        offline = ["--offline", "--no-index", "--find-links", str(wheelhouse)] if wheelhouse else []
        # The cell's pins stay as they are; extras (dev) may have gained a package, which uv adds without
        # touching what is installed and satisfies them.
        deps = [] if extras and not wheelhouse else ["--no-deps"]
        install = [*uv_command(), "pip", "install", "--python", str(env / "bin" / "python"), *offline, *deps]
        arguments = [*install, *self.source.fresh_build(), *self.source.install_arguments(extras)]
        step = f"reinstalling grpo_compat from {self.source.spec} (it changed)"
        _run(arguments, self._scratch() / f"{env.name}.log", step, progress)
        (env / SOURCE_STAMP).write_text(stamp)

    def fill_wheelhouse(
        self,
        cell: Cell,
        out: Path,
        preinstalled_torch: str | None = None,
        target: TargetMachine | None = None,
        progress: Progress | None = None,
    ) -> Path:
        """Download every wheel the cell's env needs into ``out``, for an offline machine.

        ``preinstalled_torch`` is the version of the torch the target machine already has (for
        "preinstalled" cells): the closure is resolved against it and leaves it out. ``target`` says more of that
        machine: its Python (the wheels are fetched for it) and what its image holds, which the closure keeps where
        the cell's pins allow and leaves out (the env sees it, as it sees the torch).
        """
        target = target or TargetMachine()
        out.mkdir(parents=True, exist_ok=True)
        log = out / "wheelhouse.log"
        log.write_text("")
        requirements = out / "requirements.in"
        # setuptools builds the editable project offline; uv itself is needed there to build the env.
        pins = [*cell.requirements(), *(name + spec for name, spec in BUILD_TOOLS.items()), *_own_dependencies()]
        preinstalled_torch = preinstalled_torch or target.installed.get("torch")
        if cell.uses_preinstalled_torch:
            if not preinstalled_torch:
                raise EnvBuildError(f"cell {cell.name} uses the target's torch: give its version (--torch-version)")
            pins.append(f"torch=={preinstalled_torch}")
        requirements.write_text("\n".join(pins) + "\n")
        skip_torch = ["--no-emit-package", "torch"] if cell.uses_preinstalled_torch else []
        _run(
            [
                *uv_command(),
                "pip",
                "compile",
                "--quiet",
                *_sources(cell, self._scratch()),
                *target.resolution(cell, out),
                *skip_torch,
                str(requirements),
                "-o",
                str(out / "requirements.txt"),
            ],
            log,
            f"resolving the wheels of cell {cell.name}",
            progress,
        )
        target.leave_out_installed(out / "requirements.txt")
        fetch = [*pip_command(), *target.fetch(), str(out), "--quiet", "--no-deps"]
        _run([*fetch, "-r", str(out / "requirements.txt")], log, f"downloading them into {out}", progress)
        return out
