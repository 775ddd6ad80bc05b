"""A few GRPO steps through the real `swift rlhf` command line, with grpo_compat's plugin; writes a JSON result.

    python -m matrix.smoke_swift_cli --mode plain --steps 3 --output plain.json
    python -m matrix.smoke_swift_cli --mode patched --nproc 2 --output patched.json
    python -m matrix.smoke_swift_cli --mode patched --set num_generations=1 --output refused.json
    python -m matrix.smoke_swift_cli --mode patched --activation run --nproc 2 --output zero_code.json

The command-line counterpart of smoke_swift.py, with the same CLI and result fields. It launches the
`swift` console script of this Python's env, as users do (ms-swift starts its own processes: one,
or one per rank with `--nproc N`, i.e. NPROC_PER_NODE). "patched" adds grpo_compat's plugin file
(`grpo-compat plugin-path`) to `--external_plugins`; both modes pass a second plugin written here,
as a user's own: it registers the reward function and a callback, and records per rank what the run
did (`phase`: config, model or train, i.e. whether the model had started loading when a run failed).
Weights are compared between the tiny model's checkpoint and the checkpoint swift saves.

A run that trains must also show, or it is reported as an error: the second plugin's reward in the
logged metrics; patched, grpo_compat applied and its learning watchdog among the trainer's
callbacks on every rank, and its report logged exactly once; plain, no report at all.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from grpo_compat.core.report import ONE_LINE_MARK
from grpo_compat.core.versions import installed_version, release
from grpo_compat.matrix.launchers import error_of
from grpo_compat.testing.smoke import digest, free_port, last_logged, parse_args, run_launcher, run_smoke, tiny_model
from matrix.smoke_swift import REWARD_NAME, as_argv, swift_arguments, write_dataset

REWARD_CLASS = "SmokeLengthReward"
CALLBACK_NAME = "grpo_compat_smoke_probe"
WATCHDOG_CALLBACK = "LearningWatchdog"  # patches/trl/learning_watchdog.py
PROBE_DIR_ENV = "GRPO_COMPAT_SMOKE_PROBE_DIR"
REWARD_ENV = "GRPO_COMPAT_SMOKE_REWARD"
TIMEOUT_S = 600
# The user's second plugin: what a ms-swift user writes for a custom reward, plus this script's probes.
USER_PLUGIN = '''
"""A user's own ms-swift plugin: a reward function and a callback (the smoke run's probes)."""
import importlib.util
import json
import os
import sys
from pathlib import Path

from transformers import PreTrainedModel, TrainerCallback

from grpo_compat.testing.smoke import REWARDS, swift_reward_class

if importlib.util.find_spec("swift.rewards") is not None:  # ms-swift 4.x
    from swift.callbacks import callbacks_map
    from swift.rewards import ORM, orms
else:  # 3.x
    from swift.plugin import ORM, extra_callbacks, orms

PROBES = Path(os.environ["PROBE_DIR_ENV"])
RANK = os.environ.get("RANK", "0")


def record(event, **values):
    (PROBES / f"{event}.{RANK}.json").write_text(json.dumps(values, default=str))


def grpo_compat_state():
    module = sys.modules.get("grpo_compat")
    report = module.report() if module is not None else None
    return {"active": bool(report and report.active), "report": report.to_dict() if report else None}


# Its __call__ takes **kwargs exactly when the smoke reward does (--reward no-kwargs: it does not).
orms["REWARD_NAME"] = swift_reward_class(ORM, REWARDS[os.environ.get("REWARD_ENV", "length")], "REWARD_CLASS")
record("plugin", grpo_compat_active=grpo_compat_state()["active"])  # ours comes first when passed

# When the model starts loading: a run refused before this never loaded it.
_from_pretrained = PreTrainedModel.from_pretrained.__func__


def from_pretrained(cls, *args, **kwargs):
    if not (PROBES / f"model.{RANK}.json").exists():
        record("model", model_class=cls.__name__)
    return _from_pretrained(cls, *args, **kwargs)


PreTrainedModel.from_pretrained = classmethod(from_pretrained)


class SmokeProbe(TrainerCallback):
    def __init__(self, *args, **kwargs):  # ms-swift 4.x builds it as cls(args, trainer)
        pass

    def on_train_begin(self, args, state, control, **kwargs):
        handler = sys._getframe(1).f_locals.get("self")  # transformers' CallbackHandler.call_event
        callbacks = [type(c).__name__ for c in getattr(handler, "callbacks", [])]
        record("train_begin", callbacks=callbacks, grpo_compat=grpo_compat_state())

    def on_train_end(self, args, state, control, **kwargs):
        record("train_end", global_step=state.global_step, log_history=state.log_history)


if importlib.util.find_spec("swift.rewards") is not None:
    callbacks_map["CALLBACK_NAME"] = SmokeProbe
else:
    extra_callbacks.append(SmokeProbe())
'''


def user_plugin_source() -> str:
    names = {
        "PROBE_DIR_ENV": PROBE_DIR_ENV,
        "REWARD_ENV": REWARD_ENV,
        "REWARD_CLASS": REWARD_CLASS,
        "REWARD_NAME": REWARD_NAME,  # the in-process smoke's reward name: one reward for both kinds of run
        "CALLBACK_NAME": CALLBACK_NAME,
    }
    source = USER_PLUGIN
    for name, value in names.items():
        source = source.replace(name, value)
    return source.lstrip()


def swift_argv(model_dir: Path, dataset: Path, output_dir: Path, args: argparse.Namespace) -> list[str]:
    swift4 = release(installed_version("ms-swift") or "4") >= (4,)
    wanted = swift_arguments(model_dir, dataset, output_dir, args, "tuner_type" if swift4 else "train_type")
    wanted.update(
        per_device_train_batch_size=4 if args.nproc == 1 else 2,
        save_strategy="steps",  # one checkpoint, after the last step: the trained weights
        save_steps=args.steps,
        save_only_model=True,
        eval_strategy="no",  # else swift evaluates every save_steps, on a split it does not have
    )
    if args.nproc > 1 and args.device == "cpu":
        # Without it transformers sees no distributed CPU launch and trains with world_size 1 per rank.
        wanted["use_cpu"] = True
    if swift4:
        wanted["callbacks"] = CALLBACK_NAME  # 4.x selects plugin callbacks by name; 3.x adds every one
    wanted.update(args.config_overrides)
    return [arg for key, value in wanted.items() for arg in as_argv(key, value)]


def grpo_compat_plugin() -> str:
    # The console script, as users call it: `--external_plugins "$(grpo-compat plugin-path)"`.
    script = Path(sys.executable).parent / "grpo-compat"
    found = subprocess.run([str(script), "plugin-path"], capture_output=True, text=True, check=True)
    return found.stdout.strip()


class SwiftFailed(Exception):
    """`swift rlhf` failed (the message starts with the exception a rank raised), or broke a promise."""


def probes(folder: Path, event: str) -> dict[str, dict]:
    return {path.suffixes[-2][1:]: json.loads(path.read_text()) for path in sorted(folder.glob(f"{event}.*.json"))}


def saved_weights_change(model_dir: Path, output_dir: Path) -> dict[str, Any]:
    """Every tensor of the saved checkpoint against the tiny model's own checkpoint."""
    import torch
    from safetensors.torch import load_file

    saved = sorted(output_dir.glob("checkpoint-*/model.safetensors"), key=lambda p: int(p.parent.name.split("-")[1]))
    if not saved:
        raise RuntimeError(f"swift saved no checkpoint in {output_dir}")
    before, after = load_file(str(model_dir / "model.safetensors")), load_file(str(saved[-1]))
    common = sorted(set(before) & set(after))
    unchanged = [name for name in common if torch.equal(before[name], after[name])]
    return {
        "all_trainable_params_changed": bool(common) and not unchanged,
        "unchanged_params": unchanged,
        "weights_sha256": digest(after),
        "trainable_params": len(common),
    }


