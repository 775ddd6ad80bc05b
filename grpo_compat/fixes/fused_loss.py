"""The fused loss is the objective: trl's fused (Liger) GRPO loss checked once against trl's own loss.

trl's ``use_liger_loss`` (0.17-0.24) / ``use_liger_kernel`` (0.25-1.13) sends every training step to Liger's
fused linear + GRPO loss, a second implementation of the objective that ``_compute_loss`` computes. Where the two
differ, the run trains another objective without a word: a trainer subclass whose ``_compute_loss`` the fused path
never calls (GMPOTrainer, census row 32), a term only ``_compute_loss`` adds (a MoE router's auxiliary loss), a
normaliser computed differently (dapo / cispo / vespo under gradient accumulation, N16), a correction the fused loss
ignores (vLLM's importance-sampling ratio, N15).

On the first training micro-batch only, after the fused loss is computed, :func:`check_first_fused_loss` computes
``_compute_loss`` on the same model and inputs under ``torch.no_grad()``, with the random state (CPU and CUDA) and the
trainer's logged metrics put back as they were: no backward, no gradient, no RNG draw, no log line changes the run.
It costs one forward of the policy, once. Beyond numerical tolerance it warns (``GRPO_COMPAT_WATCHDOG=stop``: raises
ObjectiveMismatchError) with both values and the settings that explain the difference.
"""

from __future__ import annotations

import contextlib
import math
from typing import Any

from grpo_compat.core.errors import ObjectiveMismatchError

HEADLINE = "The fused GRPO loss is not the objective"
# Liger's chunked loss and trl's loss agree to float rounding: in float32 within about 1e-6 relative (measured on
# the agreeing pairs of docs/objective-invariants.md); bf16 / fp16 weights round each log-prob to 8 / 11 bits.
RELATIVE_TOLERANCE = {"float32": 1e-4, "float64": 1e-6}
RELATIVE_TOLERANCE_HALF = 2e-2
ABSOLUTE_TOLERANCE = 1e-6
CHECKED = "_grpo_compat_fused_loss_checked"  # set on the trainer once its first batch was compared
# The outcome, on the trainer, for tests and probes: {"fused": x, "reference": y, "agrees": bool, ...}.
OUTCOME = "_grpo_compat_fused_loss_check"


def fused_loss_on(trainer: Any) -> bool:
    """trl sends the loss to Liger's fused GRPO loss: use_liger_loss (trl 0.17-0.24) or use_liger_kernel (0.25+)."""
    return bool(getattr(trainer, "use_liger_loss", False) or getattr(trainer, "use_liger_kernel", False))


def wants_check(trainer: Any) -> bool:
    """The first training micro-batch of a run on the fused loss, outside ZeRO-3 (whose lm_head is a shard)."""
    if getattr(trainer, CHECKED, False) or not fused_loss_on(trainer):
        return False
    model = getattr(trainer, "model", None)
    if model is None or not getattr(model, "training", False):
        return False  # evaluation: no update depends on it
    return _zero_stage(trainer) != 3


def check_first_fused_loss(trainer: Any, model: Any, inputs: Any, fused: Any, patch_id: str) -> None:
    """Compare the fused loss of this micro-batch with trl's ``_compute_loss`` on it; warn (or stop) on a difference."""
    from grpo_compat.core.logs import log

    setattr(trainer, CHECKED, True)
    try:
        reference = reference_loss(trainer, model, inputs)
    except Exception as exc:  # noqa: BLE001 - a check that cannot run must never end the run
        log("debug", "%s: the reference loss could not be computed (%s); not compared", patch_id, exc)
        return
    fused_value, reference_value = _number(fused), _number(reference)
    tolerance = ABSOLUTE_TOLERANCE + _relative_tolerance(trainer, model) * max(abs(fused_value), abs(reference_value))
    difference = abs(fused_value - reference_value)
    agrees = difference <= tolerance or (math.isnan(fused_value) and math.isnan(reference_value))
    outcome = dict(fused=fused_value, reference=reference_value, tolerance=tolerance, agrees=agrees)
    setattr(trainer, OUTCOME, outcome)
    if agrees:
        log("debug", "%s: fused loss %.8g, reference %.8g: they agree", patch_id, fused_value, reference_value)
        return
    message = mismatch_message(trainer, fused_value, reference_value, tolerance)
    outcome["message"] = message
    from grpo_compat.fixes.watchdog import WatchdogSettings

    if WatchdogSettings.from_env().mode == "stop":
        raise ObjectiveMismatchError(message)
    log("warning", "%s: %s", patch_id, message)


def reference_loss(trainer: Any, model: Any, inputs: Any) -> Any:
    """trl's own ``_compute_loss`` of ``inputs``: no gradient, the random state and the logged metrics kept."""
    import torch

    with torch.no_grad(), _random_state_kept(), _metrics_kept(trainer):
        return trainer._compute_loss(model, inputs)


def mismatch_message(trainer: Any, fused: float, reference: float, tolerance: float) -> str:
    settings = ", ".join(f"{name}={value!r}" for name, value in objective_settings(trainer).items())
    causes = likely_causes(trainer)
    because = " Likely: " + "; ".join(causes) + "." if causes else ""
    return (
        f"{HEADLINE}: on the first batch the fused (Liger) loss is {fused:.6g} and trl's own loss on the same inputs "
        f"is {reference:.6g} (difference {abs(fused - reference):.3g}, tolerance {tolerance:.3g}), so the run trains "
        f"something other than what its settings ask for ({settings}).{because} What to change: set "
        f"{_flag(trainer)}=False, which computes trl's own loss."
    )


