"""The ground truth of an installed set: import the GRPO trainer the stack uses, recording every module the import
reaches that is missing, then construct the trainer and run one GRPO step on the tiny local Qwen2 (no Hub).

    python -m grpo_compat.testing.trainer_probe --trainer trl [--settings '{"loss_type": "dapo"}']

prints one JSON object (the last line of its output). ``grpo-compat doctor --prove`` runs it in a subprocess of the
interpreter it checks: the probe imports trl / ms-swift, which the doctor itself never does.

The import is repeated until it completes: each module that is missing and not guarded (its ModuleNotFoundError
reaches the top) is recorded and stood in for by an empty module, and each name a module lacks (``from M import
x``) by an empty class, so the next attempt goes past it. A guarded import (``try: ... except ImportError``) never
reaches the top, so it is never recorded nor stood in for: the probe lists what stops the import, in the order the
import meets it. Plain upstream: grpo_compat.apply() is not called.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import re
import sys
import tempfile
import time
import traceback
from typing import Any

STACKS = ("trl", "ms-swift")
MAX_ATTEMPTS = 40  # each attempt stands in for one more missing module or name
CANNOT_IMPORT_NAME = re.compile(r"cannot import name '([^']+)' from '([^']+)'")


class _StandInLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: Any) -> None:
        module.__getattr__ = _stand_in_attribute(module.__name__)  # type: ignore[attr-defined]


def _stand_in_attribute(module_name: str) -> Any:
    def stand_in(attribute: str) -> Any:
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        return stand_in_class(attribute, module_name)

    return stand_in


class _StandInType(type):
    """A stand-in class's own attributes are stand-ins too (``StatelessProcessGroup.create``): what the import does
    with a missing module's names goes on, and stops only on what the installed code itself lacks."""

    def __getattr__(cls, attribute: str) -> Any:
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        return stand_in_class(attribute, cls.__module__)


def stand_in_class(name: str, module_name: str) -> type:
    """An empty class that takes any arguments and subscripts (``Foo[int]``): what a missing name becomes."""
    return _StandInType(name, (), {
        "__module__": module_name, "__init__": lambda self, *args, **kwargs: None,
        "__class_getitem__": classmethod(lambda cls, item: cls),
    })  # fmt: skip


class MissingModules(importlib.abc.MetaPathFinder):
    """A finder placed last on sys.meta_path: an empty package for each module stood in for (and its submodules)."""

    def __init__(self) -> None:
        self.stood_in: list[str] = []

    def stands_in(self, name: str) -> bool:
        return any(name == missing or name.startswith(missing + ".") for missing in self.stood_in)

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if not self.stands_in(name):
            return None
        return importlib.util.spec_from_loader(name, _StandInLoader(), is_package=True)


def _importer(error: BaseException) -> str:
    """Where the failing import statement is: the module and line of the last frame outside importlib."""
    where = ""
    for frame, line in traceback.walk_tb(error.__traceback__):
        if not frame.f_code.co_filename.startswith("<frozen"):
            where = f"{frame.f_globals.get('__name__', frame.f_code.co_filename)}:{line}"
    return where


def describe(error: BaseException) -> dict[str, str]:
    return {"type": type(error).__name__, "message": str(error).strip()[:2000], "where": _importer(error)}


def import_recording(module: str, attribute: str) -> tuple[list[dict[str, str]], dict[str, str] | None, Any]:
    """Import ``module.attribute`` until it completes: (what was missing, in order; the error that stopped it, if
    another kind; the object, or None). Each entry: kind (missing-module, missing-name), name, module, where."""
    recorder = MissingModules()
    sys.meta_path.append(recorder)
    missing: list[dict[str, str]] = []
    for _ in range(MAX_ATTEMPTS):
        try:
            return missing, None, getattr(importlib.import_module(module), attribute)
        except ModuleNotFoundError as error:
            if not error.name or recorder.stands_in(error.name):
                return missing, describe(error), None
            missing.append({"kind": "missing-module", "name": error.name, "where": _importer(error)})
            recorder.stood_in.append(error.name)
        except ImportError as error:
            found = CANNOT_IMPORT_NAME.search(str(error))
            owner = sys.modules.get(found.group(2)) if found else None
            if found is None or owner is None or recorder.stands_in(found.group(2)):
                return missing, describe(error), None
            name = found.group(1)
            missing.append({"kind": "missing-name", "name": f"{found.group(2)}.{name}", "where": _importer(error)})
            setattr(owner, name, stand_in_class(name, found.group(2)))
        except Exception as error:  # noqa: BLE001 - whatever stops the import is the probe's answer
            return missing, describe(error) | ({"after_stand_ins": True} if missing else {}), None
    gave_up = {"type": "RecursionError", "message": f"still failing after {MAX_ATTEMPTS} attempts", "where": ""}
    return missing, gave_up, None


# -- one GRPO step ----------------------------------------------------------------------------------------------------

