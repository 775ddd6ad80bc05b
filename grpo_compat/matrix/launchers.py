"""How the matrix starts a script in 1 or 2 processes: python, DDP (gloo on CPU), DeepSpeed ZeRO-2 / ZeRO-3.

Shared by this repository's planned runs (matrix/runs.py), the probes that launch smoke runs themselves
(matrix/probe_ga_scaling.py) and a user's entries (grpo_compat.matrix.entry_run); it imports nothing from the
rest of the matrix.
"""

from __future__ import annotations

import json
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