# ms-swift leaves its gloo process group for the interpreter's exit to tear down; a rank whose gloo thread still
# holds work then may abort (pytorch PR #179291), now and then, after main() has returned and the checkpoint is
# saved. Seen once in 2-rank CI runs under load, never in 16 runs alone; plain runs are as exposed as patched.
EXIT_ABORT = "terminate called without an active exception"


def aborted_after_training(args: argparse.Namespace, output: str, ended: dict[str, dict]) -> bool:
    """The only failure is that exit abort, after every rank ended training and swift's main() ended."""
    finished = output.rfind("End time of running main")
    return len(ended) == args.nproc and finished != -1 and EXIT_ABORT in output[finished:] and not error_of(output)


def problems_of_a_run_that_trained(args: argparse.Namespace, output: str, folder: Path) -> list[str]:
    """What the plugin promises (or plain mode must not show), one sentence per broken promise."""
    begun, ended = probes(folder, "train_begin"), probes(folder, "train_end")
    found = [] if len(begun) == args.nproc else [f"{len(begun)} of {args.nproc} rank(s) began training"]
    logs = next(iter(ended.values()), {}).get("log_history", [])
    if not any(f"rewards/{REWARD_CLASS}/mean" in entry for entry in logs):
        found.append(f"the second plugin's reward {REWARD_CLASS} was not logged: was it registered?")
    reports = output.count(ONE_LINE_MARK)
    for rank, seen in begun.items():
        if args.mode == "patched" and not seen["grpo_compat"]["active"]:
            found.append(f"grpo_compat was not applied on rank {rank}")
        if args.mode == "patched" and WATCHDOG_CALLBACK not in seen["callbacks"]:
            found.append(f"no {WATCHDOG_CALLBACK} among rank {rank}'s trainer callbacks {seen['callbacks']}")
        if args.mode == "plain" and seen["grpo_compat"]["active"]:
            found.append(f"plain run, but grpo_compat was applied on rank {rank}")
    if reports != (1 if args.mode == "patched" else 0):
        found.append(f"grpo_compat's report was logged {reports} time(s)")
    return found


