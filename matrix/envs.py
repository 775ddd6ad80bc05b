"""Build (and reuse) one virtual environment per matrix cell with uv.

An env lives in ``.matrix/envs/<cell>-<hash>``; the hash covers the cell's pins and this file's
install recipe, so changing a pin builds a new env and an unchanged cell reuses its env. The
project itself is installed editable, so code changes never need a rebuild.

    python matrix/envs.py ensure trl-0.16          # prints the env's python
    python matrix/envs.py ensure trl-1.16 --path .venv --extras dev
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
CELLS_FILE = REPO / "matrix" / "cells.toml"
ENVS_DIR = REPO / ".matrix" / "envs"
PINNED = ("torch", "trl", "transformers", "accelerate", "deepspeed", "peft", "ms-swift")
# Needed by every smoke run, resolved within the cell's exclude_newer date.
ALWAYS = ("datasets", "tokenizers")
RECIPE_VERSION = 2  # bump when the install steps below change
PROJECT_STAMP = ".grpo-compat-project"  # the pyproject.toml the env's editable install was made from


class EnvBuildError(RuntimeError):
    pass


@dataclass(frozen=True)
class Cell:
    name: str
    pins: dict[str, str]
    device: str = "cpu"
    exclude_newer: str | None = None
    description: str = ""
    extra: tuple[str, ...] = field(default=())
    # Packages exempt from exclude_newer besides torch: e.g. the setuptools torch 2.13 needs, in an older era.
    undated: tuple[str, ...] = field(default=())
    # Pins that win over every package's declared requirements (uv --override): a version skew that pip
    # refuses but users reach with --no-deps or a later forced install.
    overrides: tuple[str, ...] = field(default=())

    @property
    def uses_preinstalled_torch(self) -> bool:
        # GPU machines carry their own CUDA torch and have no network: the env sees it instead.
        return self.pins.get("torch") == "preinstalled"

    def requirements(self) -> list[str]:
        pins = [f"{name}=={version}" for name, version in self.pins.items() if version != "preinstalled"]
        return pins + list(ALWAYS) + list(self.extra)

    def fingerprint(self) -> str:
        # Absent fields leave the hashes of existing envs as they were.
        optional = [list(values) for values in (self.undated, self.overrides) if values]
        text = json.dumps([RECIPE_VERSION, self.requirements(), self.exclude_newer, *optional], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


def load_cells(path: Path = CELLS_FILE) -> tuple[dict[str, Cell], str]:
    """All cells by name (in file order), and the name of the default (development) cell."""
    data = tomllib.loads(path.read_text())
    cells = {}
    for name, table in data.get("cells", {}).items():
        pins = {key: str(table[key]) for key in PINNED if key in table}
        if "torch" not in pins:
            raise ValueError(f"cell {name!r} in {path} pins no torch (an unpinned torch pulls CUDA wheels)")
        cells[name] = Cell(
            name=name,
            pins=pins,
            device=table.get("device", "cpu"),
            exclude_newer=table.get("exclude_newer"),
            description=table.get("description", ""),
            extra=tuple(table.get("extra", ())),
            undated=tuple(table.get("undated", ())),
            overrides=tuple(table.get("overrides", ())),
        )
    default = data.get("default_cell", "")
    if default not in cells:
        raise ValueError(f"default_cell {default!r} in {path} is not a cell")
    return cells, default


def quick_cells(path: Path = CELLS_FILE) -> list[str]:
    """The cells CI runs on every change."""
    return list(tomllib.loads(path.read_text()).get("quick", []))


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
    raise EnvBuildError("uv is not installed: run `python3 -m pip install uv` (matrix/setup.sh does)")


def _run(command: list[str], log: Path) -> None:
    with log.open("a") as out:
        out.write("$ " + " ".join(command) + "\n")
        out.flush()
        result = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-25:])
        raise EnvBuildError(f"{' '.join(command[:4])} ... failed (exit {result.returncode}):\n{tail}")


def env_path(cell: Cell) -> Path:
    return ENVS_DIR / f"{cell.name}-{cell.fingerprint()}"


def env_is_ready(cell: Cell, path: Path | None = None, extras: str = "") -> bool:
    env = path or env_path(cell)
    marker = env / ".grpo-compat-env"
    return marker.exists() and marker.read_text() == f"{cell.fingerprint()} {extras}" and (env / "bin/python").exists()


def _sources(cell: Cell) -> list[str]:
    """Where uv finds packages: PyPI plus pip's find-links, the cell's release-era date and its overrides."""
    links = [arg for link in pip_find_links() for arg in ("--find-links", link)]
    # The date holds back indirect dependencies; torch is pinned and newer than most dates.
    dated = ["--exclude-newer", cell.exclude_newer]
    dated += [arg for name in ("torch", *cell.undated) for arg in ("--exclude-newer-package", f"{name}=false")]
    overrides = []
    if cell.overrides:
        path = ENVS_DIR.parent / f"{cell.name}-{cell.fingerprint()}.overrides.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(cell.overrides) + "\n")
        overrides = ["--override", str(path)]
    return links + (dated if cell.exclude_newer else []) + overrides


def ensure_env(cell: Cell, path: Path | None = None, extras: str = "", wheelhouse: Path | None = None) -> Path:
    """The python of the cell's env, building it when missing or half-built.

    With ``wheelhouse`` nothing is downloaded: every package comes from that folder, filled
    beforehand by :func:`fill_wheelhouse` (GPU machines have no network).
    """
    env = path or env_path(cell)
    python = env / "bin" / "python"
    ENVS_DIR.mkdir(parents=True, exist_ok=True)
    with open(ENVS_DIR.parent / f"{env.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if env_is_ready(cell, env, extras):
            _refresh_project(env, extras, wheelhouse)
            return python
        shutil.rmtree(env, ignore_errors=True)
        log = ENVS_DIR.parent / f"{env.name}.log"
        log.write_text("")
        uv = uv_command()
        system = ["--system-site-packages"] if cell.uses_preinstalled_torch else []
        _run([*uv, "venv", "--quiet", *system, "--python", sys.executable, str(env)], log)
        install = [*uv, "pip", "install", "--compile-bytecode", "--python", str(python)]
        if wheelhouse is None:
            sources = _sources(cell)
            _run([*install, *sources, *cell.requirements()], log)
        else:
            # The wheelhouse's requirements.txt is the whole resolved closure (less a preinstalled torch).
            sources = ["--offline", "--no-index", "--find-links", str(wheelhouse)]
            _run([*install, *sources, "--no-deps", "-r", str(wheelhouse / "requirements.txt")], log)
        project = f"{REPO}[{extras}]" if extras else str(REPO)
        _run([*install, *sources, "--editable", project], log)
        (env / PROJECT_STAMP).write_text(_project_stamp())
        (env / ".grpo-compat-env").write_text(f"{cell.fingerprint()} {extras}")
    return python


def _project_stamp() -> str:
    return hashlib.sha256((REPO / "pyproject.toml").read_bytes()).hexdigest()[:12]


def _refresh_project(env: Path, extras: str, wheelhouse: Path | None) -> None:
    """Reinstall the editable project when pyproject.toml changed (entry points, packages), not the cell's pins."""
    stamp = _project_stamp()
    if (env / PROJECT_STAMP).exists() and (env / PROJECT_STAMP).read_text() == stamp:
        return
    offline = ["--offline", "--no-index", "--find-links", str(wheelhouse)] if wheelhouse else []
    project = f"{REPO}[{extras}]" if extras else str(REPO)
    install = [*uv_command(), "pip", "install", "--python", str(env / "bin" / "python"), *offline, "--no-deps"]
    _run([*install, "--editable", project], ENVS_DIR.parent / f"{env.name}.log")
    (env / PROJECT_STAMP).write_text(stamp)


