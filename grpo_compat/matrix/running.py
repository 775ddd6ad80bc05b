"""The grpo_compat running this command, as what a user's cell envs install when their cells file names none.

No package index needs to hold grpo-compat for a user's matrix to run: a checkout (or an editable install of
one) is installed from its folder; an installed wheel is packed again from the files pip or uv installed (its
RECORD), into a wheel that is byte-identical while those files are, so a cell env reinstalls it only when it
changed.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import re
import zipfile
from pathlib import Path

DISTRIBUTION = "grpo-compat"
# Files an installer writes into the dist-info folder that are not part of the wheel.
_INSTALLER_FILES = ("INSTALLER", "REQUESTED", "direct_url.json", "RECORD")
_EPOCH = (1980, 1, 1, 0, 0, 0)  # zip's earliest date: the same files make the same bytes


class RunningSourceError(RuntimeError):
    """The running grpo_compat cannot be packed for a cell env; the message says what to name instead."""


def checkout_folder() -> Path | None:
    """The project folder of a grpo_compat imported from a checkout (or an editable install of one)."""
    import grpo_compat

    folder = Path(grpo_compat.__file__).resolve().parent.parent
    pyproject = folder / "pyproject.toml"
    if pyproject.is_file() and f'name = "{DISTRIBUTION}"' in pyproject.read_text(encoding="utf-8"):
        return folder
    return None


def running_source(scratch: Path) -> str:
    """A folder or wheel path that installs the running grpo_compat (the wheel is written under ``scratch``)."""
    folder = checkout_folder()
    if folder is not None:
        return str(folder)
    return str(pack_installed_wheel(scratch / "running-grpo-compat"))


def pack_installed_wheel(out: Path) -> Path:
    """Pack the installed grpo-compat distribution's files into ``out/<its wheel name>``."""
    try:
        distribution = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise RunningSourceError(
            "grpo_compat runs from neither a checkout nor an installed distribution: name one in the cells file "
            '(grpo_compat = "grpo-compat==X", a wheel or a folder)'
        ) from None
    files = [
        file
        for file in distribution.files or []
        if not file.parts[0] == ".."  # console scripts: the installer writes them from entry_points.txt
        and "__pycache__" not in file.parts
        and not (file.parent.name.endswith(".dist-info") and file.name in _INSTALLER_FILES)
    ]
    if not files:
        raise RunningSourceError(f"the installed {DISTRIBUTION} lists no files (no RECORD): reinstall it")
    dist_info = next(file.parent for file in files if file.parent.name.endswith(".dist-info"))
    version = distribution.version
    wheel = out / f"grpo_compat-{version}-py3-none-any.whl"
    record = []
    out.mkdir(parents=True, exist_ok=True)
    partial = wheel.with_suffix(".partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(files, key=str):
            data = Path(file.locate()).read_bytes()
            archive.writestr(zipfile.ZipInfo(file.as_posix(), _EPOCH), data, zipfile.ZIP_DEFLATED)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{file.as_posix()},sha256={digest},{len(data)}")
        record.append(f"{dist_info.as_posix()}/RECORD,,")
        archive.writestr(zipfile.ZipInfo(f"{dist_info.as_posix()}/RECORD", _EPOCH), "\n".join(record) + "\n")
    if wheel.exists() and wheel.read_bytes() == partial.read_bytes():
        partial.unlink()  # unchanged: keep the file (and its time) the cell envs were built from
    else:
        partial.replace(wheel)
    return wheel


def installed_from() -> dict | None:
    """PEP 610's record of where pip (or uv) installed the grpo-compat distribution from (direct_url.json: its
    ``url`` and ``vcs_info``, ``dir_info`` or ``archive_info``); None when it came from a package index."""
    import json

    try:
        text = importlib.metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        return None
    try:
        data = json.loads(text or "null")
    except ValueError:
        return None
    return data if isinstance(data, dict) and isinstance(data.get("url"), str) else None


def vcs_requirement(url: str, vcs: str, commit: str | None) -> str:
    """The requirement that installs grpo-compat from a VCS URL, at ``commit`` when one is known."""
    return f"{DISTRIBUTION} @ {vcs}+{url}" + (f"@{commit}" if commit else "")


def folder_vcs_source(folder: Path) -> tuple[str | None, str]:
    """(the VCS requirement of a git checkout's committed state, or None; why not). A CI job can install it only
    when the checkout's commit is on a branch of its ``origin`` (a remote-tracking branch holds it) and its
    tracked files are as committed; the files of a folder outside the repository are not in the job's checkout."""
    import subprocess

    def git(*arguments: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", str(folder), *arguments], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    url = git("remote", "get-url", "origin")
    if not url:
        return None, f"{folder} is not a git checkout with an origin"
    scp = re.fullmatch(r"([\w.-]+@[\w.-]+):(?!//)(.+)", url)  # git@host:owner/name.git, which pip cannot read
    url = f"ssh://{scp.group(1)}/{scp.group(2)}" if scp else url
    if "://" not in url or url.startswith("file:"):
        return None, f"{folder}'s origin ({url}) is a folder of this machine"
    commit = git("rev-parse", "HEAD")
    if not commit or not git("branch", "--remotes", "--contains", commit):
        return None, f"{folder}'s commit {(commit or '?')[:12]} is on no branch of its origin (push it)"
    if git("status", "--porcelain", "--untracked-files=no") != "":
        return None, f"{folder} has changes not committed"
    return vcs_requirement(url, "git", commit), ""
