"""The learning watchdog: notices a GRPO run that trains nothing, says why, once, on rank 0 (KF-5).

The worst GRPO failure is silent: no error, the weights never move, KL stays 0. The watchdog keeps
a cheap fingerprint of a sample of trainable parameter elements (each rank its own ZeRO-3 shard;
the counts are summed over ranks, so every rank reaches the same verdict), compares it after the
first optimizer steps, and gathers its own evidence at every step: the optimizer's learning rate,
gradient norm and step count (optimizer hooks) and the trainer's per-batch metrics (reward spread,
reward, KL, truncation), whatever the logging interval. :func:`diagnose` (not learning),
:func:`diverged` (inf / NaN) and :func:`truncation` are pure functions of that evidence, and name a
cause only when its evidence was seen.

It only reads: no RNG, no writes to parameters or gradients, so a healthy run's weights are
bit-identical with and without it. Settings come from the environment:

    GRPO_COMPAT_WATCHDOG=warn|stop|off      warn (default) logs once; stop raises TrainingStalledError
    GRPO_COMPAT_WATCHDOG_STEPS=2            optimizer steps before the weights are compared
    GRPO_COMPAT_WATCHDOG_MIN_CHANGED=0.5    fraction of sampled weight elements that must move
    GRPO_COMPAT_WATCHDOG_ZERO_SPREAD_STEPS=3  optimizer steps in a row with no reward spread in any group
    GRPO_COMPAT_WATCHDOG_TRUNCATED_STEPS=5   optimizer steps in a row with (nearly) every completion truncated
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, replace
from typing import Any

from grpo_compat.core.errors import GRPOSettingsError

MODES = ("warn", "stop", "off")


@dataclass(frozen=True)
class WatchdogSettings:
    mode: str = "warn"
    check_after_steps: int = 2
    min_changed_fraction: float = 0.5
    zero_spread_steps: int = 3
    truncated_steps: int = 5
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
            truncated_steps=_env_number(env, "GRPO_COMPAT_WATCHDOG_TRUNCATED_STEPS", 5, int, low=1),
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


# The first words of every watchdog message, one per kind of finding.
NOT_LEARNING = "GRPO is not learning"
DIVERGED = "GRPO training diverged"
TRUNCATED = "GRPO completions are truncated"
CANNOT_TRAIN = "GRPO cannot change a weight"  # before the first generation (grpo_compat.fixes.weights_move)
HEADLINES = (NOT_LEARNING, DIVERGED, TRUNCATED, CANNOT_TRAIN)
# How the note after trl's sampling error ("probability tensor contains either inf, nan ...") begins.
SAMPLING_FAILED = "Generation failed to sample (probability tensor contains either inf, nan or element < 0)"
# A generation batch counts as truncated when at least this fraction of its completions hit the limit.
NEARLY_ALL = 0.95


@dataclass
class Evidence:
    """What the watchdog saw itself up to the check; None or empty where it could not tell.

    Per optimizer step, from the optimizer (learning rate, gradient norm, step count) and the sampled
    weights; per generation batch, from the trainer's own GRPO metrics (reward spread, KL, reward,
    truncation), or from the logs where a trainer keeps none.
    """

    trainable_elements: int = 0
    # PEFT adapters loaded for inference (their config's inference_mode: PeftModel.from_pretrained's is_trainable=False)
    frozen_adapters: list[str] = field(default_factory=list)
    optimizer_parameters: int | None = None  # parameters the stepping optimizer holds (None: unknown)
    # None of the sampled trainable parameters is one the optimizer holds (None: cannot tell, e.g. DeepSpeed's own
    # fp32 copies, FSDP's flat parameters)
    sample_outside_optimizer: bool | None = None
    skipped_steps: int = 0  # optimizer steps the fp16 loss scaler skipped (accelerate's step_was_skipped)
    sampled_elements: int = 0
    changed_elements: int = 0
    low_precision_weights: bool = False  # trainable weights held in bf16/fp16 (no fp32 master copy seen)
    optimizer_steps: int | None = None  # steps the optimizer really took (None: unknown)
    trainer_steps: int = 0
    learning_rates: list[float] = field(default_factory=list)
    grad_norms: list[float] = field(default_factory=list)
    kls: list[float] = field(default_factory=list)
    zero_spread: list[bool] = field(default_factory=list)  # per step: no group of its batches had reward spread
    spread_source: str = "optimizer steps"  # or "logged steps" when read from the logs
    truncated: list[float] = field(default_factory=list)  # per step: least fraction of a batch cut at the limit
    max_completion_length: int | None = None
    nonfinite: list[str] = field(default_factory=list)  # what was inf / NaN at the first step anything was
    nonfinite_step: int | None = None
    infinite_rewards: list[bool] = field(default_factory=list)  # per step: a batch's mean reward was inf
    unscored: list[bool] = field(default_factory=list)  # per step: every batch's mean reward was NaN (all None)
    # The reward dry run's verdict: the functions that gave a prompt's different made-up completions one reward
    # ([]: every function's reward varied with the text; None: not judged, e.g. the dry run was off).
    constant_rewards: list[str] | None = None
    masks_truncated: bool = False  # mask_truncated_completions: a truncated completion's tokens leave the loss
    peft_with_checkpointing: bool = False  # a PEFT model trained with gradient checkpointing
    # A teacher's per-token log-ratio is part of the advantage (ms-swift >= 4.4 OPD-RL, --teacher_model on GRPO):
    # a batch without reward spread still has advantages, and pure distillation has no reward functions at all.
    teacher_signal: bool = False
    # trl >= 1.7 on a mixture of experts adds the router load-balancing loss with this weight (0: not added), so the
    # weights move even where every advantage is 0 (census row 41).
    router_aux_loss_coef: float = 0.0

    @property
    def changed_fraction(self) -> float:
        return self.changed_elements / self.sampled_elements if self.sampled_elements else 0.0

    def longest_zero_spread_run(self) -> int:
        return _longest_run(self.zero_spread)

    def longest_truncated_run(self) -> int:
        return _longest_run([fraction >= NEARLY_ALL for fraction in self.truncated])

    def always_truncated(self) -> bool:
        """Nearly every completion of every step seen was cut at max_completion_length."""
        return bool(self.truncated) and all(fraction >= NEARLY_ALL for fraction in self.truncated)

    def limit(self) -> str:
        return (
            f"max_completion_length={self.max_completion_length}"
            if self.max_completion_length
            else ("max_completion_length")
        )


def _longest_run(flags: list[bool]) -> int:
    longest = current = 0
    for flag in flags:
        current = current + 1 if flag else 0
        longest = max(longest, current)
    return longest


@dataclass(frozen=True)
class Finding:
    problem: str  # what is wrong, with the numbers
    cause: str  # the most likely cause given the evidence
    fix: str  # what to change
    headline: str = NOT_LEARNING

    def message(self) -> str:
        return f"{self.headline}: {self.problem}. Likely cause: {self.cause}. What to change: {self.fix}."


def _all_zero(values: list[float]) -> bool:
    return bool(values) and all(v == 0 for v in values)


def diverged(evidence: Evidence) -> Finding | None:
    """Inf / NaN in what training computes, named at the first step it appeared, with the causes its evidence allows."""
    if not evidence.nonfinite:
        return None
    what = ", ".join(evidence.nonfinite)
    problem = f"inf / NaN at optimizer step {evidence.nonfinite_step}: {what}"
    if any(evidence.infinite_rewards):
        cause = "a reward function returned inf, which reached the advantages and the gradient"
        fix = "make every reward function return finite numbers (None for a completion it cannot score)"
    elif evidence.low_precision_weights:
        cause = "the weights are held in fp16/bf16 without fp32 master weights (fp16 overflows above 65504)"
        fix = "load the model in float32 and train with --bf16 (mixed precision keeps fp32 master weights)"
    else:
        rates = sorted({rate for rate in evidence.learning_rates if math.isfinite(rate)})
        at = f" (learning_rate {rates[-1]:g})" if rates else ""
        cause = f"the update overflowed: a learning rate too high for this model{at}, or fp16 loss scaling"
        fix = "lower learning_rate, keep max_grad_norm (gradient clipping) on, and prefer bf16 to fp16"
    return Finding(problem, cause, fix + "; the next generation would fail to sample from these weights", DIVERGED)


def truncation(evidence: Evidence, settings: WatchdogSettings) -> Finding | None:
    """Nearly every completion cut at max_completion_length for several optimizer steps in a row."""
    longest = evidence.longest_truncated_run()
    if longest < settings.truncated_steps:
        return None
    limit = evidence.max_completion_length
    return Finding(
        f"at least {NEARLY_ALL:.0%} of completions hit max_completion_length"
        f"{f'={limit}' if limit else ''} in every batch of {longest} optimizer steps in a row",
        "the model does not finish within the limit, so every reward judges cut-off text",
        "raise max_completion_length, or reward (or mask_truncated_completions) completions that stop early",
        TRUNCATED,
    )


def diagnose(evidence: Evidence, settings: WatchdogSettings) -> Finding | None:
    """The most likely reason the run does not learn, or None when it looks healthy.

    A cause is named only when the evidence for it was seen; otherwise the finding says what was seen.
    """
    if evidence.trainable_elements == 0:
        return _no_trainable_parameter(evidence)
    steps = evidence.trainer_steps
    if evidence.optimizer_steps == 0 and steps and evidence.skipped_steps >= steps:
        return Finding(
            f"the trainer counted {steps} optimizer steps but the fp16 loss scaler skipped every one",
            "the gradients were inf / NaN at every loss scale tried, so no update was applied",
            "train in bf16 (or float32) instead of fp16, or lower the learning rate; check the rewards are finite",
        )
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
        longest = 0 if evidence.teacher_signal else evidence.longest_zero_spread_run()
        if longest >= settings.zero_spread_steps:
            return _zero_advantage(
                f"no group had any reward spread for {longest} {evidence.spread_source} in a row", evidence
            )
        return None
    moved = f"{evidence.changed_elements} of {evidence.sampled_elements} sampled weight elements changed"
    problem = f"after {steps} optimizer steps {moved} ({evidence.changed_fraction:.1%})"
    if unchanged:
        structural = _optimizer_without_the_policy(problem, evidence)
        if structural is not None:
            return structural
    if _all_zero(evidence.learning_rates):
        return Finding(problem, "the learning rate is 0", "set learning_rate > 0 (check the warmup / scheduler)")
    if unchanged and _all_zero(evidence.grad_norms) and evidence.masks_truncated and evidence.always_truncated():
        # Whatever the rewards: with every completion masked out of the loss, no token is left to learn from.
        return Finding(
            problem + "; every gradient was exactly 0",
            f"every completion hit {evidence.limit()} and mask_truncated_completions=True leaves truncated "
            "completions out of the loss, so no token was left to learn from",
            "raise max_completion_length so that completions can finish, or set mask_truncated_completions=False",
        )
    if evidence.zero_spread and all(evidence.zero_spread) and not evidence.teacher_signal:
        return _zero_advantage(problem, evidence)
    if any(evidence.infinite_rewards):
        return Finding(
            problem,
            "a reward function returned inf (the mean reward logged was inf), which leaves no finite advantage",
            "make every reward function return finite numbers (None for a completion it cannot score)",
        )
    if evidence.unscored and all(evidence.unscored):
        return Finding(
            problem,
            "no completion was scored: every reward function returned None for every completion, so every "
            "advantage is 0",
            "make at least one reward function return a number for the completions it can judge",
        )
    if unchanged and _all_zero(evidence.grad_norms):
        return _zero_gradients(problem + "; every gradient was exactly 0", evidence)
    if evidence.low_precision_weights:
        return Finding(
            problem,
            "the weights are held in bf16/fp16 without fp32 master weights: updates smaller than half a "
            "bf16 step are rounded away",
            "load the model in float32 and train with --bf16 (mixed precision keeps fp32 master weights), "
            "or raise the learning rate",
        )
    if unchanged:
        return Finding(problem + _what_was_seen(evidence), *_UNEXPLAINED)
    return None  # some weights moved and nothing else points to a stall: sparse updates are legitimate


def _optimizer_without_the_policy(problem: str, evidence: Evidence) -> Finding | None:
    """Weights that cannot move whatever the rewards: the optimizer holds none of the policy's parameters."""
    if evidence.optimizer_parameters == 0:
        return Finding(
            problem + "; the optimizer holds no parameter",
            "the optimizer was built while every parameter of the policy was frozen (requires_grad=False), e.g. a "
            "PEFT adapter loaded with PeftModel.from_pretrained's default is_trainable=False",
            "make the parameters to train trainable before train() (is_trainable=True for a loaded adapter)",
        )
    if evidence.sample_outside_optimizer:
        return Finding(
            f"{problem}; the optimizer holds {evidence.optimizer_parameters} parameters, none of the sampled trainable "
            "ones of the policy",
            "the optimizer was built from other parameters than the ones the policy trains (before the model was "
            "wrapped, or replaced afterwards)",
            "build the optimizer from the trainable parameters of the model the trainer trains, or let the trainer "
            "build it",
        )
    return None


