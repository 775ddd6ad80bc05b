"""The environment of a `grpo-compat run` launch; the folder holds the ``sitecustomize.py`` it puts first on PYTHONPATH.

Used by the command (grpo_compat/tools/run.py) and by the matrix's patched entry runs (grpo_compat/matrix/entry_run.py).
"""

from __future__ import annotations

import os

STARTUP = os.path.dirname(os.path.realpath(__file__))  # holds sitecustomize.py
# The variables sitecustomize.py reads: it names them itself, since it must run where grpo_compat cannot be imported.
RUN_ENV, STRICT_ENV, ONLY_ENV, SKIP_ENV = (
    "GRPO_COMPAT_RUN",
    "GRPO_COMPAT_RUN_STRICT",
    "GRPO_COMPAT_RUN_ONLY",
    "GRPO_COMPAT_RUN_SKIP",
)


def environment(strict: bool, only: list[str], skip: list[str], base: dict[str, str]) -> dict[str, str]:
    """The command's environment: the startup folder first on PYTHONPATH (the user's entries kept after it)."""
    env = dict(base)
    entries = [entry for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry and entry != STARTUP]
    env["PYTHONPATH"] = os.pathsep.join([STARTUP, *entries])
    env[RUN_ENV] = "1"
    env[STRICT_ENV] = "1" if strict else ""
    env[ONLY_ENV], env[SKIP_ENV] = ",".join(only), ",".join(skip)
    return env
