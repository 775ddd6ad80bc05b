"""Probe census row 14 (ms-swift #5334): a LoRA trained under DeepSpeed bf16, saved, merged; writes a JSON result.

    python -m matrix.probe_lora_merge --mode plain --output plain.json

The report: under `--deepspeed zero1 --torch_dtype bfloat16` the saved LoRA is bf16 (fp32 without DeepSpeed), and
the merged model answers as the base. The probe trains the same LoRA (r 8, alpha 16, every linear layer, on the
tiny Qwen2 loaded in bf16) for STEPS AdamW steps at lr 1e-6, the report's, once with torch's optimizer and once in
a one-process DeepSpeed ZeRO-1 bf16 engine, saves each adapter with PEFT and merges it into the base loaded in bf16
and in fp32. It judges which of the two explains "the merge equals the base": the adapter's bf16, or the merge's.
Exits non-zero on error, after writing the JSON.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
from pathlib import Path

from grpo_compat.testing.smoke import ProbeFailed, parse_args, run_smoke, start_probe

STEPS, LEARNING_RATE = 10, 1e-6


def _free_port() -> int:
    with socket.socket() as probe_socket:
        probe_socket.bind(("127.0.0.1", 0))
        return probe_socket.getsockname()[1]


def _train_adapter(model_dir: Path, engine: str, folder: str) -> str:
    """Train and save a LoRA adapter (``engine``: "torch" or "deepspeed"); the dtype PEFT saved it in."""
    import torch
    from peft import LoraConfig, get_peft_model
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.bfloat16)
    model = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", lora_dropout=0.0))
    ids = torch.randint(0, 200, (4, 16), generator=torch.Generator().manual_seed(1))
    trainable = [p for p in model.parameters() if p.requires_grad]
    if engine == "deepspeed":
        import deepspeed

        for name, value in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1"}.items():
            os.environ.setdefault(name, value)
        os.environ.setdefault("MASTER_PORT", str(_free_port()))
        config = {
            "train_micro_batch_size_per_gpu": 4,
            "gradient_accumulation_steps": 1,
            "bf16": {"enabled": True},  # what swift writes for --torch_dtype bfloat16
            "zero_optimization": {"stage": 1},
            "optimizer": {"type": "AdamW", "params": {"lr": LEARNING_RATE, "weight_decay": 0.0, "torch_adam": True}},
        }
        runner, *_ = deepspeed.initialize(model=model, model_parameters=trainable, config=config)
        for _ in range(STEPS):
            runner.backward(runner.module(input_ids=ids, labels=ids).loss)
            runner.step()
        model = runner.module
    else:
        optimizer = torch.optim.AdamW(trainable, lr=LEARNING_RATE, weight_decay=0.0)
        for _ in range(STEPS):
            model(input_ids=ids, labels=ids).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    model.save_pretrained(folder)
    saved = load_file(os.path.join(folder, "adapter_model.safetensors"))
    return "/".join(sorted({str(tensor.dtype).removeprefix("torch.") for tensor in saved.values()}))


def _changed_by_merge(model_dir: Path, adapter: str, dtype_name: str) -> float:
    """The fraction of the projection weights' elements a merge into the base in ``dtype_name`` changes."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=getattr(torch, dtype_name))
    before = {name: p.detach().clone() for name, p in base.named_parameters() if name.endswith("proj.weight")}
    merged = PeftModel.from_pretrained(base, adapter).merge_and_unload()
    after = dict(merged.named_parameters())
    changed = sum((after[name].detach() != weight).sum().item() for name, weight in before.items())
    return changed / sum(weight.numel() for weight in before.values())


def probe(args: argparse.Namespace, output_dir: str, result: dict) -> None:
    model_dir = start_probe(args, result)
    measured = {}
    for engine in ("torch", "deepspeed"):
        folder = tempfile.mkdtemp(prefix=f"lora-{engine}-", dir=output_dir)
        measured[engine] = {"saved": _train_adapter(model_dir, engine, folder)}
        for dtype_name in ("bfloat16", "float32"):
            measured[engine][f"merge_{dtype_name}"] = round(_changed_by_merge(model_dir, folder, dtype_name), 4)
    result["adapters"] = measured
    torch_run, deepspeed_run = measured["torch"], measured["deepspeed"]
    if deepspeed_run["saved"] != "bfloat16" or torch_run["saved"] != "float32":
        raise ProbeFailed(f"the report's dtypes did not reproduce: {measured}")
    if deepspeed_run["merge_float32"] < 0.99 or torch_run["merge_bfloat16"] > 0.5:
        raise ProbeFailed(f"the bf16 merge kept most of the update, or the fp32 merge lost it: {measured}")
    result["summary"] = (
        f"DeepSpeed bf16 saves the LoRA in bf16 (torch: fp32); merged into the bf16 base, "
        f"{deepspeed_run['merge_bfloat16']:.1%} (DeepSpeed) and {torch_run['merge_bfloat16']:.1%} (torch) of the "
        f"weights change; into an fp32 base {deepspeed_run['merge_float32']:.1%} and {torch_run['merge_float32']:.1%}"
    )


def main(argv: list[str] | None = None) -> int:
    description = __doc__.splitlines()[0]
    return run_smoke("probe_lora_merge", parse_args(description, "unused (JSON value)", argv), probe)


if __name__ == "__main__":
    sys.exit(main())