def _no_trainable_parameter(evidence: Evidence) -> Finding:
    """No trainable parameter at the first step: a PEFT adapter loaded for inference, else frozen parameters."""
    if evidence.frozen_adapters:
        names = ", ".join(repr(name) for name in evidence.frozen_adapters)
        return Finding(
            f"the model has no trainable parameters: PEFT adapter {names} was loaded for inference (inference_mode)",
            "PeftModel.from_pretrained(model, path) loads an adapter frozen unless is_trainable=True (peft's default "
            "is False), so the optimizer holds nothing and the saved adapter is the one loaded",
            "load it with PeftModel.from_pretrained(model, path, is_trainable=True)",
        )
    return Finding(
        "the model has no trainable parameters",
        "every parameter is frozen (requires_grad=False)",
        "unfreeze the parameters you mean to train (requires_grad_(True)), or pass a peft_config to train an adapter",
    )


# Weights that did not move although nothing the watchdog saw explains it: say what was seen, blame nothing.
_UNEXPLAINED = (
    "not determined from what the watchdog could see",
    "check that the optimizer holds the trainable parameters and that the loss depends on them",
)


def _what_was_seen(evidence: Evidence) -> str:
    seen = []
    if evidence.optimizer_steps:
        seen.append(f"the optimizer stepped {evidence.optimizer_steps} times")
    if evidence.learning_rates:
        seen.append(f"learning rate {max(evidence.learning_rates):g}")
    if evidence.grad_norms:
        seen.append(f"gradient norm up to {max(evidence.grad_norms):.3g}")
    if evidence.zero_spread:
        seen.append(
            f"reward spread in {sum(not flat for flat in evidence.zero_spread)} of {len(evidence.zero_spread)} batches"
        )
    unseen = [
        name
        for name, values in (
            ("the learning rate", evidence.learning_rates),
            ("the gradients", evidence.grad_norms),
            ("the rewards", evidence.zero_spread),
        )
        if not values
    ]
    text = f"; seen: {', '.join(seen)}" if seen else ""
    return text + (f"; not seen: {', '.join(unseen)}" if unseen else "")


