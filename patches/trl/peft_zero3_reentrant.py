"""Use reentrant gradient checkpointing for PEFT under DeepSpeed ZeRO-3 when DeepSpeed cannot recompute.

Symptom:   GRPO with a PEFT adapter, DeepSpeed ZeRO-3 and non-reentrant gradient checkpointing fails at
           the first backward with "torch.utils.checkpoint.CheckpointError: torch.utils.checkpoint:
           Recomputed values for the following tensors have different metadata than during the forward
           pass ... saved {'shape': [N]} vs recomputed {'shape': [0]}": the recomputation re-runs ZeRO-3's
           hooks, which re-partition the frozen base weights the checkpoint kept.
Upstream:  huggingface/trl#4951 (SFTTrainer, trl 0.28.0) and huggingface/trl#6356 (GRPO and the other
           trainers, trl 1.9.0), transformers#47254; DeepSpeed's own fix is deepspeedai/DeepSpeed#8148
           ("Z3: Support for activation ckpt with frozen params"), shipped in DeepSpeed 0.19.3.
Versions:  trl 0.14-1.8 with peft, ZeRO-3 and a DeepSpeed without #8148 (< 0.19.3), whenever
           checkpointing is non-reentrant: trl 0.27+ make use_reentrant=False the default, transformers 5
           too, and anyone may pass it. Reproduced on CPU with trl 0.29.1 + DeepSpeed 0.19.0 + peft 0.18.1.
Remove when: the oldest supported trl is 1.9, or the oldest supported DeepSpeed has #8148.

Before GRPOTrainer.__init__, as trl 1.9 does: `gradient_checkpointing_kwargs["use_reentrant"] = True`,
with a warning when it was False. DeepSpeed is feature-detected (#8148's `update_recompute_parameters`),
not versioned. Reentrant checkpointing needs input grads: trl 0.16+ enable them in __init__ from these
kwargs; on trl 0.14/0.15, trl.peft-input-grads does. ms-swift forces reentrant checkpointing itself.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch
from grpo_compat.fixes.detectors import trl_grpo_trainer_init_present


def deepspeed_recomputes_frozen_params() -> bool:
    """Whether the installed DeepSpeed has #8148 (ZeRO-3 activation checkpointing with frozen params)."""
    from deepspeed.runtime.zero import partitioned_param_coordinator

    return hasattr(partitioned_param_coordinator, "update_recompute_parameters")


def must_reenter(model: Any, args: Any, peft_config: Any) -> bool:
    """PEFT + ZeRO-3 + checkpointing that is not already reentrant, on a DeepSpeed without #8148."""
    if args is None or not getattr(args, "gradient_checkpointing", False):
        return False
    if (getattr(args, "gradient_checkpointing_kwargs", None) or {}).get("use_reentrant") is True:
        return False
    plugin = getattr(args, "deepspeed_plugin", None)
    if plugin is None or getattr(plugin, "zero_stage", None) != 3:
        return False
    from accelerate.utils import is_peft_model  # trl imports it already

    if peft_config is None and (isinstance(model, str) or not is_peft_model(model)):  # a str: a hub id or path
        return False
    return not deepspeed_recomputes_frozen_params()


@patch(
    id="trl.peft-zero3-reentrant",
    catalogue="peft-zero3-checkpoint-error",
    requires=("trl>=0.14,<1.9", "peft", "deepspeed<0.19.3"),  # and #8148 feature-detected below it
    targets="trl.trainer.grpo_trainer:GRPOTrainer.__init__",
    expects=("self", "model", "args", "peft_config"),
    detect=trl_grpo_trainer_init_present,
)
def reentrant_checkpointing(wrapped: Any, trainer: Any, *args: Any, **kwargs: Any) -> Any:
    from grpo_compat.core.wrapping import bound_arguments

    bound = bound_arguments(wrapped, trainer, *args, **kwargs)
    config = bound.get("args")
    if must_reenter(bound.get("model"), config, bound.get("peft_config")):
        asked = dict(config.gradient_checkpointing_kwargs or {})
        if asked.get("use_reentrant") is False:
            from grpo_compat.core.logs import log

            log(
                "warning",
                "gradient_checkpointing_kwargs use_reentrant=False fails with PEFT under DeepSpeed ZeRO-3 "
                "(CheckpointError, TRL #4951/#6356) on this DeepSpeed, which lacks DeepSpeed#8148: "
                "using use_reentrant=True. Upgrade to DeepSpeed >= 0.19.3 to keep non-reentrant checkpointing.",
            )
        config.gradient_checkpointing_kwargs = {**asked, "use_reentrant": True}
    return wrapped(trainer, *args, **kwargs)
