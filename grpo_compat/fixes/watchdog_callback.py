"""The watchdog as a transformers TrainerCallback: collects the evidence that grpo_compat.fixes.watchdog judges.

Imported only by the patch that installs it, when transformers is already loaded.
"""

from __future__ import annotations

import math
from typing import Any

from grpo_compat.core.errors import TrainingStalledError
from grpo_compat.fixes.watchdog import (
    DIVERGED,
    NOT_LEARNING,
    SAMPLING_FAILED,
    TRUNCATED,
    Evidence,
    Finding,
    WatchdogSettings,
    diagnose,
    diverged,
    truncation,
)

# Keys, across TRL and ms-swift versions (their per-batch metrics and their logs), that say "no group had
# any reward spread".
ZERO_SPREAD_FRACTION_KEYS = ("frac_reward_zero_std",)
REWARD_SPREAD_KEYS = ("reward_std",)
# The trainers' per-batch metrics the watchdog reads (trl >= 0.17 and ms-swift: _metrics["train"][key];
# trl 0.14-0.16: _metrics[key]); the fraction of truncated completions exists from trl 0.17.
METRIC_KEYS = (*ZERO_SPREAD_FRACTION_KEYS, *REWARD_SPREAD_KEYS, "kl", "reward", "completions/clipped_ratio")
# What trl's sampler raises when the weights (hence the logits) hold inf / NaN.
SAMPLING_ERROR = "probability tensor contains either"
SAMPLING_FOLLOWS = f"{SAMPLING_FAILED}; it follows from this: "


class TrainerMetrics:
    """The values a GRPO trainer appended to its own metrics since the last read (it clears them when it logs)."""

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer
        self._seen: dict[str, tuple[list, int]] = {}

    def table(self) -> dict | None:
        metrics = getattr(self.trainer, "_metrics", None)
        if isinstance(metrics, dict) and isinstance(metrics.get("train"), dict):
            metrics = metrics["train"]
        return metrics if isinstance(metrics, dict) else None

    def new_values(self) -> dict[str, list[float]]:
        table = self.table() or {}
        fresh: dict[str, list[float]] = {}
        for key in METRIC_KEYS:
            values = table.get(key)
            if not isinstance(values, list):
                continue
            seen_list, seen_length = self._seen.get(key, (None, 0))
            start = seen_length if seen_list is values and seen_length <= len(values) else 0
            fresh[key] = [float(v) for v in values[start:] if isinstance(v, (int, float))]
            self._seen[key] = (values, len(values))
        return fresh


def _innermost_torch_optimizer(optimizer: Any) -> Any:
    """The torch optimizer that really steps: accelerate and DeepSpeed wrap it (``.optimizer`` chains).

    accelerate's AcceleratedOptimizer is a torch Optimizer subclass that never ran Optimizer.__init__
    (it has no hook registry), so take the innermost one, not the first.
    """
    import torch

    found = None
    for _ in range(6):
        if optimizer is None:
            break
        if isinstance(optimizer, torch.optim.Optimizer) and hasattr(optimizer, "_optimizer_step_post_hooks"):
            found = optimizer
        optimizer = getattr(optimizer, "optimizer", None)
    return found


def _has_master_weights(optimizer: Any) -> bool:
    # DeepSpeed's ZeRO optimizers keep fp32 master weights for bf16/fp16 model weights.
    while optimizer is not None:
        if type(optimizer).__module__.startswith("deepspeed"):
            return True
        optimizer = getattr(optimizer, "optimizer", None)
    return False


def _local_values(parameter: Any) -> Any:
    """This rank's elements of a parameter: its ZeRO-3 shard when partitioned, else the tensor."""
    shard = getattr(parameter, "ds_tensor", None)
    return (shard if shard is not None else parameter).detach().reshape(-1)


