"""Route TRL's Liger GRPO loss to its non-Liger loss while DeepSpeed ZeRO-3 holds lm_head as a shard.

Symptom:   RuntimeError: The size of tensor a (0) must match the size of tensor b (4096) at non-singleton
           dimension 1, at the first training step, with use_liger_loss / use_liger_kernel and ZeRO-3: Liger's fused
           loss reads lm_head.weight by attribute, never through the lm_head module, so ZeRO-3's gather hook never
           fires and the matmul gets the empty local shard (an lm_head tied to the embeddings, or one under
           stage3_param_persistence_threshold, is whole and trains).
Upstream:  linkedin/Liger-Kernel#1048, huggingface/trl#3368; huggingface/trl#5891 (trl 1.6.0) gathers lm_head's
           weight and bias for the fused call. Gathering them here, as 1.6 does, got the forward through on CPU but
           the backward still failed the same way (the fused loss's gradient meets the shard again), so this patch
           routes the step to TRL's non-Liger loss (same objective, through the model's forward, which ZeRO-3
           gathers), as trl.liger-lm-head-guard does for a model that returns logits.
Versions:  trl 0.17 to 1.5 with liger-kernel and DeepSpeed. Reproduced on CPU, 2 processes: trl 0.23.1 + liger-kernel
           0.6.2 + DeepSpeed 0.19.8 ZeRO-3, an untied tiny Qwen2 (lm_head 504 x 256) and ds3_gather_for_generation
           False (matrix cell trl-0.23-liger-zero3, reproducer liger-zero3-empty-lm-head); the non-Liger loss trains.
           Where lm_head is whole (tied to the embeddings, persisted, or left gathered by generation: the same
           tiny run with ds3_gather_for_generation=True trains with Liger) nothing changes.
Remove when: the oldest supported trl is >= 1.6.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch


def _partitioned_head(trainer: Any, args: tuple, kwargs: dict) -> list[Any]:
    """The lm_head weight (and bias) ZeRO-3 holds as a shard now; [] when none is or this is not ZeRO-3."""
    plugin = getattr(getattr(getattr(trainer, "accelerator", None), "state", None), "deepspeed_plugin", None)
    if plugin is None or getattr(plugin, "zero_stage", None) != 3:
        return []
    from grpo_compat.fixes.liger import model_argument

    head = getattr(trainer.accelerator.unwrap_model(model_argument(args, kwargs)), "lm_head", None)
    from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus

    params = [p for p in (getattr(head, "weight", None), getattr(head, "bias", None)) if p is not None]
    # Whole already (tied to the embeddings, persisted, or left gathered): Liger's fused loss works on it.
    if any(getattr(p, "ds_status", ZeroParamStatus.AVAILABLE) != ZeroParamStatus.AVAILABLE for p in params):
        return params
    return []


@patch(
    id="trl.liger-zero3-lm-head-route",
    catalogue="liger-zero3-empty-lm-head",
    requires=("trl>=0.17,<1.6", "liger-kernel", "deepspeed"),
    targets="trl.trainer.grpo_trainer:GRPOTrainer.compute_liger_loss",
    expects=("self",),
)
def non_liger_loss_for_a_sharded_head(wrapped: Any, trainer: Any, *args: Any, **kwargs: Any) -> Any:
    if not _partitioned_head(trainer, args, kwargs):
        return wrapped(trainer, *args, **kwargs)  # a whole lm_head: upstream's fused loss works
    from grpo_compat.fixes.liger import non_liger_loss

    why = (
        "DeepSpeed ZeRO-3 holds lm_head as a shard and this trl hands Liger's fused loss the shard itself (the step "
        "would fail with 'The size of tensor a (0) must match ...'); computing TRL's non-Liger GRPO loss instead, "
        'which gathers it through the model. pip install "trl>=1.6" gathers it for Liger.'
    )
    return non_liger_loss(wrapped, trainer, args, kwargs, why, "trl.liger-zero3-lm-head-route")
