"""How the matrix starts a script in 1 or 2 processes (python, DDP with gloo on CPU, DeepSpeed ZeRO-2 / ZeRO-3,
torchrun), and what a failed launch's output says went wrong.

Shared by this repository's planned runs (matrix/runs.py), the probes that launch smoke runs themselves
(matrix/probe_ga_scaling.py) and a user's entries (grpo_compat.matrix.entry_run); it imports nothing from the
rest of the matrix.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from grpo_compat.testing.smoke import free_port


def smoke_arguments(
    script: Path, mode: str, device: str, model_dir: Path, output: Path, settings=(), flags=(), steps: int | None = None
) -> list[str]:
    """A smoke script (or probe) and its arguments, without an interpreter: what a launcher starts."""
    arguments = [str(script), "--mode", mode, *(["--steps", str(steps)] if steps is not None else [])]
    arguments += ["--device", device]
    arguments += ["--model-dir", str(model_dir), "--output", str(output)]
    return arguments + [arg for setting in settings for arg in ("--set", setting)] + list(flags)


def deepspeed_config(stage: int, folder: Path) -> Path:
    """The matrix's DeepSpeed config: ZeRO ``stage``, every batch and precision key "auto"."""
    path = folder / f"zero{stage}.json"
    auto = "auto"
    path.write_text(
        json.dumps(
            {
                "zero_optimization": {"stage": stage},
                "train_micro_batch_size_per_gpu": auto,
                "gradient_accumulation_steps": auto,
                "train_batch_size": auto,
                "bf16": {"enabled": auto},
                "fp16": {"enabled": auto},
            },
            indent=2,
        )
    )
    return path


_EXCEPTION = re.compile(r"^(?:[\w.]+\.)?(\w*(?:Error|Exception|Exit)): ?(.*)$")
# What launchers say when a rank failed: the rank's own exception, printed before, is the one that says why.
_LAUNCHER_ERRORS = {"ChildFailedError", "CalledProcessError"}


def error_of(output: str) -> str | None:
    """The first exception a rank raised, as `Name: message` and its continuation lines."""
    lines = [re.sub(r"^\[rank\d+\]:\s?", "", line) for line in output.splitlines()]  # torchrun's prefix
    for index, line in enumerate(lines):
        match = _EXCEPTION.match(line)
        if match and match.group(1) not in _LAUNCHER_ERRORS:
            message = [f"{match.group(1)}: {match.group(2)}"]
            for following in lines[index + 1 : index + 20]:
                if not following.strip() or following.startswith(("[", "Traceback", "E0", "W0", "  File")):
                    break
                message.append(following)
            return "\n".join(message)
    return None


def torchrun(python: Path, processes: int) -> list[str]:
    """`torchrun` of ``processes`` processes on this machine."""
    return [str(python.parent / "torchrun"), "--nproc_per_node", str(processes), "--master_port", str(free_port())]


def accelerate_launch(python: Path, processes: int) -> list[str]:
    """`accelerate launch` of ``processes`` processes on this machine, without asking accelerate's config.

    Add ``--multi_gpu`` for plain data parallel: on CPU it starts gloo processes (``--cpu`` would start one).
    """
    launch = [str(python.parent / "accelerate"), "launch", "--num_processes", str(processes), "--num_machines", "1"]
    return [*launch, "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", str(free_port())]


def command(launcher: str, python: Path, script: list[str], scratch: Path) -> list[str]:
    """The command line that starts ``script`` (smoke_arguments) with the cell's ``python``.

    ``launcher``: python (one process), ddp (2 gloo processes on CPU), zero2 or zero3 (DeepSpeed, 2 processes).
    """
    if launcher == "python":
        return [str(python), *script]
    launch = accelerate_launch(python, 2)
    if launcher == "ddp":
        return [*launch, "--multi_gpu", *script]
    stage = int(launcher.removeprefix("zero"))
    return [*launch, "--use_deepspeed", "--deepspeed_config_file", str(deepspeed_config(stage, scratch)), *script]
