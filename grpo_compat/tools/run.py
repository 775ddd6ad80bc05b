"""`grpo-compat run [--strict] [--only IDS] [--skip IDS] [--explain] -- <command ...>`: the command, with
grpo_compat applied in every Python process it starts (the launcher, each rank, whatever they start), without
touching a script.

    grpo-compat run -- trl grpo --config grpo.yaml
    grpo-compat run -- accelerate launch --num_processes 2 train.py
    grpo-compat run --explain -- python train.py

The command replaces this process (exec): its exit status, standard streams and signals (Ctrl-C, a
scheduler's SIGTERM) are its own. What it gets is two environment variables: PYTHONPATH with the folder
of grpo_compat/startup/sitecustomize.py in front, and GRPO_COMPAT_RUN=1. A job script that cannot
prefix its command sets them itself: eval "$(grpo-compat run --print-env)".

With --explain the command runs as a child instead: its output goes to the terminal as it comes and into a
capture, its exit status is returned as its own, and when it fails `grpo-compat explain` reads the capture and
prints its answer after, on stderr (what `cmd 2>&1 | tee log | grpo-compat explain -` does, without losing the
command's status).
"""

from __future__ import annotations

import os
import sys

# It starts before every launch: only os and sys here (shutil, shlex, pathlib, argparse cost milliseconds).
from grpo_compat.startup import ONLY_ENV, RUN_ENV, SKIP_ENV, STRICT_ENV, environment
from grpo_compat.tools.errors import InputError

TYPE_CHECKING = False  # typing costs milliseconds before every launch
if TYPE_CHECKING:
    from collections.abc import Callable

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


def _launches(command: list[str], program: str, subcommand: str) -> list[str] | None:
    """The arguments after ``program subcommand`` (``trl grpo``, ``swift rlhf``), else None."""
    if len(command) > 1 and os.path.basename(command[0]) == program and command[1] == subcommand:
        return command[2:]
    return None


def settings_refused(command: list[str], active: Callable[[str], bool]) -> list[str]:
    """What `trl grpo --config` / `swift rlhf` would refuse, found before launching (the patches' checks)."""
    trl_arguments, swift_arguments = _launches(command, "trl", "grpo"), _launches(command, "swift", "rlhf")
    if trl_arguments is None and swift_arguments is None:
        return []  # any other command: nothing more is imported before it launches
    from pathlib import Path

    from grpo_compat.core.versions import installed_version
    from grpo_compat.settings.installed import refused_names, swift_argument_names
    from grpo_compat.tools import preflight

    if trl_arguments is not None and installed_version("trl") and active("trl.grpo-config-settings"):
        keys = [a[2:].split("=", 1)[0] for a in trl_arguments if a.startswith("--") and a != "--config"]
        if "--config" in trl_arguments[:-1]:
            keys += list(preflight.load_config_file(Path(trl_arguments[trl_arguments.index("--config") + 1])))
        return [p.message for p in refused_names(keys, "trl", installed_version("trl"), "config")]
    if swift_arguments is not None and installed_version("ms-swift") and active("swift.arguments-not-taken"):
        names = swift_argument_names(swift_arguments, os.environ)  # what the launched patch will check
        return [p.message for p in refused_names(names, "ms-swift", installed_version("ms-swift"), "cli")]
    return []


def run(
    command: list[str], strict: bool, only: str | None, skip: str | None, print_env: bool, explain: bool = False
) -> int:
    if only is not None and skip is not None:
        raise InputError("--only and --skip together: give one (--only: just these patches; --skip: all but these)")
    env = environment(strict, patch_ids("--only", only), patch_ids("--skip", skip), dict(os.environ))
    if print_env:
        if explain:
            raise InputError("--print-env and --explain together: --explain runs a command, --print-env none")
        if command:
            raise InputError("--print-env takes no command: it prints the variables a job script exports")
        import shlex

        for name in ("PYTHONPATH", RUN_ENV, STRICT_ENV, ONLY_ENV, SKIP_ENV):
            print(f"export {name}={shlex.quote(env[name])}")
        return 0
    if not command:
        raise InputError("give the command to run after --, e.g. grpo-compat run -- python train.py")
    refused = settings_refused(command, _selection(env))
    if refused:  # before anything launches: the same refusal the patches give in the launched processes
        for message in refused:
            print(f"grpo-compat run: {message}", file=sys.stderr)
        return 1
    executable = _which(command[0], env.get("PATH"))
    # One line, whatever the name holds (a stray newline from a job script's quoting, say).
    name = command[0] if command[0].isprintable() else repr(command[0])
    if executable is None:
        print(f"grpo-compat run: {name}: command not found", file=sys.stderr)
        return COMMAND_NOT_FOUND
    sys.stdout.flush()
    sys.stderr.flush()
    if explain:
        from grpo_compat.tools.explained_run import run_explained

        return run_explained(executable, command, env)
    try:
        os.execve(executable, command, env)
    except OSError as error:  # e.g. not executable: as a shell reports it
        print(f"grpo-compat run: {name}: {error.strerror}", file=sys.stderr)
        return 126
    return 0  # not reached: the command replaced this process


def _selection(env: dict[str, str]) -> Callable[[str], bool]:
    """Whether a patch is switched on for the command (--only, --skip, GRPO_COMPAT_DISABLE)."""
    disabled = {i.strip() for i in env.get("GRPO_COMPAT_DISABLE", "").split(",")}
    chosen, skipped = env[ONLY_ENV].split(","), env[SKIP_ENV].split(",")

    def active(patch_id: str) -> bool:
        wanted = not any(chosen) or patch_id in chosen
        return wanted and patch_id not in skipped and not ({patch_id, "all"} & disabled)

    return active


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