_PEFT_NO_INPUT_GRADS = (
    "the loss does not reach the trainable parameters (PEFT with gradient checkpointing and no input gradients)"
)
_PEFT_FIX = (
    "with PEFT + gradient checkpointing call model.enable_input_require_grads() or use "
    "gradient_checkpointing_kwargs={'use_reentrant': False}"
)


def _zero_gradients(problem: str, evidence: Evidence) -> Finding:
    """Every gradient exactly 0: name what the run showed (flat rewards, PEFT with checkpointing), nothing else."""
    spread_seen = any(not flat for flat in evidence.zero_spread)
    peft = evidence.peft_with_checkpointing
    if spread_seen and peft:
        return Finding(problem, _PEFT_NO_INPUT_GRADS, _PEFT_FIX)
    if not evidence.zero_spread and peft:
        return Finding(
            problem,
            f"zero advantages, or {_PEFT_NO_INPUT_GRADS}",
            f"check that rewards differ within a group; {_PEFT_FIX}",
        )
    if not evidence.zero_spread:
        return Finding(
            problem + _what_was_seen(evidence),
            "zero advantages (every completion of a prompt scored alike) is the likeliest; the reward spread was "
            "not seen",
            "check frac_reward_zero_std / reward_std, and that the loss depends on the trainable parameters",
        )
    return Finding(problem + _what_was_seen(evidence), *_UNEXPLAINED)


