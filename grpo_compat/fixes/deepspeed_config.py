"""Make the DeepSpeed config and the trainer agree on micro-batch, gradient accumulation and train batch.

Upstream (docs/known_failures.md KF-5): transformers fills "auto" batch keys of a DeepSpeed config from the
TrainingArguments and collects contradicting hard-coded values, but refuses them only inside
``trainer.train()``, after the policy and reference models have loaded. A config without a
``gradient_accumulation_steps`` key is never compared: accelerate inserts 1, so DeepSpeed accumulates
one micro-batch while the trainer accumulates N (on accelerate < 1.8 the engine then takes an optimizer
step on every micro-batch). accelerate's "GradientAccumulationPlugin has 1, DeepSpeed config has N"
warning is printed by every correct run on accelerate >= 1.8 and is not a disagreement.

``batch_agreement`` is a pure function over plain values; ``agree_with_trainer(args)`` reads the user's
own config (``args.deepspeed``, or accelerate's ``ACCELERATE_DEEPSPEED_CONFIG_FILE`` /
``ACCELERATE_GRADIENT_ACCUMULATION_STEPS``), refuses contradictions with the numbers and a fix, and
fills an absent ``gradient_accumulation_steps`` with the trainer's (the one key upstream gets wrong when
absent); every other key is left as the user wrote it.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MICRO, ACCUMULATION, TOTAL = "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "train_batch_size"
BATCH_KEYS = (MICRO, ACCUMULATION, TOTAL)
FLAGS = {MICRO: "per_device_train_batch_size", ACCUMULATION: "gradient_accumulation_steps"}
CHECKED_ATTRIBUTE = "_grpo_compat_deepspeed_agreed"
_ABSENT: Any = object()


@dataclass(frozen=True)
class TrainerBatch:
    """The trainer's batch arguments: DeepSpeed's train_batch_size must be their product."""

    per_device_train_batch_size: int
    gradient_accumulation_steps: int
    world_size: int
    auto_find_batch_size: bool = False  # the trainer shrinks the micro-batch at run time: upstream skips that check

    def value_of(self, key: str) -> int:
        micro, accumulation = self.per_device_train_batch_size, self.gradient_accumulation_steps
        return {MICRO: micro, ACCUMULATION: accumulation, TOTAL: micro * accumulation * self.world_size}[key]

    def product(self) -> str:
        processes = f"{self.world_size} process{'es' if self.world_size != 1 else ''}"
        return (
            f"{self.per_device_train_batch_size} per device x {self.gradient_accumulation_steps} accumulation steps"
            f" x {processes} = {self.value_of(TOTAL)}"
        )


@dataclass(frozen=True)
class Agreement:
    """What a DeepSpeed config needs to agree with the trainer: refusals, and values for absent keys."""

    contradictions: dict[str, Any] = field(default_factory=dict)  # key -> the hard-coded value that contradicts
    fills: dict[str, Any] = field(default_factory=dict)  # absent gradient_accumulation_steps -> the trainer's
    unsized: bool = False  # neither micro-batch nor train batch: DeepSpeed refuses it once the model has loaded


def batch_agreement(config: Mapping[str, Any], batch: TrainerBatch) -> Agreement:
    """Compare the user's DeepSpeed batch keys with the trainer's arguments; "auto" always agrees."""
    contradictions, fills = {}, {}
    for key in BATCH_KEYS:
        value = config.get(key, _ABSENT)
        if value is _ABSENT or value is None:
            # Only an absent accumulation goes wrong upstream, and only when the trainer's is not 1: accelerate
            # inserts 1. DeepSpeed derives an absent micro-batch or train batch itself, from the world size it
            # really runs with; a value filled here, before the processes exist, can contradict that (ZeRO-3's
            # zero.Init counts 1 process while the model loads).
            if key == ACCUMULATION and batch.value_of(key) != 1:
                fills[key] = batch.value_of(key)
        elif value == "auto" or (batch.auto_find_batch_size and key != ACCUMULATION):
            continue  # upstream fills "auto"; with auto_find_batch_size it does not compare batch sizes
        elif value != batch.value_of(key):  # transformers' own rule, applied before any model loads
            contradictions[key] = value
    return Agreement(contradictions, fills, unsized=config.get(MICRO) is None and config.get(TOTAL) is None)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


@dataclass(frozen=True)
class UserConfig:
    """The DeepSpeed config as the user wrote it, before upstream fills anything, and where it came from."""

    values: dict
    source: str
    launcher_steps: int | None = None  # gradient_accumulation_steps taken from ACCELERATE_GRADIENT_ACCUMULATION_STEPS


def refusal(agreement: Agreement, batch: TrainerBatch, user: UserConfig) -> str:
    """The error message: each contradiction with its numbers, what each side would run, and the fix."""
    lines = [f"The DeepSpeed config ({user.source}) contradicts the trainer's batch settings:"]
    for key, value in agreement.contradictions.items():
        ours = f"--{FLAGS[key]} {batch.value_of(key)}" if key in FLAGS else f"the trainer's {batch.product()}"
        shown = json.dumps(value) if isinstance(value, str) else value
        lines.append(f"  - {key}: {shown} in the DeepSpeed config, but {ours}")
    if TOTAL not in agreement.contradictions:
        lines.append(f"The trainer's train_batch_size is {batch.product()} samples per optimizer step.")
    lines.append("(transformers refuses this only inside trainer.train(), after the models have loaded.)")
    keys = [f'"{key}": "auto"' for key in agreement.contradictions]
    if user.launcher_steps is not None and ACCUMULATION in agreement.contradictions:
        keys.remove(f'"{ACCUMULATION}": "auto"')  # accelerate's own setting, not a json key the user wrote
        remove = (
            "remove gradient_accumulation_steps from the deepspeed_config section of the accelerate config and "
            "from accelerate launch's flags (accelerate then leaves it to the trainer)"
        )
        fix = f"Fix: {remove}" + (f", and set {', '.join(keys)} in {user.source}" if keys else "")
    else:
        fix = f"Fix: set {', '.join(keys)} in {user.source} (the trainer then fills in its own values)"
    flags = _matching_flags(user.values, batch)
    return "\n".join(lines) + "\n" + fix + (f", or pass {flags} to match the DeepSpeed config." if flags else ".")


def unsized_refusal(batch: TrainerBatch, user: UserConfig) -> str:
    """The error message for a config from which DeepSpeed cannot size a step."""
    return (
        f'The DeepSpeed config ({user.source}) has neither {MICRO} nor {TOTAL}: DeepSpeed refuses it ("Either '
        f'train_batch_size or train_micro_batch_size_per_gpu needs to be provided") only after the model has '
        f'loaded, and the trainer fills neither when it is absent.\nFix: add "{MICRO}": "auto" to {user.source} '
        f"(the trainer then fills in --per_device_train_batch_size {batch.per_device_train_batch_size})."
    )


def _matching_flags(config: Mapping[str, Any], batch: TrainerBatch) -> str:
    """Trainer flags under which the hard-coded DeepSpeed values would agree; "" when none can."""
    values = {key: config.get(key) for key in BATCH_KEYS}
    if not all(_is_count(v) or v in ("auto", None) for v in values.values()):
        return ""
    micro = values[MICRO] if _is_count(values[MICRO]) else None
    accumulation = values[ACCUMULATION] if _is_count(values[ACCUMULATION]) else None
    total = values[TOTAL] if _is_count(values[TOTAL]) else None
    if total is not None:  # derive the side that is not hard-coded, if the total allows a whole number
        if accumulation is None:
            per_step = (micro or batch.per_device_train_batch_size) * batch.world_size
            accumulation = total // per_step if total % per_step == 0 else None
        elif micro is None:
            per_device = accumulation * batch.world_size
            micro = total // per_device if total % per_device == 0 else None
        micro_now = micro or batch.per_device_train_batch_size
        accumulation_now = accumulation or batch.gradient_accumulation_steps
        if micro_now * accumulation_now * batch.world_size != total:
            return ""
    wanted = {MICRO: micro, ACCUMULATION: accumulation}
    return " ".join(f"--{FLAGS[k]} {v}" for k, v in wanted.items() if v is not None and v != batch.value_of(k))


# -- reading the user's config and filling the trainer's ------------------------------------------------------


def load_config(value: Any) -> dict:
    """The config as the user wrote it: a dict (copied), a JSON file, a JSON string or base64 JSON."""
    if isinstance(value, Mapping):
        return copy.deepcopy(dict(value))
    text = str(value)
    if os.path.isfile(text):
        return json.loads(Path(text).read_text(encoding="utf-8"))
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return json.loads(base64.urlsafe_b64decode(text).decode("utf-8"))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return {}  # upstream reports an unreadable config itself


def user_config(args: Any) -> UserConfig | None:
    """The user's DeepSpeed config before any filling, or None without DeepSpeed."""
    given = getattr(args, "deepspeed", None)
    if given:
        source = str(given) if os.path.isfile(str(given)) else f"deepspeed=<{type(given).__name__}>"
        return UserConfig(load_config(given), source)
    if getattr(args, "deepspeed_plugin", None) is None:
        return None
    # accelerate launch --use_deepspeed: accelerate's DeepSpeedPlugin built the config from its environment.
    path = os.environ.get("ACCELERATE_DEEPSPEED_CONFIG_FILE", "none")
    launcher_steps = os.environ.get("ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "auto")
    if path != "none":
        config, source = load_config(path), path
    else:
        config = {MICRO: "auto", TOTAL: "auto", ACCUMULATION: "auto"}
        source = "accelerate's DeepSpeed settings"
    if config.get(ACCUMULATION) == "auto" and launcher_steps.isdecimal():  # accelerate fills "auto" from it
        config[ACCUMULATION] = int(launcher_steps)
        source += f" with ACCELERATE_GRADIENT_ACCUMULATION_STEPS={launcher_steps}"
        return UserConfig(config, source, int(launcher_steps))
    return UserConfig(config, source)


def trainer_batch(args: Any) -> TrainerBatch:
    return TrainerBatch(
        int(args.per_device_train_batch_size),
        int(args.gradient_accumulation_steps),
        int(getattr(args, "world_size", 1) or 1),
        bool(getattr(args, "auto_find_batch_size", False)),
    )


def agree_with_trainer(args: Any) -> Agreement | None:
    """Refuse (GRPOSettingsError) or fill ``args``' DeepSpeed config; None without DeepSpeed or when done.

    Runs right after TrainingArguments.__post_init__ built the config, before any model loads. The
    config it checked is remembered on ``args``: later changes to the arguments (ms-swift multiplies
    gradient_accumulation_steps by sequence_parallel_size on purpose) are not re-checked, while a
    config that __post_init__ builds again is.
    """
    live = live_config(args)
    if live is None or getattr(args, CHECKED_ATTRIBUTE, None) is live:
        return None
    found = user_config(args)
    if found is None:
        return None
    batch = trainer_batch(args)
    agreement = batch_agreement(found.values, batch)
    if agreement.contradictions or agreement.unsized:
        from grpo_compat.core.errors import GRPOSettingsError

        message = refusal(agreement, batch, found) if agreement.contradictions else unsized_refusal(batch, found)
        raise GRPOSettingsError(message)
    if ACCUMULATION in agreement.fills:
        steps = live[ACCUMULATION] = agreement.fills[ACCUMULATION]
        if getattr(args, "deepspeed_plugin", None) is not None:
            args.deepspeed_plugin.gradient_accumulation_steps = steps
        from grpo_compat.core.logs import log

        log(
            "info",
            'The DeepSpeed config (%s) has no %s: set it to the trainer\'s %d, as "auto" does (accelerate would '
            "have run DeepSpeed with 1).",
            found.source,
            ACCUMULATION,
            steps,
        )
    setattr(args, CHECKED_ATTRIBUTE, live)
    return agreement


def live_config(args: Any) -> dict | None:
    """The config dict accelerate will hand to DeepSpeed (transformers' and accelerate's share it), or None."""
    hf_config = getattr(args, "hf_deepspeed_config", None)
    if hf_config is not None:
        return hf_config.config
    return getattr(getattr(getattr(args, "deepspeed_plugin", None), "hf_ds_config", None), "config", None)
