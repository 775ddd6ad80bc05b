"""Probe DeepSpeed's loss scaling under gradient accumulation (KF-5): ZeRO-2 vs DDP grad_norm; writes a JSON result.

    python -m matrix.probe_ga_scaling --mode plain --output plain.json
    python -m matrix.probe_ga_scaling --mode patched --output patched.json

Launches the same GRPO smoke run (matrix/smoke_grpo.py, gradient accumulation 4, one optimizer step)
twice, as 2 CPU processes: once with DDP and once with DeepSpeed ZeRO-2 (the launch commands of
matrix/runs.py). Same seed, same data, same completions: the first step's grad_norm must be the same.
On transformers 4.48 the loss is divided by the accumulation twice under DeepSpeed, and ZeRO-2's
grad_norm comes out 1/4 of DDP's: the probe's error. Gradient clipping is off (max_grad_norm 1000) so
it cannot hide the ratio. Exits non-zero on error, after writing the JSON.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from grpo_compat.matrix.launchers import command, smoke_arguments
from grpo_compat.testing.smoke import parse_args, run_launcher, run_smoke

PATCH = "trl.deepspeed-gas-double-scaling"
SMOKE_SCRIPT = Path(__file__).resolve().parent / "smoke_grpo.py"
GRAD_ACCUM = 4
SETTINGS = (
    f"gradient_accumulation_steps={GRAD_ACCUM}",
    "per_device_train_batch_size=2",
    "num_generations=2",
    "max_grad_norm=1000.0",
)
TOLERANCE = 1e-3  # relative; measured: equal to 4 digits when the scaling is right
LAUNCH_TIMEOUT_S = 600  # a first DeepSpeed launch in a new env compiles its CPU comm op (minutes)


class ProbeFailed(AssertionError):
    pass


def launch(launcher: str, args: argparse.Namespace, model_dir: Path, scratch: Path) -> dict:
    """The smoke run's JSON result of one launch; a failed launch is the probe's error."""
    output = scratch / f"{launcher}.json"
    settings = (*SETTINGS, *args.set)
    # One step: only the first step sees identical weights in both launches.
    script = smoke_arguments(SMOKE_SCRIPT, args.mode, args.device, model_dir, output, settings, steps=1)
    cmd = command(launcher, Path(sys.executable), script, scratch)
    try:
        done = run_launcher(cmd, LAUNCH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ProbeFailed(f"the {launcher} launch did not finish in {LAUNCH_TIMEOUT_S} s") from None
    if not output.exists():
        raise ProbeFailed(f"the {launcher} launch wrote no result (exit {done.returncode}): {done.stderr[-1500:]}")
    result = json.loads(output.read_text())
    if result["status"] != "ok":
        raise ProbeFailed(f"the {launcher} launch failed: {result['error']}")
    if not result.get("grad_norms"):
        raise ProbeFailed(f"the {launcher} launch logged no grad_norm")
    return result


def patch_status(result: dict) -> str | None:
    patches = (result.get("grpo_compat") or {}).get("patches") or []
    return next((p["status"] for p in patches if p["id"] == PATCH), None)


def probe(args: argparse.Namespace, output_dir: str, result: dict) -> None:
    result["summary"] = None  # marks a probe result, also when a launch fails below
    import transformers

    from grpo_compat.testing.tiny_model import build_tiny_qwen2

    default_dir = Path(tempfile.gettempdir()) / f"grpo_compat_tiny_qwen2_tf{transformers.__version__}"
    model_dir = build_tiny_qwen2(args.model_dir or default_dir, seed=0)  # built once, before both launches
    ddp_run, zero2_run = (launch(launcher, args, model_dir, Path(output_dir)) for launcher in ("ddp", "zero2"))
    result["patch_status_zero2"] = patch_status(zero2_run)  # None in plain mode
    ddp = result["grad_norm_ddp"] = float(ddp_run["grad_norms"][0])
    zero2 = result["grad_norm_zero2"] = float(zero2_run["grad_norms"][0])
    ratio = result["grad_norm_ratio"] = zero2 / ddp
    if abs(ratio - 1.0) > TOLERANCE:
        raise ProbeFailed(
            f"ZeRO-2 grad_norm is 1/{1 / ratio:.3g} of DDP's ({zero2:.6g} vs {ddp:.6g}, gradient accumulation "
            f"{GRAD_ACCUM}): DeepSpeed scaled the loss by the accumulation a second time"
        )
    result["summary"] = f"ZeRO-2 grad_norm {zero2:.6g} = DDP's {ddp:.6g} (ratio {ratio:.5f}, GA {GRAD_ACCUM})"


def main(argv: list[str] | None = None) -> int:
    return run_smoke("probe_ga_scaling", parse_args(__doc__.splitlines()[0], "GRPOConfig field", argv), probe)


if __name__ == "__main__":
    sys.exit(main())
