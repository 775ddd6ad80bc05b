"""The learning watchdog: notices a GRPO run that trains nothing, says why, once, on rank 0 (KF-5).

The worst GRPO failure is silent: no error, the weights never move, KL stays 0. The watchdog keeps
a cheap fingerprint of a sample of trainable parameter elements (each rank its own ZeRO-3 shard;
the counts are summed over ranks, so every rank reaches the same verdict), compares it after the
first optimizer steps, and reads what the trainer logs (reward spread, KL, gradient norm, learning
rate). The diagnosis in :func:`diagnose` is a pure function of that evidence.

It only reads: no RNG, no writes to parameters or gradients, so a healthy run's weights are
bit-identical with and without it. Settings come from the environment:

    GRPO_COMPAT_WATCHDOG=warn|stop|off      warn (default) logs once; stop raises TrainingStalledError
    GRPO_COMPAT_WATCHDOG_STEPS=2            optimizer steps before the weights are compared
    GRPO_COMPAT_WATCHDOG_MIN_CHANGED=0.5    fraction of sampled weight elements that must move
    GRPO_COMPAT_WATCHDOG_ZERO_SPREAD_STEPS=3  logged steps in a row with no reward spread in any group
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

from grpo_compat.core.errors import GRPOSettingsError

MODES = ("warn", "stop", "off")


@dataclass(frozen=True)
class WatchdogSettings:
    mode: str = "warn"
    check_after_steps: int = 2
    min_changed_fraction: float = 0.5
    zero_spread_steps: int = 3
    elements_per_parameter: int = 64  # sampled at fixed strides: no RNG is touched
    max_parameters: int = 64

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> WatchdogSettings:
        env = os.environ if environ is None else environ
        mode = env.get("GRPO_COMPAT_WATCHDOG", "warn").strip().lower() or "warn"
        if mode not in MODES:
            raise GRPOSettingsError(f"GRPO_COMPAT_WATCHDOG={mode!r} is not one of {', '.join(MODES)}")
        return cls(
            mode=mode,
            check_after_steps=_env_number(env, "GRPO_COMPAT_WATCHDOG_STEPS", 2, int, low=1),
            min_changed_fraction=_env_number(env, "GRPO_COMPAT_WATCHDOG_MIN_CHANGED", 0.5, float, low=0.0, high=1.0),
            zero_spread_steps=_env_number(env, "GRPO_COMPAT_WATCHDOG_ZERO_SPREAD_STEPS", 3, int, low=1),
        )


def _env_number(env: Any, name: str, default: Any, kind: type, low: float, high: float = math.inf) -> Any:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        bounds = f"between {low} and {high}" if high != math.inf else f"at least {low}"
        raise GRPOSettingsError(f"{name}={raw!r}: expected {kind.__name__} {bounds}")
    return value


@dataclass
class Evidence:
    """What the watchdog saw up to the check; None where it could not tell."""

    trainable_elements: int = 0
    sampled_elements: int = 0
    changed_elements: int = 0
    low_precision_weights: bool = False  # trainable weights held in bf16/fp16 (no fp32 master copy seen)
    optimizer_steps: int | None = None  # steps the optimizer really took (None: unknown)
    trainer_steps: int = 0
    learning_rates: list[float] = field(default_factory=list)
    grad_norms: list[float] = field(default_factory=list)
    kls: list[float] = field(default_factory=list)
    zero_spread: list[bool] = field(default_factory=list)  # per logged step: no group had reward spread

    @property
    def changed_fraction(self) -> float:
        return self.changed_elements / self.sampled_elements if self.sampled_elements else 0.0

    def longest_zero_spread_run(self) -> int:
        longest = current = 0
        for flat in self.zero_spread:
            current = current + 1 if flat else 0
            longest = max(longest, current)
        return longest


@dataclass(frozen=True)
class Finding:
    problem: str  # what is wrong, with the numbers
    cause: str  # the most likely cause given the evidence
    fix: str  # what to change

    def message(self) -> str:
        return f"GRPO is not learning: {self.problem}. Likely cause: {self.cause}. What to change: {self.fix}."


def _all_zero(values: list[float]) -> bool:
    return bool(values) and all(v == 0 for v in values)


def diagnose(evidence: Evidence, settings: WatchdogSettings) -> Finding | None:
    """The most likely reason the run does not learn, or None when it looks healthy."""
    if evidence.trainable_elements == 0:
        return Finding(
            "the model has no trainable parameters",
            "every parameter is frozen (requires_grad=False), e.g. a PEFT adapter that was not attached",
            "unfreeze the parameters you mean to train, or pass a peft_config",
        )
    steps = evidence.trainer_steps
    if evidence.optimizer_steps == 0:
        return Finding(
            f"the trainer counted {steps} optimizer steps but the optimizer took none",
            "the gradient accumulation boundary was never reached: trainer and DeepSpeed disagree on "
            "gradient_accumulation_steps (accelerate: 'GradientAccumulationPlugin has X, DeepSpeed config has Y')",
            "set gradient_accumulation_steps to 'auto' in the DeepSpeed config, or to the trainer's value",
        )
    unchanged = evidence.changed_elements == 0
    few_changed = evidence.changed_fraction < settings.min_changed_fraction
    if not (unchanged or few_changed):
        longest = evidence.longest_zero_spread_run()
        if longest >= settings.zero_spread_steps:
            return _zero_advantage(f"no group had any reward spread for {longest} logged steps in a row")
        return None
    moved = f"{evidence.changed_elements} of {evidence.sampled_elements} sampled weight elements changed"
    problem = f"after {steps} optimizer steps {moved} ({evidence.changed_fraction:.1%})"
    if _all_zero(evidence.learning_rates):
        return Finding(problem, "the learning rate is 0", "set learning_rate > 0 (check the warmup / scheduler)")
    if evidence.zero_spread and all(evidence.zero_spread):
        return _zero_advantage(problem)
    if unchanged and _all_zero(evidence.grad_norms):
        return Finding(
            problem,
            "every gradient is zero: zero advantages, or a loss that does not reach the trainable parameters "
            "(PEFT with gradient checkpointing and no input gradients)",
            "check that rewards differ within a group; with PEFT + gradient checkpointing call "
            "model.enable_input_require_grads() or use gradient_checkpointing_kwargs={'use_reentrant': False}",
        )
    if evidence.low_precision_weights:
        return Finding(
            problem,
            "the weights are held in bf16/fp16 without fp32 master weights: updates smaller than half a "
            "bf16 step are rounded away",
            "load the model in float32 and train with --bf16 (mixed precision keeps fp32 master weights), "
            "or raise the learning rate",
        )
    if unchanged:
        return Finding(
            problem,
            "the optimizer applied no update (accumulation boundary not reached, or parameters not in the optimizer)",
            "check gradient_accumulation_steps against the DeepSpeed config and that the optimizer holds the "
            "trainable parameters",
        )
    return None  # some weights moved and nothing else points to a stall: sparse updates are legitimate


def _zero_advantage(problem: str) -> Finding:
    return Finding(
        problem,
        "every completion of a prompt got the same reward, so every advantage (reward minus the group mean) "
        "is 0 and the policy gradient vanishes; KL stays 0",
        "make the reward discriminate between completions (check frac_reward_zero_std / reward_std), raise "
        "num_generations or the sampling temperature",
    )
