"""trl.launch-guard on the installed trl (KF-4): one process seeing 2 GPUs is refused before the model loads.

Two visible GPUs are faked on a CPU machine at transformers' own seam: ``torch.cuda.device_count``
returns 2 while the config is built (``is_available()`` stays False, so the device stays cpu), which
gives the real ``n_gpu == 2`` / ``ParallelMode.NOT_DISTRIBUTED`` of a plain ``python train.py``.
Model loading is observed through ``PreTrainedModel.from_pretrained``, which every load path calls.
"""

from __future__ import annotations

import importlib
import logging
import sys
from types import SimpleNamespace
from unittest import mock

import pytest

import grpo_compat
from grpo_compat.core.errors import GRPOCompatError, LaunchError
from grpo_compat.core.versions import release
from grpo_compat.testing.tiny_model import build_tiny_qwen2

PATCH = "trl.launch-guard"
ARGV = ["train.py", "--output_dir", "runs/my run", "--learning_rate=1e-5"]
ACCELERATE = "accelerate launch --num_processes 2 train.py --output_dir 'runs/my run' --learning_rate=1e-5"
TORCHRUN = "torchrun --nproc_per_node 2 train.py --output_dir 'runs/my run' --learning_rate=1e-5"
UPSTREAM_REFUSAL = "does not support `nn.DataParallel`"  # trl >= 1.15, raised after the model loaded


class ModelLoaded(Exception):
    pass


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(build_tiny_qwen2(tmp_path_factory.mktemp("tiny_qwen2")))


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch):
    for name in ("GRPO_COMPAT_SINGLE_GPU", "LOCAL_RANK", "RANK", "WORLD_SIZE", "ACCELERATE_USE_CPU"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "argv", list(ARGV))
    return monkeypatch


@pytest.fixture
def guarded(env):
    grpo_compat.revert()
    grpo_compat.apply(only=[PATCH])
    importlib.import_module("trl.trainer.grpo_trainer")  # applies the pending patch
    importlib.import_module("trl.trainer.sft_trainer")

    assert grpo_compat.report().status_of(PATCH) is grpo_compat.Status.APPLIED
    yield env
    grpo_compat.revert()


@pytest.fixture
def loads(env) -> list[str]:
    """Records every model load and stops it there, so nothing heavy runs."""
    from transformers.modeling_utils import PreTrainedModel

    calls: list[str] = []

    def from_pretrained(cls, path, *args, **kwargs):
        calls.append(str(path))
        raise ModelLoaded(path)

    env.setattr(PreTrainedModel, "from_pretrained", classmethod(from_pretrained))
    return calls


def reward(completions, **kwargs):
    return [float(len(str(c))) for c in completions]


def config(kind: str, gpus: int | None, tmp_path, **extra):
    """A real GRPOConfig / SFTConfig; gpus=None: honest CPU config (use_cpu=True)."""
    import torch
    from trl import GRPOConfig, SFTConfig

    cls = GRPOConfig if kind == "grpo" else SFTConfig
    settings = {"output_dir": str(tmp_path / "out"), "bf16": False, "report_to": "none", "max_steps": 1, **extra}
    if kind == "grpo":
        settings.update(per_device_train_batch_size=2, num_generations=2, max_completion_length=8)
    if gpus is None:
        return cls(**settings, use_cpu=True)
    with mock.patch.object(torch.cuda, "device_count", return_value=gpus):
        return cls(**settings)


def build(kind: str, model, args, positional: bool = False):
    from datasets import Dataset
    from trl import GRPOTrainer, SFTTrainer

    if kind == "grpo":
        data = Dataset.from_dict({"prompt": ["Question: 1 plus 2? Answer:"] * 4})
        if positional:
            return GRPOTrainer(model, reward, args, data)
        return GRPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=data)
    data = Dataset.from_dict({"text": ["the cat is red."] * 4})
    return (
        SFTTrainer(model, args, train_dataset=data) if positional else SFTTrainer(model, args=args, train_dataset=data)
    )


def test_fake_two_gpus_seam_gives_a_plain_data_parallel_config(env, tmp_path):
    from transformers.training_args import ParallelMode

    args = config("grpo", 2, tmp_path)
    assert (args.n_gpu, args.parallel_mode, args.world_size) == (2, ParallelMode.NOT_DISTRIBUTED, 1)
    assert args.device.type == "cpu"


@pytest.mark.parametrize("positional", [False, True], ids=["keyword-args", "positional-args"])
@pytest.mark.parametrize("kind", ["grpo", "sft"])
def test_refused_before_the_model_loads_with_the_exact_commands(guarded, loads, model_path, tmp_path, kind, positional):
    args = config(kind, 2, tmp_path)
    with pytest.raises(LaunchError) as refused:
        build(kind, model_path, args, positional)
    assert loads == [], "the guard must refuse before any model is loaded"
    message = str(refused.value)
    assert UPSTREAM_REFUSAL not in message
    assert isinstance(refused.value, GRPOCompatError) and isinstance(refused.value, RuntimeError)
    assert f"\n    {ACCELERATE}\n    {TORCHRUN}\n" in message
    assert ("GRPOTrainer" if kind == "grpo" else "SFTTrainer") in message
    assert "DataParallel" in message and "The size of tensor a (2) must match" in message
    assert "GRPO_COMPAT_SINGLE_GPU=1" in message
    assert args.n_gpu == 2


