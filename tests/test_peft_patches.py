"""PEFT + gradient checkpointing in GRPO (KF-5's PEFT causes), on real installs through the matrix reproducers.

- trl.peft-input-grads (TRL #3089), trl-0.15 cell (trl 0.15.2, transformers 4.48.3, peft 0.14.0): a LoRA
  adapter with reentrant checkpointing fails at the first backward unpatched ("element 0 of tensors does
  not require grad"); patched, every LoRA tensor moves in 3 steps.
- trl.peft-zero3-reentrant (TRL #4951 / #6356), trl-0.29-peft-zero3 cell (trl 0.29.1, DeepSpeed 0.19.0
  without DeepSpeed#8148, peft 0.18.1), ZeRO-3 on 2 CPU processes: TRL's non-reentrant default raises
  CheckpointError unpatched; patched, reentrant checkpointing trains every LoRA tensor. An explicit
  use_reentrant=False is overridden with a warning, and still trains. The decision itself, on real
  GRPOConfig / DeepSpeed objects: only PEFT + ZeRO-3 + checkpointing that is not reentrant, only without
  DeepSpeed#8148 (detected in DeepSpeed 0.19.8 by feature, in the trl-1.16 cell).
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from grpo_compat.matrix import runner
from matrix.repository import cells_file, repository_project
from matrix.reproducers import REPRODUCERS
from matrix.runs import Run
from tests.helpers import cell_python, reproducer_results

pytestmark = pytest.mark.slow  # real PEFT / DeepSpeed training in the trl-0.15 and trl-0.29-peft-zero3 cells


def upstream_pattern(patch_id: str) -> str:
    return next(r.upstream for r in REPRODUCERS if r.patch == patch_id)


@pytest.mark.parametrize(
    ("cell", "patch_id"),
    [("trl-0.15", "trl.peft-input-grads"), ("trl-0.29-peft-zero3", "trl.peft-zero3-reentrant")],
)
def test_lora_with_checkpointing_fails_upstream_and_trains_every_adapter_tensor_patched(cell, patch_id, tmp_path):
    results = reproducer_results(cell, patch_id, tmp_path)
    plain_record, plain = results["plain"]
    assert plain_record["status"] == "pass", plain_record
    assert plain["status"] == "error"
    assert re.search(upstream_pattern(patch_id), plain["error"], re.S), plain["error"][:2000]

    patched_record, patched = results["patched"]
    assert patched_record["status"] == "pass", patched_record
    assert patched["status"] == "ok", patched["error"]
    assert patched["steps"] == 3
    trained = patched["trainable_params"]
    assert trained and all(".lora_" in name or name.endswith(".bias") for name in trained), trained
    assert patched["all_trainable_params_changed"], patched["unchanged_params"]
    statuses = {p["id"]: p["status"] for p in patched["grpo_compat"]["patches"]}
    assert statuses[patch_id] == "applied"


# -- trl.peft-zero3-reentrant: its decisions on real GRPOConfig / DeepSpeed objects ---------------------------

DECISIONS = """
import json
from peft import LoraConfig
from trl import GRPOConfig
from grpo_compat.patches.trl.peft_zero3_reentrant import deepspeed_recomputes_frozen_params, must_reenter

auto = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto", "train_batch_size": "auto"}
def config(stage=3, reentrant=None, **kwargs):
    ds = {"zero_optimization": {"stage": stage}, **auto}
    if reentrant is not None:
        kwargs["gradient_checkpointing_kwargs"] = {"use_reentrant": reentrant}
    return GRPOConfig(output_dir="out", use_cpu=True, report_to="none", deepspeed=ds, **kwargs)
lora = LoraConfig(r=4, target_modules=["q_proj"])
print(json.dumps({
    "has_8148": deepspeed_recomputes_frozen_params(),
    "default": must_reenter("Qwen/Qwen2-0.5B", config(gradient_checkpointing=True), lora),
    "asked_false": must_reenter("m", config(gradient_checkpointing=True, reentrant=False), lora),
    "already_true": must_reenter("m", config(gradient_checkpointing=True, reentrant=True), lora),
    "no_peft_model_path": must_reenter("Qwen/Qwen2-0.5B", config(gradient_checkpointing=True), None),
    "no_checkpointing": must_reenter("m", config(gradient_checkpointing=False), lora),
    "zero2": must_reenter("m", config(stage=2, gradient_checkpointing=True), lora),
}))
"""


@pytest.mark.cells("trl-0.29-peft-zero3")
def test_zero3_reentrant_acts_only_for_peft_zero3_non_reentrant_checkpointing_without_deepspeed_8148(tmp_path):
    python = cell_python("trl-0.29-peft-zero3")
    done = subprocess.run([python, "-c", DECISIONS], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    decisions = json.loads(done.stdout.strip().splitlines()[-1])
    assert decisions == {
        "has_8148": False,  # DeepSpeed 0.19.0
        "default": True,
        "asked_false": True,
        "already_true": False,
        "no_peft_model_path": False,  # a hub id / path without peft_config: nothing to do, and no crash
        "no_checkpointing": False,
        "zero2": False,
    }


def test_deepspeed_8148_is_feature_detected_in_deepspeed_0_19_8():
    code = (
        "from grpo_compat.patches.trl.peft_zero3_reentrant import deepspeed_recomputes_frozen_params as f; print(f())"
    )
    done = subprocess.run([cell_python("trl-1.16"), "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "True"  # the patch stands back: DeepSpeed recomputes itself


@pytest.mark.cells("trl-0.29-peft-zero3")
def test_asked_non_reentrant_checkpointing_is_overridden_with_a_warning_and_trains(tmp_path):
    cell = cells_file().cells["trl-0.29-peft-zero3"]
    reproducer = next(r for r in REPRODUCERS if r.patch == "trl.peft-zero3-reentrant")
    asked = 'gradient_checkpointing_kwargs={"use_reentrant": false}'
    run = Run("asked-non-reentrant", "patched", "grpo", "zero3", (*reproducer.settings, asked), reproducer.flags)
    project = replace(repository_project(), models=tmp_path)
    record, _ = runner.execute(run, Path(cell_python(cell.name)), cell, tmp_path, project, None)
    assert record["status"] == "pass", record
    assert record["weights_changed"] is True
    log = (tmp_path / f"{run.slug}.log").read_text()
    assert "use_reentrant=False fails with PEFT under DeepSpeed ZeRO-3" in log
    assert "using use_reentrant=True" in log
