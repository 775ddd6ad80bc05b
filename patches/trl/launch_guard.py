"""Refuse a plain `python` launch that would train with DataParallel over several GPUs, before the model loads.

Symptom:   on a machine with more than one visible GPU, `python train.py` (no launcher) makes Trainer
           wrap the model in torch.nn.DataParallel: "The size of tensor a (2) must match the size of
           tensor b (4) at non-singleton dimension 0" in SFTTrainer.compute_loss, or, with per-device
           batch 1, no error at all and training on 1/n_gpu of the data (transformers 4.51-4.56).
Upstream:  huggingface/trl#3392, #3344 (KF-4).
Versions:  trl >= 0.14 (every version with GRPO). trl >= 1.15 refuses `args.n_gpu > 1` itself, but
           only after the model has loaded, and without the command that would work.
Remove when: the oldest supported trl refuses this launch before loading the model, naming the command.

Checked before upstream __init__, on the `args` passed in (found by parameter name). With args=None
TRL builds its defaults while loading the model, and a path loaded with a `device_map` may end up
split over GPUs (Trainer allows that: n_gpu 1); both are checked on trainer.args after __init__.
`args.local_rank` is no signal: transformers 4.x sets it to 0 in a plain process, 5.x keeps -1.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from grpo_compat.core.errors import LaunchError
from grpo_compat.core.registry import patch
from grpo_compat.fixes.detectors import trl_grpo_trainer_init_present

SINGLE_GPU_ENV = "GRPO_COMPAT_SINGLE_GPU"


def data_parallel_gpus(args: Any) -> int:
    """The GPU count Trainer would give nn.DataParallel (one process, several GPUs), else 0."""
    try:
        n_gpu, mode = int(args.n_gpu), args.parallel_mode
    except Exception:  # noqa: BLE001 - None, or arguments that are not TrainingArguments: not ours to judge
        return 0
    return n_gpu if n_gpu > 1 and str(getattr(mode, "value", mode)) == "not_distributed" else 0


def _placed_by_device_map(model: Any, args: Any) -> bool:
    """A model split over devices (Trainer then sets n_gpu to 1), or a path to be loaded with a device_map."""
    if isinstance(model, str):
        init_kwargs = getattr(args, "model_init_kwargs", None)
        return isinstance(init_kwargs, dict) and init_kwargs.get("device_map") is not None
    if getattr(model, "is_parallelizable", False) and getattr(model, "model_parallel", False):
        return True
    device_map = getattr(model, "hf_device_map", None)
    return isinstance(device_map, dict) and len(set(device_map.values()) - {"cpu", "disk"}) > 1


def relaunch_commands(n_gpu: int) -> list[str]:
    """This very invocation (sys.argv) under `accelerate launch` and `torchrun`, one process per GPU."""
    argv = list(sys.argv) or [""]
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and os.path.abspath(getattr(main, "__file__", None) or "") == os.path.abspath(argv[0]):
        script = ["-m", spec.name.removesuffix(".__main__")]  # started as `python -m package.module`
    else:
        script = [argv[0] if argv[0] not in ("", "-c") else "your_training_script.py"]
    import shlex  # here, not at the top: apply() imports this module and must stay cheap

    launchers = (["accelerate", "launch", "--num_processes"], ["torchrun", "--nproc_per_node"])
    return [shlex.join([*launcher, str(n_gpu), *script, *argv[1:]]) for launcher in launchers]


def launch_message(trainer: str, n_gpu: int, late: bool = False) -> str:
    accelerate, torchrun = relaunch_commands(n_gpu)
    single = f"set {SINGLE_GPU_ENV}=1 (or CUDA_VISIBLE_DEVICES=0)"
    if late:  # the opt-in needs the arguments before __init__, when batch sizes are derived from n_gpu
        single = (
            f"set CUDA_VISIBLE_DEVICES=0 (or pass args= to {trainer} and set {SINGLE_GPU_ENV}=1). Checked after "
            "the model loaded: TRL built the arguments (args=None) or the model's device_map decided the placement"
        )
    return (
        f"{trainer} runs in a single process that sees {n_gpu} GPUs (started without `accelerate launch` "
        "or `torchrun`), so transformers' Trainer would wrap the model in torch.nn.DataParallel. With TRL that "
        'silently trains on a fraction of the data, or crashes with "The size of tensor a (2) must match the '
        'size of tensor b (4) at non-singleton dimension 0" (huggingface/trl#3392, #3344). '
        f"Start one process per GPU instead:\n    {accelerate}\n    {torchrun}\n"
        f"Or, to train on one GPU and leave the others idle, {single}."
    )


def _single_gpu_opted_in() -> bool:
    return os.environ.get(SINGLE_GPU_ENV, "").strip().lower() in ("1", "true", "yes", "on")


@patch(
    id="trl.launch-guard",
    catalogue="dataparallel-plain-python",
    requires="trl>=0.14",
    targets=("trl.trainer.grpo_trainer:GRPOTrainer.__init__", "trl.trainer.sft_trainer:SFTTrainer.__init__"),
    expects=("self", "model", "args"),
    detect=trl_grpo_trainer_init_present,
)
def guard_launch(wrapped: Any, *call_args: Any, **call_kwargs: Any) -> Any:
    from grpo_compat.core.wrapping import bound_arguments  # inspect: only once trl is loaded

    bound = bound_arguments(wrapped, *call_args, **call_kwargs)
    if not bound:
        return wrapped(*call_args, **call_kwargs)  # a bad call: upstream's own error says what is wrong
    trainer, args = bound.get("self"), bound.get("args")
    name = type(trainer).__name__
    n_gpu = data_parallel_gpus(args)
    if n_gpu and not _placed_by_device_map(bound.get("model"), args):
        if not _single_gpu_opted_in():
            raise LaunchError(launch_message(name, n_gpu))
        from grpo_compat.core.logs import log

        args._n_gpu = 1  # what Trainer itself does for model-parallel models: no DataParallel
        log(
            "warning",
            "%s=1: %s trains on one GPU instead of wrapping the model in DataParallel over %d; "
            "the other %d GPU(s) stay idle. To use them all: %s",
            SINGLE_GPU_ENV,
            name,
            n_gpu,
            n_gpu - 1,
            relaunch_commands(n_gpu)[0],
        )
    result = wrapped(*call_args, **call_kwargs)
    n_gpu = data_parallel_gpus(getattr(trainer, "args", None))  # the arguments TRL settled on
    if n_gpu:
        raise LaunchError(launch_message(name, n_gpu, late=True))
    return result
