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
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from grpo_compat.matrix.cells import Cell

SOURCE_STAMP = ".grpo-compat-project"  # what the env's grpo_compat was installed from (GrpoCompatSource.stamp)


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
    found = shutil.which("uv")
    if found:
        return [found]
    raise EnvBuildError("uv is not installed: run `python3 -m pip install uv`")


def _run(command: list[str], log: Path) -> None:
    with log.open("a") as out:
        out.write("$ " + " ".join(command) + "\n")
        out.flush()
        result = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-25:])
        raise EnvBuildError(f"{' '.join(command[:4])} ... failed (exit {result.returncode}):\n{tail}")


def _listing(scratch: Path, cell: Cell, setting: str) -> str:
    """The path of a requirements file holding the cell's ``overrides`` or ``excludes``, for uv."""
    path = scratch / f"{cell.name}-{cell.fingerprint()}.{setting}.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(getattr(cell, setting)) + "\n")
    return str(path)


def _sources(cell: Cell, scratch: Path) -> list[str]:
    """Where uv finds packages: PyPI plus pip's find-links, the cell's release-era date, overrides and excludes."""
    links = [arg for link in pip_find_links() for arg in ("--find-links", link)]
    # The date holds back indirect dependencies; torch is pinned and newer than most dates.
    dated = ["--exclude-newer", cell.exclude_newer]
    dated += [arg for name in ("torch", *cell.undated) for arg in ("--exclude-newer-package", f"{name}=false")]
    overrides = ["--override", _listing(scratch, cell, "overrides")] if cell.overrides else []
    excludes = ["--excludes", _listing(scratch, cell, "excludes")] if cell.excludes else []
    prereleases = ["--prerelease", "allow"] if cell.prereleases else []
    return links + (dated if cell.exclude_newer else []) + overrides + excludes + prereleases


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


@dataclass(frozen=True)
class CellEnvs:
    """The cell envs of one matrix: the folder they live in and where they get grpo_compat."""

    folder: Path
    source: GrpoCompatSource

    def path(self, cell: Cell) -> Path:
        return self.folder / f"{cell.name}-{cell.fingerprint(self.source.key())}"

    def _scratch(self) -> Path:
        return self.folder.parent  # logs, locks and override files beside the envs

    def is_ready(self, cell: Cell, path: Path | None = None, extras: str = "") -> bool:
        env = path or self.path(cell)
        marker = env / ".grpo-compat-env"
        expected = f"{cell.fingerprint(self.source.key())} {extras}"
        return marker.exists() and marker.read_text() == expected and (env / "bin/python").exists()

    def resolve_newest(self, cell: Cell) -> Cell:
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
        _run([*compile_, *_sources(cell, self._scratch()), str(wanted), "-o", str(resolved)], log)
        versions = {}
        for line in resolved.read_text().splitlines():
            name, _, version = line.split("#")[0].strip().partition("==")
            if version:
                versions[re.sub(r"[-_.]+", "-", name).lower()] = version.split(";")[0].strip()
        found = {name: versions.get(re.sub(r"[-_.]+", "-", name).lower()) for name in cell.newest}
        missing = [name for name, version in found.items() if version is None]
        if missing:
            raise EnvBuildError(f"uv resolved no version of {', '.join(missing)}")
        return cell.with_versions(found)

    def ensure(self, cell: Cell, path: Path | None = None, extras: str = "", wheelhouse: Path | None = None) -> Path:
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
                self._refresh_grpo_compat(env, extras, wheelhouse)
                return python
            shutil.rmtree(env, ignore_errors=True)
            log = self._scratch() / f"{env.name}.log"
            log.write_text("")
            uv = uv_command()
            system = ["--system-site-packages"] if cell.uses_preinstalled_torch else []
            _run([*uv, "venv", "--quiet", *system, "--python", sys.executable, str(env)], log)
            install = [*uv, "pip", "install", "--compile-bytecode", "--python", str(python)]
            if wheelhouse is None:
                sources = _sources(cell, self._scratch())
                _run([*install, *sources, *cell.requirements()], log)
            else:
                # The wheelhouse's requirements.txt is the whole resolved closure (less a preinstalled torch).
                sources = ["--offline", "--no-index", "--find-links", str(wheelhouse)]
                _run([*install, *sources, "--no-deps", "-r", str(wheelhouse / "requirements.txt")], log)
            _run([*install, *sources, *self.source.fresh_build(), *self.source.install_arguments(extras)], log)
            (env / SOURCE_STAMP).write_text(self.source.stamp())
            (env / ".grpo-compat-env").write_text(f"{cell.fingerprint(self.source.key())} {extras}")
        return python

    def _refresh_grpo_compat(self, env: Path, extras: str, wheelhouse: Path | None) -> None:
        """Reinstall grpo_compat when its source changed (pyproject.toml, the wheel), not the cell's pins."""
        stamp = self.source.stamp()
        if (env / SOURCE_STAMP).exists() and (env / SOURCE_STAMP).read_text() == stamp:
            return
        offline = ["--offline", "--no-index", "--find-links", str(wheelhouse)] if wheelhouse else []
        install = [*uv_command(), "pip", "install", "--python", str(env / "bin" / "python"), *offline, "--no-deps"]
        arguments = [*install, *self.source.fresh_build(), *self.source.install_arguments(extras)]
        _run(arguments, self._scratch() / f"{env.name}.log")
        (env / SOURCE_STAMP).write_text(stamp)

    def fill_wheelhouse(self, cell: Cell, out: Path, preinstalled_torch: str | None = None) -> Path:
        """Download every wheel the cell's env needs into ``out``, for an offline machine.

        ``preinstalled_torch`` is the version of the torch the target machine already has (for
        "preinstalled" cells): the closure is resolved against it and leaves it out.
        """
        out.mkdir(parents=True, exist_ok=True)
        log = out / "wheelhouse.log"
        log.write_text("")
        requirements = out / "requirements.in"
        # setuptools builds the editable project offline; uv itself is needed there to build the env.
        pins = [*cell.requirements(), "setuptools>=68", "uv"]
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
                *skip_torch,
                str(requirements),
                "-o",
                str(out / "requirements.txt"),
            ],
            log,
        )
        _run(
            [
                *pip_command(),
                "wheel",  # not `download`: packages published only as sdists (deepspeed) are built here
                "--quiet",
                "--no-deps",
                "--wheel-dir",
                str(out),
                "-r",
                str(out / "requirements.txt"),
            ],
            log,
        )
        return out