# What the probe sets whatever the user's config says: one small step on this machine's CPU, nothing saved or logged
# anywhere, no generation server (vLLM on CPU is a run of its own: the matrix's vllm cells).
PROBE_SETTINGS: dict[str, Any] = dict(
    max_steps=1, per_device_train_batch_size=4, num_generations=4, gradient_accumulation_steps=1,
    max_completion_length=8, bf16=False, fp16=False, use_cpu=True, logging_steps=1, save_strategy="no",
    report_to="none", disable_tqdm=True, use_vllm=False, deepspeed=None, push_to_hub=False, eval_strategy="no",
    generation_batch_size=None, steps_per_generation=None,
)  # fmt: skip
# Settings of a user's config that name things of their machine: the probe's own model, data and folder stand in.
NOT_CARRIED = ("model_name_or_path", "dataset_name", "output_dir", "hub_model_id", "logging_dir", "run_name")


def grpo_settings(config_class: type, config: dict[str, Any], output_dir: str) -> tuple[dict[str, Any], list[str]]:
    """GRPOConfig's keywords for the probe: the user's settings this trl has, then PROBE_SETTINGS; and the user's
    settings it left out (this trl lacks them, or they name the user's machine)."""
    import dataclasses

    fields = {field.name for field in dataclasses.fields(config_class)}
    kept = {k: v for k, v in config.items() if k in fields and k not in NOT_CARRIED}
    kept.update({k: v for k, v in PROBE_SETTINGS.items() if k in fields}, output_dir=output_dir)
    return kept, sorted(k for k in config if k not in kept or k in PROBE_SETTINGS)


def train_one_step(trainer_class: Any, config: dict[str, Any], result: dict[str, Any]) -> None:
    import transformers
    from datasets import Dataset
    from trl import GRPOConfig

    from grpo_compat.testing.smoke import length_reward, prompt_texts
    from grpo_compat.testing.tiny_model import build_tiny_qwen2

    result["phase"] = "model"
    folder = os.path.join(tempfile.gettempdir(), f"grpo_compat_tiny_qwen2_tf{transformers.__version__}")
    model_dir = build_tiny_qwen2(folder)
    with tempfile.TemporaryDirectory(prefix="grpo_compat_prove_") as output_dir:
        result["phase"] = "config"
        keywords, result["settings_not_used"] = grpo_settings(GRPOConfig, config, output_dir)
        arguments = GRPOConfig(**keywords)
        result["phase"] = "trainer"
        trainer = trainer_class(
            model=str(model_dir),
            reward_funcs=length_reward,
            args=arguments,
            train_dataset=Dataset.from_dict({"prompt": prompt_texts()}),
        )
        result["phase"] = "step"
        started = time.perf_counter()
        trainer.train()
        result["step_s"] = round(time.perf_counter() - started, 2)
        result["steps"] = trainer.state.global_step


# ms-swift's step: the pipeline `swift rlhf` runs (SwiftRLHF(argv).main(), i.e. rlhf_main), on the tiny Qwen2 with
# its model type and chat template (a local folder does not tell swift them), one process on the CPU, fp32.
SWIFT_PROBE_SETTINGS: dict[str, Any] = dict(
    rlhf_type="grpo", model_type="qwen2", template="qwen2_5", torch_dtype="float32", check_model=False,
    split_dataset_ratio=0, add_version=False, max_steps=1, per_device_train_batch_size=4, num_generations=4,
    gradient_accumulation_steps=1, max_completion_length=8, logging_steps=1, save_strategy="no", report_to="none",
    dataloader_num_workers=0, dataloader_persistent_workers=False, dataset_num_proc=1, eval_strategy="no",
)  # fmt: skip
# dataloader_persistent_workers: persistent workers need workers; ms-swift 4.5.3 defaults it to True and, unlike 4.6,
# does not turn it off without them (torch: "persistent_workers option needs num_workers > 0")
# Left at ms-swift's defaults (no generation server, no DeepSpeed: a command line cannot say None) or the probe's own.
SWIFT_NOT_CARRIED = ("model", "dataset", "val_dataset", "reward_funcs", "external_plugins", "use_vllm", "vllm_mode",
                     "deepspeed", *NOT_CARRIED)  # fmt: skip
SWIFT_REWARD = "grpo_compat_probe_length"


def swift_api() -> tuple[Any, Any, Any, Any]:
    """(the `swift rlhf` pipeline class, RLHFArguments, ORM, the reward registry) of ms-swift 4.x, else 3.x."""
    if importlib.util.find_spec("swift.pipelines"):  # ms-swift 4.x layout
        from swift.arguments import RLHFArguments
        from swift.pipelines.train.rlhf import SwiftRLHF
        from swift.rewards import ORM, orms
    else:
        from swift.llm import RLHFArguments
        from swift.llm.train.rlhf import SwiftRLHF
        from swift.plugin import ORM, orms
    return SwiftRLHF, RLHFArguments, ORM, orms


