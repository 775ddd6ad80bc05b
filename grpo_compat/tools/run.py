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
from collections.abc import Callable
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


def _launches(command: list[str], program: str, subcommand: str) -> list[str] | None:
    """The arguments after ``program subcommand`` (``trl grpo``, ``swift rlhf``), else None."""
    if len(command) > 1 and Path(command[0]).name == program and command[1] == subcommand:
        return command[2:]
    return None


def settings_refused(command: list[str], active: Callable[[str], bool]) -> list[str]:
    """What `trl grpo --config` / `swift rlhf` would refuse, found before launching (the patches' checks)."""
    from grpo_compat.core.versions import installed_version
    from grpo_compat.settings.installed import refused_names
    from grpo_compat.tools import preflight

    trl_arguments, swift_arguments = _launches(command, "trl", "grpo"), _launches(command, "swift", "rlhf")
    if trl_arguments is not None and installed_version("trl") and active("trl.grpo-config-settings"):
        keys = [a[2:].split("=", 1)[0] for a in trl_arguments if a.startswith("--") and a != "--config"]
        if "--config" in trl_arguments[:-1]:
            keys += list(preflight.load_config_file(Path(trl_arguments[trl_arguments.index("--config") + 1])))
        return [p.message for p in refused_names(keys, "trl", installed_version("trl"), "config")]
    if swift_arguments is not None and installed_version("ms-swift") and active("swift.arguments-not-taken"):
        names = [a[2:].split("=", 1)[0].replace("-", "_") for a in swift_arguments if a.startswith("--")]
        if "ignore_args_error" in names:
            return []
        return [p.message for p in refused_names(names, "ms-swift", installed_version("ms-swift"), "cli")]
    return []


def run(command: list[str], strict: bool, only: str | None, skip: str | None, print_env: bool) -> int:
    env = environment(strict, patch_ids("--only", only), patch_ids("--skip", skip), dict(os.environ))
    disabled = {i.strip() for i in os.environ.get("GRPO_COMPAT_DISABLE", "").split(",")}
    chosen, skipped = env[ONLY_ENV].split(","), env[SKIP_ENV].split(",")

    def active(patch_id: str) -> bool:
        wanted = not any(chosen) or patch_id in chosen
        return wanted and patch_id not in skipped and not ({patch_id, "all"} & disabled)

    if print_env:
        if command:
            raise InputError("--print-env takes no command: it prints the variables a job script exports")
        for name in ("PYTHONPATH", RUN_ENV, STRICT_ENV, ONLY_ENV, SKIP_ENV):
            print(f"export {name}={shlex.quote(env[name])}")
        return 0
    if not command:
        raise InputError("give the command to run after --, e.g. grpo-compat run -- python train.py")
    refused = settings_refused(command, active)
    if refused:  # before anything launches: the same refusal the patches give in the launched processes
        for message in refused:
            print(f"grpo-compat run: {message}", file=sys.stderr)
        return 1
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
