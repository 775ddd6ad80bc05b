"""`grpo-compat matrix init DIR`: a starter cells file and a starter entry point for a user's own matrix.

DIR/grpo-matrix.toml    cells: the versions installed here, the newest releases, a release era (--era)
DIR/grpo_smoke.py       a two-step GRPO run on a tiny model built locally: replace it with your own script
"""

from __future__ import annotations

from pathlib import Path

from grpo_compat.core.versions import GRPO_COMPAT_VERSION, installed_version
from grpo_compat.matrix.entries import RESULT_KEYS

CELLS_NAME = "grpo-matrix.toml"
SCRIPT_NAME = "grpo_smoke.py"
# What a starter cell pins, in this order; the newest cell takes each at its newest release.
DISTRIBUTIONS = ("torch", "trl", "transformers", "accelerate", "datasets", "deepspeed", "peft", "ms-swift")
# Where a machine without an NVIDIA GPU gets torch: PyPI's Linux torch is the CUDA build (several GB).
CPU_TORCH_INDEX = "https://download.pytorch.org/whl/cpu"


def _torch_index(gpu: bool) -> str:
    """The cells' torch_index line: PyTorch's CPU index where no NVIDIA GPU is found (else PyPI's torch)."""
    return "" if gpu else f'torch_index = "{CPU_TORCH_INDEX}"   # no NVIDIA GPU here: torch\'s CPU build\n'


def _pins(versions: dict[str, str]) -> str:
    return "".join(f'{name} = "{version}"\n' for name, version in versions.items())


def _current_cell(current: dict[str, str], torch_index: str) -> str:
    if "torch" in current and ("trl" in current or "ms-swift" in current):
        return f"""[cells.current]
description = "the versions installed where `grpo-compat matrix init` ran"
{_pins(current)}{torch_index}"""
    return """# [cells.current] is left out: torch and trl (or ms-swift) were not installed where
# `grpo-compat matrix init` ran. Run it in your training environment, or pin your versions here:
# [cells.current]
# torch = "2.13.0"
# trl = "1.16.0"
"""


def cells_text(era: str | None, gpu: bool | None = None) -> str:
    """The starter cells file; ``gpu``: whether this machine has an NVIDIA GPU (default: looked up)."""
    from grpo_compat.core.versions import nvidia_gpu_present

    torch_index = _torch_index(nvidia_gpu_present() if gpu is None else gpu)
    installed = {name: installed_version(name) for name in DISTRIBUTIONS}
    # A local label (torch's "+cpu") names a build, not a release: the cell's index picks the build.
    current = {name: version.split("+")[0] for name, version in installed.items() if version}
    newest = dict.fromkeys(("torch", "trl", "transformers", "accelerate"), "newest")
    result_keys = "".join(f"#   {key}: {meaning}\n" for key, meaning in RESULT_KEYS.items())
    text = f"""\
# grpo_compat matrix: each cell is one environment (exact pins, built with uv); each entry runs in every
# cell twice, plainly and with grpo_compat (the `grpo-compat run` zero-code hook, or swift's plugin).
#
#   grpo-compat matrix run --cells-file {CELLS_NAME} --junit results/junit.xml
#   grpo-compat matrix workflow --cells-file {CELLS_NAME}      # a GitHub Actions workflow running it nightly

# Where cell envs get grpo_compat. Left out: the grpo_compat running `grpo-compat matrix run` (its installed
# files, or its checkout), so no package index needs to hold it. Or name one: a requirement
# ("grpo-compat=={GRPO_COMPAT_VERSION}", "grpo-compat @ git+https://...") or a wheel / project folder (relative to
# this file). `grpo-compat matrix workflow` installs the same in CI.
# grpo_compat = "grpo-compat=={GRPO_COMPAT_VERSION}"

# What each cell runs. An entry names one of:
#   script = "train.py"            a Python script, run with the cell's interpreter (args = [...] after it)
#   trl_config = "grpo.yaml"       `trl grpo --config grpo.yaml`
#   swift_args = ["--rlhf_type", "grpo", ...]   `swift rlhf ...` (patched: with grpo_compat's plugin)
# processes = 2 starts a script under `accelerate launch` (launcher = "torchrun" for torchrun), or sets
# NPROC_PER_NODE for swift. timeout_s bounds a run (default 1800). env = {{ KEY = "value" }} adds variables.
# A run passes when it exits 0. A script may write a JSON object to $GRPO_COMPAT_MATRIX_RESULT with:
{result_keys}# ($GRPO_COMPAT_MATRIX_MODE says plain or patched; $GRPO_COMPAT_MATRIX_SCRATCH is a folder for outputs.)
[entries.smoke]
script = "{SCRIPT_NAME}"
args = []

# A cell pins each distribution to an exact version, or to "newest" (resolved when the cell runs, so a
# nightly job sees an upstream release the day it comes out; prereleases = true lets it pick a pre-release).
# exclude_newer = "YYYY-MM-DD" keeps indirect dependencies (numpy, pyarrow, ...) in the pins' release era.
# device = "cuda" runs the cell on a GPU machine; extra = ["pkg==1.0"] adds packages; processes = 2 runs
# every script and swift entry of the cell in 2 processes. torch_index = URL: an index searched beside PyPI
# for torch's build (PyTorch's CPU index on a machine without an NVIDIA GPU; the best match of both is taken).

{_current_cell(current, torch_index)}
[cells.newest]
description = "the newest releases: breaks when an upstream release breaks your training"
{_pins(newest)}{torch_index}"""
    if era:
        text += f"""
[cells."era-{era}"]
description = "the newest releases as of {era} (torch stays at today's: it is exempt from the date)"
{_pins({"torch": current.get("torch", "newest"), "trl": "newest", "transformers": "newest", "accelerate": "newest"})}\
{torch_index}exclude_newer = "{era}"
"""
    return text