def swift_argv(arguments_class: type, config: dict[str, Any], model_dir: str, dataset: str, output_dir: str
               ) -> tuple[list[str], list[str]]:  # fmt: skip
    """`swift rlhf`'s command line for the probe: the user's settings this ms-swift has, then SWIFT_PROBE_SETTINGS
    with the probe's model, data, reward and folder; and the user's settings it left out."""
    import dataclasses

    fields = {field.name for field in dataclasses.fields(arguments_class)}
    tuner = "tuner_type" if "tuner_type" in fields else "train_type"  # renamed in ms-swift 4.0
    users = {k: v for k, v in config.items() if k in fields and k not in SWIFT_NOT_CARRIED}
    probes = {k: v for k, v in SWIFT_PROBE_SETTINGS.items() if k in fields}
    probes.update({tuner: "full", "model": model_dir, "dataset": dataset, "reward_funcs": SWIFT_REWARD})
    kept = {**users, **probes, "output_dir": output_dir}
    argv = []
    for key, value in kept.items():
        values = value if isinstance(value, list) else [value]
        argv += [f"--{key}", *(str(v).lower() if isinstance(v, bool) else str(v) for v in values)]
    return argv, sorted(k for k in config if k not in users or k in probes)


def train_one_swift_step(config: dict[str, Any], result: dict[str, Any]) -> None:
    """One GRPO step through ms-swift's own pipeline, as `swift rlhf --rlhf_type grpo --max_steps 1` runs it."""
    import transformers

    from grpo_compat.testing.smoke import length_reward, prompt_texts, swift_reward_class
    from grpo_compat.testing.tiny_model import build_tiny_qwen2

    result["phase"] = "model"
    folder = os.path.join(tempfile.gettempdir(), f"grpo_compat_tiny_qwen2_tf{transformers.__version__}")
    model_dir = build_tiny_qwen2(folder)
    pipeline_class, arguments_class, orm, orms = swift_api()
    orms[SWIFT_REWARD] = swift_reward_class(orm, length_reward, "ProbeLengthReward")
    with tempfile.TemporaryDirectory(prefix="grpo_compat_prove_") as output_dir:
        dataset = os.path.join(output_dir, "prompts.jsonl")
        with open(dataset, "w", encoding="utf-8") as handle:
            handle.writelines(json.dumps({"messages": [{"role": "user", "content": text}]}) + "\n"
                              for text in prompt_texts())  # fmt: skip
        result["phase"] = "config"
        argv, result["settings_not_used"] = swift_argv(arguments_class, config, str(model_dir), dataset, output_dir)
        pipeline = pipeline_class(argv)  # parses and checks the arguments, loads the model and the reference model
        result["phase"] = "trainer"
        swift_train = pipeline.train

        def train(trainer: Any) -> Any:
            result["phase"] = "step"
            started = time.perf_counter()
            try:
                return swift_train(trainer)
            finally:
                result["step_s"] = round(time.perf_counter() - started, 2)
                result["steps"] = trainer.state.global_step

        pipeline.train = train
        pipeline.main()
    if not result.get("steps"):
        raise RuntimeError(f"ms-swift's pipeline ended after {result.get('steps', 0)} steps (in its {result['phase']} "
                           "phase)")  # fmt: skip


def probe(stack: str, config: dict[str, Any]) -> dict[str, Any]:
    """The probe's result: trains (bool), phase, missing (in order), error; see the module's docstring."""
    result: dict[str, Any] = {"stack": stack, "trains": False, "phase": "import", "missing": [], "error": None}
    started = time.perf_counter()
    entry = trainer_entry(stack)
    result["trainer"] = ".".join(entry)
    result["missing"], result["error"], trainer_class = import_recording(*entry)
    result["import_s"] = round(time.perf_counter() - started, 2)
    if trainer_class is None or result["missing"]:
        return result
    try:
        if stack == "trl":
            train_one_step(trainer_class, config, result)
        else:  # ms-swift builds its trainer itself, in the pipeline `swift rlhf` runs
            train_one_swift_step(config, result)
        result["trains"], result["phase"] = True, "trained"
    except (Exception, SystemExit) as error:  # noqa: BLE001 - the failure is the probe's answer
        result["error"] = describe(error)
    return result


def trainer_entry(stack: str) -> tuple[str, str]:
    """(module, class) of the stack's GRPO trainer in this set, found by the static check's file lookup (importing
    nothing: ms-swift 4's module, else 3.x's)."""
    from grpo_compat.static_check import SWIFT_TRAINER_3X, TRAINER_CLASSES
    from grpo_compat.static_check.files import Install

    entry = TRAINER_CLASSES[stack]
    if stack == "ms-swift" and Install().find(entry[0]) is None:
        return SWIFT_TRAINER_3X
    return entry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trainer", choices=STACKS, required=True)
    parser.add_argument("--settings", default="{}", help="GRPOConfig settings as a JSON object (a user's config)")
    args = parser.parse_args(argv)
    config = json.loads(args.settings)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("MODELSCOPE_OFFLINE", "1")
    result = probe(args.trainer, config)
    sys.stdout.flush()
    print("\n" + json.dumps(result, default=str), flush=True)
    return 0 if result["trains"] else 1


if __name__ == "__main__":
    sys.exit(main())