def train(args: argparse.Namespace, output_dir: str, result: dict) -> None:
    model_dir = tiny_model(args)  # the launcher's transformers is the one swift's ranks import
    work = Path(output_dir)
    folder = work / "probes"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    dataset = write_dataset(work / "smoke_prompts.jsonl")
    user_plugin = work / "grpo_compat_smoke_user_plugin.py"
    user_plugin.write_text(user_plugin_source())
    by_plugin = args.mode == "patched" and args.activation == "plugin"
    plugins = ([grpo_compat_plugin()] if by_plugin else []) + [str(user_plugin)]
    argv = [str(Path(sys.executable).parent / "swift"), "rlhf", *swift_argv(model_dir, dataset, work / "out", args)]
    if args.mode == "patched" and args.activation == "run":  # no plugin: `grpo-compat run -- swift rlhf ...`
        argv = [str(Path(sys.executable).parent / "grpo-compat"), "run", "--", *argv]
    argv += ["--external_plugins", *plugins]
    env = {**os.environ, "MODELSCOPE_OFFLINE": "1", "HF_HUB_OFFLINE": "1", PROBE_DIR_ENV: str(folder)}
    env[REWARD_ENV] = args.reward
    if args.device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""  # swift takes a GPU whenever it sees one
    if args.nproc > 1:
        env.update(NPROC_PER_NODE=str(args.nproc), MASTER_PORT=str(free_port()))
    result["swift_command"] = " ".join(argv)
    completed = run_launcher(argv, TIMEOUT_S, env=env)
    output = completed.stdout + completed.stderr
    (work / "swift.log").write_text(output)
    if args.output:
        Path(args.output).with_suffix(".swift.log").write_text(output)
    begun, ended = probes(folder, "train_begin"), probes(folder, "train_end")
    result["phase"] = "train" if begun else "model" if probes(folder, "model") else "config"
    imported = probes(folder, "plugin")  # a refusal by our plugin comes before the user's plugin is imported
    result["ranks"] = {
        rank: {**seen, "callbacks": begun.get(rank, {}).get("callbacks")} for rank, seen in imported.items()
    }
    result["report_count"] = output.count(ONE_LINE_MARK)
    rank_zero = begun.get("0", {}).get("grpo_compat", {})
    if rank_zero.get("report"):
        result["grpo_compat"] = rank_zero["report"]  # the report of the swift process, not of this launcher
    if completed.returncode != 0 and not aborted_after_training(args, output, ended):
        raise SwiftFailed(error_of(output) or f"swift exited with {completed.returncode}:\n{output[-3000:]}")
    if completed.returncode != 0:
        result["aborted_at_exit"] = f"swift exited with {completed.returncode}: {EXIT_ABORT} after every rank trained"
    logs = ended.get("0", {}).get("log_history", [])
    result.update(
        steps=ended.get("0", {}).get("global_step"),
        final_loss=last_logged(logs, "loss"),
        kl=last_logged(logs, "kl"),
        reward_std=last_logged(logs, "reward_std"),
        **saved_weights_change(model_dir, work / "out"),
    )
    problems = problems_of_a_run_that_trained(args, output, folder)
    if problems:
        raise SwiftFailed("swift trained, but: " + "; ".join(problems))


def main(argv: list[str] | None = None) -> int:
    launch = argparse.ArgumentParser(add_help=False)
    launch.add_argument("--nproc", type=int, default=1, help="processes: NPROC_PER_NODE of `swift rlhf`")
    launch.add_argument(
        "--activation",
        choices=("plugin", "run"),
        default="plugin",
        help="patched mode: grpo_compat's plugin in --external_plugins, or `grpo-compat run -- swift rlhf ...`",
    )
    known, rest = launch.parse_known_args(argv)
    args = parse_args(__doc__.splitlines()[0], "swift rlhf argument (JSON value; a list gives several)", rest)
    args.nproc, args.activation = known.nproc, known.activation
    unsupported = {
        "--lora": args.lora,
        "--labels-from-column-0": args.labels_from_column_0,
        "--fake-gpus": args.fake_gpus,
        "--apply-late": args.apply_late,
        "--model-ignores-logits-to-keep": args.model_ignores_logits_to_keep,
        "--weights-dtype": args.weights_dtype != "float32",
        "--evaluate-first": args.evaluate_first,
    }
    given = [flag for flag, value in unsupported.items() if value]
    if given or known.nproc < 1:
        raise SystemExit(f"smoke_swift_cli.py: not supported here: {', '.join(given) or f'--nproc {known.nproc}'}")
    return run_smoke("smoke_swift_cli", args, train)


if __name__ == "__main__":
    sys.exit(main())
