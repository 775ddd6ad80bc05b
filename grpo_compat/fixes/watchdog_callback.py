"""The watchdog as a transformers TrainerCallback: collects the evidence that grpo_compat.fixes.watchdog judges.

Imported only by the patch that installs it, when transformers is already loaded.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.errors import TrainingStalledError
from grpo_compat.fixes.watchdog import Evidence, WatchdogSettings, diagnose

# Logged keys, across TRL and ms-swift versions, that say "no group had any reward spread".
ZERO_SPREAD_FRACTION_KEYS = ("frac_reward_zero_std",)
REWARD_SPREAD_KEYS = ("reward_std",)


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


def build_callback(settings: WatchdogSettings) -> Any:
    from transformers import TrainerCallback

    class LearningWatchdog(TrainerCallback):
        """grpo_compat's learning watchdog (see grpo_compat.fixes.watchdog)."""

        def __init__(self) -> None:
            self.settings = settings
            self.evidence = Evidence()
            self.finding: Any = None
            self._sample: ParameterSample | None = None
            self._before: Any = None
            self._checked = False
            self._hook: Any = None

        def on_step_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
            # Not on_train_begin: transformers 5 calls it before the DeepSpeed engine (and ZeRO-3 shards) exist.
            if self._sample is not None or self._checked or model is None:
                return
            self._sample = ParameterSample(model, self.settings)
            self._before = self._sample.read()
            self.evidence.trainable_elements = self._sample.trainable_elements
            optimizer = kwargs.get("optimizer")
            import torch

            low = {torch.bfloat16, torch.float16}
            self.evidence.low_precision_weights = bool(self._sample.dtypes & low) and not _has_master_weights(optimizer)
            inner = _innermost_torch_optimizer(optimizer)
            if inner is not None:
                self.evidence.optimizer_steps = 0
                self._hook = inner.register_step_post_hook(self._count_step)

        def _count_step(self, *_: Any) -> None:
            self.evidence.optimizer_steps = (self.evidence.optimizer_steps or 0) + 1

        def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
            logs = logs or {}
            for key, series in (("learning_rate", "learning_rates"), ("grad_norm", "grad_norms"), ("kl", "kls")):
                if isinstance(logs.get(key), (int, float)):
                    getattr(self.evidence, series).append(float(logs[key]))
            fraction = next((logs[k] for k in ZERO_SPREAD_FRACTION_KEYS if k in logs), None)
            spread = next((logs[k] for k in REWARD_SPREAD_KEYS if k in logs), None)
            if fraction is not None:
                self.evidence.zero_spread.append(float(fraction) >= 1.0)
            elif spread is not None:
                self.evidence.zero_spread.append(float(spread) == 0.0)
            if self._checked and self.finding is None:  # rewards can flatten later in the run too
                self._report(diagnose(self.evidence, self.settings))

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if not self._checked and state.global_step >= self.settings.check_after_steps:
                self._check(state)

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if not self._checked and state.global_step > 0:
                self._check(state)
            if self._hook is not None:
                self._hook.remove()

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

        def _report(self, finding: Any) -> None:
            if finding is None:
                return
            self.finding = finding  # once: later evidence does not repeat the message
            if self.settings.mode == "stop":
                raise TrainingStalledError(finding.message())
            from grpo_compat.core.logs import log

            log("warning", "%s", finding.message())

    return LearningWatchdog()