_SAME_REWARD = (
    "every completion of a prompt got the same reward, so every advantage (reward minus the group mean) "
    "is 0 and the policy gradient vanishes; KL stays 0"
)
_DISCRIMINATE = (
    "make the reward discriminate between completions (check frac_reward_zero_std / reward_std), raise "
    "num_generations or the sampling temperature"
)


def _zero_advantage(problem: str, evidence: Evidence) -> Finding:
    """Zero advantages, and why; on a mixture of experts, also why the weights moved all the same (census row 41)."""
    finding = _zero_advantage_cause(problem, evidence)
    if not evidence.router_aux_loss_coef:
        return finding
    moved = (
        "; the weights moved all the same, through the MoE router load-balancing loss trl adds to every step "
        f"(router_aux_loss_coef={evidence.router_aux_loss_coef:g}), which trains the routers' balance, not the task"
    )
    return replace(finding, problem=finding.problem + moved, cause=finding.cause.replace("; KL stays 0", ""))


def _zero_advantage_cause(problem: str, evidence: Evidence) -> Finding:
    """Zero advantages, and why: the reward itself, or completions cut alike, ordered by the run's own evidence."""
    if not evidence.always_truncated():
        return Finding(problem, _SAME_REWARD, _DISCRIMINATE)
    cut = (
        f"every completion was cut at {evidence.limit()}, so each reward saw truncated text and scored the "
        "completions of a prompt alike"
    )
    constant = evidence.constant_rewards
    if constant:  # the dry run saw these give different texts one reward: a longer limit cannot help
        names = ", ".join(repr(name) for name in constant)
        return Finding(
            problem,
            f"{_SAME_REWARD}: reward function {names} gave different completions of a prompt the same reward in "
            f"the dry run too, whatever their text (every completion was also cut at {evidence.limit()}, which a "
            "constant reward does not notice)",
            _DISCRIMINATE,
        )
    if constant == []:  # every reward varied with the text in the dry run: the cut made the completions alike
        return Finding(
            problem,
            f"{cut} (the rewards varied with the text in the dry run); less likely, the reward cannot tell these "
            "completions apart",
            "raise max_completion_length, or make the reward score partial answers",
        )
    return Finding(
        problem,
        f"either {cut}, or the reward gives every completion the same value whatever its text (the reward was not "
        "dry-run, so the watchdog cannot tell which)",
        "check the reward on finished answers first (a longer limit cannot help a constant reward); if it depends "
        "on how a completion ends, raise max_completion_length",
    )