SCRIPT_TEXT = '''\
"""A two-step GRPO run on a tiny model built locally (no Hub): the matrix's starter entry point.

Replace it with your own training script. Under `grpo-compat matrix run`, $GRPO_COMPAT_MATRIX_RESULT names a
file where a script may report its weights (see the cells file), so a patched run is compared with the plain one.
"""

import hashlib
import json
import os
import tempfile
from pathlib import Path

import torch
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from grpo_compat.testing.tiny_model import build_tiny_qwen2


def length_reward(completions, **kwargs):
    return [-abs(20 - len(completion)) / 20 for completion in completions]


def main():
    scratch = Path(os.environ.get("GRPO_COMPAT_MATRIX_SCRATCH") or tempfile.mkdtemp())
    model = build_tiny_qwen2(scratch / "tiny-model")
    prompts = Dataset.from_dict({"prompt": [f"Count to {n}:" for n in range(8)]})
    config = GRPOConfig(
        output_dir=str(scratch / "out"),
        max_steps=2,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=8,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        seed=0,
        use_cpu=not torch.cuda.is_available(),  # newer trl defaults to bf16, which CPUs refuse
        bf16=torch.cuda.is_available() and torch.cuda.is_bf16_supported(),
    )
    trainer = GRPOTrainer(model=str(model), reward_funcs=length_reward, args=config, train_dataset=prompts)
    before = {name: tensor.clone() for name, tensor in trainer.model.state_dict().items()}
    trainer.train()
    after = trainer.model.state_dict()
    digest = hashlib.sha256()
    for name in sorted(after):
        digest.update(name.encode() + after[name].detach().cpu().float().numpy().tobytes())
    result = {
        "weights_sha256": digest.hexdigest(),
        "weights_changed": any(not torch.equal(before[name], after[name]) for name in after),
    }
    if os.environ.get("GRPO_COMPAT_MATRIX_RESULT") and trainer.accelerator.is_main_process:
        Path(os.environ["GRPO_COMPAT_MATRIX_RESULT"]).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
'''


def write_starter(folder: Path, era: str | None = None, force: bool = False) -> list[Path]:
    """Write the starter files into ``folder``; existing ones only with ``force``. Their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {folder / CELLS_NAME: cells_text(era), folder / SCRIPT_NAME: SCRIPT_TEXT}
    existing = [path for path in files if path.exists()]
    if existing and not force:
        raise FileExistsError(f"{', '.join(map(str, existing))} exist(s): --force overwrites")
    for path, text in files.items():
        path.write_text(text)
    return list(files)
