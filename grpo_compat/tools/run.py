"""`grpo-compat run [--strict] [--only IDS] [--skip IDS] -- <command ...>`: the command, with grpo_compat applied
in every Python process it starts (the launcher, each rank, whatever they start), without touching a script.

    grpo-compat run -- trl grpo --config grpo.yaml
    grpo-compat run -- accelerate launch --num_processes 2 train.py

The command replaces this process (exec): its exit status, standard streams and signals (Ctrl-C, a
scheduler's SIGTERM) are its own. What it gets is two environment variables: PYTHONPATH with the folder
of grpo_compat/startup/sitecustomize.py in front, and GRPO_COMPAT_RUN=1. A job script that cannot
prefix its command sets them itself: eval "$(grpo-compat run --print-env)".
"""

from __future__ import annotations

import os
import sys

# It starts before every launch: only os and sys here (shutil, shlex, pathlib, argparse cost milliseconds).
from grpo_compat.startup import ONLY_ENV, RUN_ENV, SKIP_ENV, STRICT_ENV, environment
from grpo_compat.tools.errors import InputError

COMMAND_NOT_FOUND = 127  # as a shell says it


def patch_ids(option: str, value: str | None) -> list[str]:
    """Patch ids given as ID,ID,...; each must exist (no patch module is imported to know them)."""
    if value is None:
        return []
    from grpo_compat.core.registry import declared_patches

    ids = [i.strip() for i in value.split(",") if i.strip()]
    known = {patch.id for patch in declared_patches()}
    unknown = [i for i in ids if i not in known]
    if unknown or not ids:
        raise InputError(f"{option} {value!r}: expected patch ids among {', '.join(sorted(known))}")
    return ids


def run(command: list[str], strict: bool, only: str | None, skip: str | None, print_env: bool) -> int:
    env = environment(strict, patch_ids("--only", only), patch_ids("--skip", skip), dict(os.environ))
    if print_env:
        if command:
            raise InputError("--print-env takes no command: it prints the variables a job script exports")
        import shlex

        for name in ("PYTHONPATH", RUN_ENV, STRICT_ENV, ONLY_ENV, SKIP_ENV):
            print(f"export {name}={shlex.quote(env[name])}")
        return 0
    if not command:
        raise InputError("give the command to run after --, e.g. grpo-compat run -- python train.py")
    executable = _which(command[0], env.get("PATH"))
    # One line, whatever the name holds (a stray newline from a job script's quoting, say).
    name = command[0] if command[0].isprintable() else repr(command[0])
    if executable is None:
        print(f"grpo-compat run: {name}: command not found", file=sys.stderr)
        return COMMAND_NOT_FOUND
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(executable, command, env)
    except OSError as error:  # e.g. not executable: as a shell reports it
        print(f"grpo-compat run: {name}: {error.strerror}", file=sys.stderr)
        return 126
    return 0  # not reached: the command replaced this process


def _which(name: str, path: str | None) -> str | None:
    """shutil.which (POSIX), without importing shutil: a name with a slash is itself, else the first on PATH."""
    if os.sep in name:
        return name if _is_executable(name) else None
    folders = os.defpath if path is None else path
    for folder in folders.split(os.pathsep) if folders else ():
        candidate = os.path.join(folder, name)
        if _is_executable(candidate):
            return candidate
    return None


def _is_executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)