def test_commands_for_a_python_c_launch_name_a_placeholder_script(guarded):
    from grpo_compat.patches.trl.launch_guard import relaunch_commands

    guarded.setattr(sys, "argv", ["-c"])
    assert relaunch_commands(4) == [
        "accelerate launch --num_processes 4 your_training_script.py",
        "torchrun --nproc_per_node 4 your_training_script.py",
    ]


def test_single_gpu_opt_in_pins_n_gpu_to_one_and_warns(guarded, model_path, tmp_path, caplog):
    import torch

    guarded.setenv("GRPO_COMPAT_SINGLE_GPU", "1")
    args = config("grpo", 2, tmp_path)
    logger = logging.getLogger("grpo_compat")
    logger.addHandler(caplog.handler)  # the grpo_compat logger does not propagate to the root
    try:
        trainer = build("grpo", model_path, args)
    finally:
        logger.removeHandler(caplog.handler)
    assert trainer.args is args and args.n_gpu == 1 and args.train_batch_size == 2
    assert not isinstance(trainer._wrap_model(trainer.model_wrapped), torch.nn.DataParallel)
    warning = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and r.name == "grpo_compat"]
    assert len(warning) == 1
    assert "GRPO_COMPAT_SINGLE_GPU=1" in warning[0] and "the other 1 GPU(s) stay idle" in warning[0]
    assert ACCELERATE in warning[0]


def test_valid_cpu_runs_pass_through_untouched(guarded, model_path, tmp_path):
    args = config("grpo", None, tmp_path)
    assert args.n_gpu == 0
    trainer = build("grpo", model_path, args, positional=True)
    assert trainer.args is args and args.n_gpu == 0


@pytest.mark.parametrize("kind", ["grpo", "sft"])
def test_one_visible_gpu_reaches_the_model_load_untouched(guarded, loads, model_path, tmp_path, kind):
    args = config(kind, 1, tmp_path)
    with pytest.raises(ModelLoaded):
        build(kind, model_path, args)
    assert loads == [model_path] and args.n_gpu == 1


def test_distributed_and_model_parallel_runs_are_not_refused(guarded, tmp_path):
    from grpo_compat.patches.trl.launch_guard import data_parallel_gpus, guard_launch
    from transformers.training_args import ParallelMode

    assert data_parallel_gpus(SimpleNamespace(n_gpu=2, parallel_mode=ParallelMode.DISTRIBUTED)) == 0
    assert data_parallel_gpus(SimpleNamespace(n_gpu=2, parallel_mode=ParallelMode.NOT_DISTRIBUTED)) == 2
    assert data_parallel_gpus(None) == 0 and data_parallel_gpus(object()) == 0

    seen = []

    def init(self, model, args=None):  # upstream: Trainer sets n_gpu to 1 for a model split over GPUs
        seen.append(model)
        args._n_gpu = 1
        self.args = args

    split = SimpleNamespace(hf_device_map={"model.embed_tokens": 0, "lm_head": 1})
    args = config("sft", 2, tmp_path)
    guard_launch(init, SimpleNamespace(), split, args=args)
    assert seen == [split]


def test_settled_arguments_are_checked_after_init_when_none_were_passed(guarded):
    from grpo_compat.patches.trl.launch_guard import guard_launch
    from transformers.training_args import ParallelMode

    def init(self, model, args=None):  # upstream building its default arguments on a 2-GPU machine
        self.args = SimpleNamespace(n_gpu=2, parallel_mode=ParallelMode.NOT_DISTRIBUTED)

    with pytest.raises(LaunchError, match="Checked after the model loaded") as refused:
        guard_launch(init, SimpleNamespace(), "some/model")
    assert ACCELERATE in str(refused.value)


def test_a_device_map_that_keeps_the_model_on_one_device_is_refused_after_loading(guarded, model_path, tmp_path):
    import trl

    args = config("grpo", 2, tmp_path, model_init_kwargs={"device_map": "cpu"})
    expected = ValueError if release(trl.__version__) >= (1, 15) else LaunchError
    with pytest.raises(expected) as refused:  # trl >= 1.15 refuses after the load itself, before us
        build("grpo", model_path, args)
    late = "Checked after the model loaded: TRL built the arguments (args=None) or the model's device_map"
    assert (UPSTREAM_REFUSAL in str(refused.value), late in str(refused.value)) == (
        expected is ValueError,
        expected is LaunchError,
    )


@pytest.mark.parametrize("kind", ["grpo", "sft"])
def test_revert_restores_upstream_behaviour(guarded, loads, model_path, tmp_path, kind):
    from trl import GRPOTrainer, SFTTrainer

    grpo_compat.revert()
    assert not hasattr(GRPOTrainer.__init__, "__grpo_compat_patch__")
    assert not hasattr(SFTTrainer.__init__, "__grpo_compat_patch__")
    with pytest.raises(ModelLoaded):  # unguarded: the model loads first
        build(kind, model_path, config(kind, 2, tmp_path))
    assert loads == [model_path]