# The settings that decide what the GRPO loss computes, as the trainer holds them (absent ones are left out).
_OBJECTIVE_SETTINGS = (
    "loss_type",
    "importance_sampling_level",
    "beta",
    "epsilon_low",
    "epsilon_high",
    "delta",
    "use_bias_correction_kl",
    "current_gradient_accumulation_steps",
)


def objective_settings(trainer: Any) -> dict[str, Any]:
    args = getattr(trainer, "args", None)
    found: dict[str, Any] = {"trainer": type(trainer).__name__}
    for name in _OBJECTIVE_SETTINGS:
        value = getattr(trainer, name, getattr(args, name, None))
        if value is not None:
            found[name] = value
    steps = getattr(args, "steps_per_generation", None)
    if steps is not None:
        found["steps_per_generation"] = steps
    if getattr(trainer, "use_vllm", False):
        found["use_vllm"] = True
        found["vllm_importance_sampling_correction"] = getattr(trainer, "vllm_importance_sampling_correction", None)
    if getattr(trainer, "aux_loss_enabled", False):
        found["router_aux_loss_coef"] = getattr(trainer, "router_aux_loss_coef", None)
    return found


def likely_causes(trainer: Any) -> list[str]:
    """What is known to make trl's fused loss differ from ``_compute_loss``, among what this trainer holds."""
    causes = []
    compute_loss = getattr(type(trainer), "_compute_loss", None)
    grpo = next((c for c in type(trainer).__mro__ if c.__name__ == "GRPOTrainer"), None)
    if grpo is not None and type(trainer) is not grpo and compute_loss is not getattr(grpo, "_compute_loss", None):
        causes.append(
            f"{type(trainer).__name__} overrides _compute_loss (its objective), which the fused path never calls: "
            "it trains GRPO's (census row 32)"
        )
    if getattr(trainer, "aux_loss_enabled", False):
        causes.append("the MoE router's auxiliary loss is added by trl's own loss only, not by the fused one")
    args = getattr(trainer, "args", None)
    accumulation = getattr(trainer, "current_gradient_accumulation_steps", None) or getattr(
        args, "gradient_accumulation_steps", 1
    )
    if getattr(trainer, "loss_type", None) in ("dapo", "cispo", "vespo") and (accumulation or 1) > 1:
        causes.append(
            f"loss_type={trainer.loss_type!r} with gradient accumulation: the fused loss divides by this micro-batch's "
            "tokens, trl's own loss by the generation batch's (trl PR #5890; fixed in trl 1.11)"
        )
    if getattr(trainer, "use_vllm", False) and getattr(trainer, "vllm_importance_sampling_correction", False):
        causes.append("vLLM's importance-sampling ratio, which Liger's GRPO loss before its fix ignores (N15)")
    if _prompt_learning(getattr(trainer, "model", None)):
        causes.append("a prompt-learning PEFT adapter, whose virtual tokens the fused path never prepends (N21)")
    return causes


def _prompt_learning(model: Any) -> bool:
    configs = getattr(model, "peft_config", None)
    return isinstance(configs, dict) and any(
        getattr(config, "is_prompt_learning", False) for config in configs.values()
    )


def _flag(trainer: Any) -> str:
    return "use_liger_loss" if getattr(trainer, "use_liger_loss", False) else "use_liger_kernel"


def _number(loss: Any) -> float:
    return float(loss.detach().float().item()) if hasattr(loss, "detach") else float(loss)


def _relative_tolerance(trainer: Any, model: Any) -> float:
    unwrapped = trainer.accelerator.unwrap_model(model) if hasattr(trainer, "accelerator") else model
    weight = getattr(getattr(unwrapped, "lm_head", None), "weight", None)
    dtype = str(getattr(weight, "dtype", "float32")).replace("torch.", "")
    args = getattr(trainer, "args", None)
    mixed = getattr(args, "bf16", False) or getattr(args, "fp16", False)
    return RELATIVE_TOLERANCE_HALF if mixed else RELATIVE_TOLERANCE.get(dtype, RELATIVE_TOLERANCE_HALF)


def _zero_stage(trainer: Any) -> int | None:
    plugin = getattr(getattr(getattr(trainer, "accelerator", None), "state", None), "deepspeed_plugin", None)
    return getattr(plugin, "zero_stage", None)


@contextlib.contextmanager
def _random_state_kept() -> Any:
    """Python, NumPy and torch (CPU and every CUDA device) random states as they were."""
    import torch

    from grpo_compat.fixes.rewards import random_state_kept

    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with random_state_kept(), torch.random.fork_rng(devices=devices):
        yield


@contextlib.contextmanager
def _metrics_kept(trainer: Any) -> Any:
    """trl's logged metrics (``_metrics[mode][key]`` lists) as they were: the reference loss logs its own."""
    metrics = getattr(trainer, "_metrics", None)
    kept = {mode: {key: len(values) for key, values in logged.items()} for mode, logged in (metrics or {}).items()}
    try:
        yield
    finally:
        for mode, logged in (metrics or {}).items():
            for key in list(logged):
                if key not in kept.get(mode, {}):
                    del logged[key]
                else:
                    del logged[key][kept[mode][key] :]