def fill_wheelhouse(cell: Cell, out: Path, preinstalled_torch: str | None = None) -> Path:
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
            *_sources(cell),
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    ensure = sub.add_parser("ensure", help="build the cell's env if needed and print its python")
    ensure.add_argument("cell", nargs="?", help="cell name (default: the default cell)")
    ensure.add_argument("--path", type=Path, help="where to put the env instead of .matrix/envs")
    ensure.add_argument("--extras", default="", help="extras of grpo-compat to install, e.g. dev")
    ensure.add_argument("--wheelhouse", type=Path, help="install offline from this folder (see `wheels`)")
    wheels = sub.add_parser("wheels", help="download every wheel a cell needs, for an offline machine")
    wheels.add_argument("cell")
    wheels.add_argument("--out", type=Path, required=True, help="the wheelhouse folder to fill")
    wheels.add_argument("--torch-version", help="the torch the target machine has (preinstalled cells)")
    args = parser.parse_args(argv)
    cells, default = load_cells()
    name = args.cell or default
    if name not in cells:
        parser.error(f"unknown cell {name!r}; cells: {', '.join(cells)}")
    try:
        if args.command == "wheels":
            print(fill_wheelhouse(cells[name], args.out, args.torch_version))
        else:
            print(ensure_env(cells[name], args.path, args.extras, args.wheelhouse))
    except EnvBuildError as error:
        print(f"error: cell {name}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