class ParameterSample:
    """Fixed-stride elements of up to ``max_parameters`` trainable parameters, spread over the model."""

    def __init__(self, model: Any, settings: WatchdogSettings) -> None:
        trainable = [p for p in model.parameters() if p.requires_grad]
        self.trainable_elements = sum(int(getattr(p, "ds_numel", p.numel())) for p in trainable)
        self.dtypes = {p.dtype for p in trainable}
        stride = max(1, len(trainable) // settings.max_parameters)
        self.parameters = trainable[::stride][: settings.max_parameters]
        self.per_parameter = settings.elements_per_parameter

    def read(self) -> Any:
        import torch

        pieces = []
        for parameter in self.parameters:
            values = _local_values(parameter)
            step = max(1, values.numel() // self.per_parameter)
            pieces.append(values[::step][: self.per_parameter].to(torch.float64, copy=True))
        return torch.cat(pieces) if pieces else torch.zeros(0, dtype=torch.float64)


def _summed_over_ranks(*counts: int) -> list[int]:
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return list(counts)
    totals = torch.tensor(counts, dtype=torch.float64)  # float64: exact for counts below 2**53; gloo has it
    dist.all_reduce(totals)
    return [int(v) for v in totals.tolist()]


def _gradient_norm(optimizer: Any) -> float | None:
    """The norm of the gradients the optimizer is about to apply (its own parameters: DeepSpeed's fp32 partitions)."""
    import torch

    grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
    if not grads:
        return None
    norms = torch.stack([g.detach().float().norm() for g in grads])
    return float(torch.linalg.vector_norm(norms))


def build_callback(settings: WatchdogSettings, trainer: Any = None) -> Any:
    from transformers import TrainerCallback

    class LearningWatchdog(TrainerCallback):
        """grpo_compat's learning watchdog (see grpo_compat.fixes.watchdog)."""

        def __init__(self) -> None:
            self.settings = settings
            self.evidence = Evidence()
            self.findings: dict[str, Finding] = {}  # by headline: each kind is said once
            self._metrics = TrainerMetrics(trainer)
            self._sample: ParameterSample | None = None
            self._before: Any = None
            self._checked = False
            self._hooks: list[Any] = []
            self._nonfinite_gradient = False

        @property
        def finding(self) -> Finding | None:
            return self.findings.get(NOT_LEARNING)

        def on_step_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
            # Not on_train_begin: transformers 5 calls it before the DeepSpeed engine (and ZeRO-3 shards) exist.
            if self._sample is not None or self._checked or model is None:
                return
            self._sample = ParameterSample(model, self.settings)
            self._before = self._sample.read()
            self.evidence.trainable_elements = self._sample.trainable_elements
            self.evidence.max_completion_length = getattr(args, "max_completion_length", None)
            self.evidence.masks_truncated = bool(getattr(args, "mask_truncated_completions", False))
            checkpointing = getattr(model, "is_gradient_checkpointing", False) or getattr(
                args, "gradient_checkpointing", False
            )
            self.evidence.peft_with_checkpointing = hasattr(model, "peft_config") and bool(checkpointing)
            from grpo_compat.fixes.rewards import constant_on_dry_run

            self.evidence.constant_rewards = constant_on_dry_run(getattr(trainer, "reward_funcs", None))
            self.evidence.teacher_signal = bool(getattr(trainer, "_has_teacher", False))  # ms-swift >= 4.4 OPD-RL
            if getattr(trainer, "aux_loss_enabled", False):  # trl >= 1.7 on a mixture of experts
                self.evidence.router_aux_loss_coef = float(getattr(trainer, "router_aux_loss_coef", 0.0) or 0.0)
            optimizer = kwargs.get("optimizer")
            import torch

            low = {torch.bfloat16, torch.float16}
            self.evidence.low_precision_weights = bool(self._sample.dtypes & low) and not _has_master_weights(optimizer)
            from grpo_compat.fixes.weights_move import frozen_adapters

            self.evidence.frozen_adapters = frozen_adapters(model)
            inner = _innermost_torch_optimizer(optimizer)
            if inner is not None:
                self._read_optimizer(inner, optimizer, args)
                self.evidence.optimizer_steps = 0
                self._hooks = [
                    inner.register_step_pre_hook(self._observe_update),
                    inner.register_step_post_hook(self._count_step),
                ]

        def _read_optimizer(self, inner: Any, optimizer: Any, args: Any) -> None:
            """How many parameters the stepping optimizer holds, and whether the sampled ones are among them."""
            from grpo_compat.fixes.weights_move import optimizer_parameters

            # DeepSpeed steps its own fp32 copies (ZeRO-3 on CPU: its innermost torch optimizer lists no parameter,
            # measured) and FSDP (1) flat parameters: what the optimizer holds says nothing about the policy's.
            if _has_master_weights(optimizer) or getattr(args, "fsdp", None) or self._sample is None:
                return
            held = optimizer_parameters(inner) or []
            self.evidence.optimizer_parameters = len(held)
            ids = {id(parameter) for parameter in held}
            sampled = self._sample.parameters
            self.evidence.sample_outside_optimizer = bool(sampled) and not any(id(p) in ids for p in sampled)

        def _observe_update(self, optimizer: Any, *_: Any) -> None:
            rate = optimizer.param_groups[0].get("lr") if optimizer.param_groups else None
            if isinstance(rate, (int, float)):
                self.evidence.learning_rates.append(float(rate))
            if self._checked:
                # The gradients' norm is a pass over every gradient (measured: 1.7 s of a 205 s step of a 494M
                # Qwen2 on 2 CPU cores, docs/invariants.md); it is evidence for the check only. After it, inf / NaN
                # gradients still show, in the sampled weights they reach.
                return
            norm = _gradient_norm(optimizer)
            if norm is not None:
                self.evidence.grad_norms.append(norm)
                self._nonfinite_gradient |= not math.isfinite(norm)

        def _count_step(self, *_: Any) -> None:
            self.evidence.optimizer_steps = (self.evidence.optimizer_steps or 0) + 1

        def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
            # Only what the watchdog cannot see itself: an optimizer without hooks, a trainer without metrics.
            logs = logs or {}
            unmetered = self._metrics.table() is None  # a trainer that keeps no per-batch metrics
            series = [("kl", "kls")] if unmetered else []
            if not self._hooks:
                series += [("learning_rate", "learning_rates"), ("grad_norm", "grad_norms")]
            for key, name in series:
                if isinstance(logs.get(key), (int, float)):
                    getattr(self.evidence, name).append(float(logs[key]))
            if unmetered:
                self.evidence.spread_source = "logged steps"
                logged = {key: [value] for key, value in logs.items() if isinstance(value, (int, float))}
                self.evidence.zero_spread += self._flat(logged)
            if self._checked:  # rewards can flatten later in the run too
                self._report(diagnose(self.evidence, self.settings))

        @staticmethod
        def _flat(series: dict[str, list]) -> list[bool]:
            """[no group had reward spread in any of these batches], or [] when none says (NaN: nothing scored)."""
            fractions = next((series[k] for k in ZERO_SPREAD_FRACTION_KEYS if series.get(k)), None)
            if fractions is not None:
                flags = [float(v) >= 1.0 for v in fractions if math.isfinite(v)]
            else:
                spreads = next((series[k] for k in REWARD_SPREAD_KEYS if series.get(k)), [])
                flags = [float(v) == 0.0 for v in spreads if math.isfinite(v)]
            return [all(flags)] if flags else []

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self._observe_step(state)
            if getattr(kwargs.get("optimizer"), "step_was_skipped", False) is True:  # accelerate: the fp16 scaler's
                self.evidence.skipped_steps += 1
            # After the first optimizer step already where the optimizer cannot move the policy's weights, whatever
            # the rewards (the same on every rank: the sample comparison below is collective under ZeRO-3).
            cannot_move = self.evidence.optimizer_parameters == 0 or bool(self.evidence.sample_outside_optimizer)
            if not self._checked and (state.global_step >= self.settings.check_after_steps or cannot_move):
                self._check(state)
            elif self._checked:  # rewards can flatten later in the run too
                self._report(diagnose(self.evidence, self.settings))

        def _observe_step(self, state: Any) -> None:
            """The step's generation batches (the trainer's metrics since the last step), each step one entry."""
            fresh = self._metrics.new_values()
            rewards = fresh.get("reward", [])
            self.evidence.zero_spread += self._flat(fresh)
            if rewards:
                self.evidence.unscored.append(all(map(math.isnan, rewards)))
                self.evidence.infinite_rewards.append(any(map(math.isinf, rewards)))
            if fresh.get("completions/clipped_ratio"):
                self.evidence.truncated.append(min(fresh["completions/clipped_ratio"]))
            self.evidence.kls += fresh.get("kl", [])
            self._report(truncation(self.evidence, self.settings))
            if self.evidence.nonfinite:
                return
            nonfinite = ["the gradients"] if self._nonfinite_gradient else []
            if not self._weights_finite():
                nonfinite.append("the sampled weights")
            if any(not math.isfinite(kl) for kl in fresh.get("kl", [])):
                nonfinite.append("KL")
            if nonfinite:
                self.evidence.nonfinite = nonfinite + (["the rewards"] if any(map(math.isinf, rewards)) else [])
                self.evidence.nonfinite_step = state.global_step
                self._report(diverged(self.evidence))

        def _weights_finite(self) -> bool:
            return self._sample is None or bool(self._sample.read().isfinite().all())

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if not self._checked and state.global_step > 0:
                self._check(state)
            self._remove_hooks()

        def _remove_hooks(self) -> None:
            for hook in self._hooks:
                hook.remove()
            self._hooks = []

        def after_failure(self, error: BaseException) -> None:
            """Follow trl's sampling error ("probability tensor contains either inf, nan ...") with its cause."""
            self._remove_hooks()
            if SAMPLING_ERROR not in str(error):
                return
            known = self.findings.get(DIVERGED)
            if known is None and not self._weights_finite():
                self.evidence.nonfinite = ["the sampled weights"]
                self.evidence.nonfinite_step = self.evidence.optimizer_steps
                known = diverged(self.evidence)
            from grpo_compat.core.logs import log

            if known is None:
                log(
                    "warning",
                    "%s",
                    f"{SAMPLING_FAILED} while the sampled weights, the gradients and KL were finite as far as the "
                    "watchdog saw: check the generation settings (temperature, top_k / top_p) and any logits processor",
                )
            else:
                log("warning", "%s", f"{SAMPLING_FOLLOWS}{known.message()}")

        def _check(self, state: Any) -> None:
            self._checked = True
            if self._sample is None:
                return
            after = self._sample.read()
            changed = int((after != self._before).sum())
            sampled, changed = _summed_over_ranks(after.numel(), changed)
            self.evidence.sampled_elements, self.evidence.changed_elements = sampled, changed
            self.evidence.trainer_steps = state.global_step
            self._before = None
            self._report(diagnose(self.evidence, self.settings))

        def _report(self, finding: Finding | None) -> None:
            if finding is None or finding.headline in self.findings:
                return
            self.findings[finding.headline] = finding  # once per kind: later evidence does not repeat it
            if self.settings.mode == "stop" and finding.headline != TRUNCATED:
                raise TrainingStalledError(finding.message())
            from grpo_compat.core.logs import log

            log("warning", "%s", finding.message())

    return LearningWatchdog()
