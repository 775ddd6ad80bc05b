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
import shlex
import shutil
import sys
from pathlib import Path

from grpo_compat.tools.arguments import InputError

STARTUP = Path(__file__).resolve().parent.parent / "startup"  # holds sitecustomize.py
# The variables startup/sitecustomize.py reads: it names them itself, since it must run where grpo_compat
# cannot be imported.
RUN_ENV, STRICT_ENV, ONLY_ENV, SKIP_ENV = (
    "GRPO_COMPAT_RUN",
    "GRPO_COMPAT_RUN_STRICT",
    "GRPO_COMPAT_RUN_ONLY",
    "GRPO_COMPAT_RUN_SKIP",
)
COMMAND_NOT_FOUND = 127  # as a shell says it


def patch_ids(option: str, value: str | None) -> list[str]:
    """Patch ids given as ID,ID,...; each must exist (no patch module is imported to know them)."""
    if value is None:
        return []
    from grpo_compat.core.registry import registered_patches

    ids = [i.strip() for i in value.split(",") if i.strip()]
    known = {patch.id for patch in registered_patches()}
    unknown = [i for i in ids if i not in known]
    if unknown or not ids:
        raise InputError(f"{option} {value!r}: expected patch ids among {', '.join(sorted(known))}")
    return ids


def environment(strict: bool, only: list[str], skip: list[str], base: dict[str, str]) -> dict[str, str]:
    """The command's environment: the startup folder first on PYTHONPATH (the user's entries kept after it)."""
    env = dict(base)
    entries = [entry for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry and entry != str(STARTUP)]
    env["PYTHONPATH"] = os.pathsep.join([str(STARTUP), *entries])
    env[RUN_ENV] = "1"
    env[STRICT_ENV] = "1" if strict else ""
    env[ONLY_ENV], env[SKIP_ENV] = ",".join(only), ",".join(skip)
    return env


def run(command: list[str], strict: bool, only: str | None, skip: str | None, print_env: bool) -> int:
    env = environment(strict, patch_ids("--only", only), patch_ids("--skip", skip), dict(os.environ))
    if print_env:
        if command:
            raise InputError("--print-env takes no command: it prints the variables a job script exports")
        for name in ("PYTHONPATH", RUN_ENV, STRICT_ENV, ONLY_ENV, SKIP_ENV):
            print(f"export {name}={shlex.quote(env[name])}")
        return 0
    if not command:
        raise InputError("give the command to run after --, e.g. grpo-compat run -- python train.py")
    executable = shutil.which(command[0], path=env.get("PATH"))
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
