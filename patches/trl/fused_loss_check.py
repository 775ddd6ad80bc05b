"""Check once, on the first batch, that TRL's fused (Liger) GRPO loss equals TRL's own loss for the same inputs.

Symptom:   none: with use_liger_loss / use_liger_kernel the run trains on Liger's fused loss, a second implementation
           of the objective. Where it differs from trl's _compute_loss the run trains another objective without a
           word: GMPOTrainer trains GRPO's (trl #7270, census row 32), a MoE router's auxiliary loss is dropped
           (trl #7009), dapo / cispo / vespo under gradient accumulation are normalised per micro-batch (trl PR
           #5890, N16), vLLM's importance-sampling ratio is ignored (Liger-Kernel #1082, N15).
Upstream:  huggingface/trl#7270, #7009, #5890, #6186, linkedin/Liger-Kernel#1082: each cause has its own fix; trl 1.14
           computes the loss in one place (no fused GRPO loss).
Versions:  trl 0.17 (use_liger_loss) to 1.13.x (use_liger_kernel), with liger-kernel: compute_liger_loss exists in
           exactly these. Reproduced on CPU: trl 1.9.2 + liger-kernel 0.8.0 (cell trl-1.9-liger), dapo with
           gradient accumulation and a tiny Qwen3-MoE (probe fused-loss). Agreeing: trl 0.23.1 + liger-kernel 0.6.2
           (bnpo) and trl 1.9.2 (bnpo, grpo): silent, weights identical to plain.
Remove when: the oldest supported trl is >= 1.14.

The comparison (grpo_compat.fixes.fused_loss) runs after the fused loss of the first training micro-batch: trl's
_compute_loss on the same model and inputs under torch.no_grad(), random state and logged metrics kept. It changes
nothing the run computes; it warns (GRPO_COMPAT_WATCHDOG=stop: ObjectiveMismatchError) with both values, the
settings and the likely cause. Not under DeepSpeed ZeRO-3 (lm_head is a shard outside its forward).
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch

PATCH_ID = "trl.fused-loss-check"


@patch(
    id=PATCH_ID,
    catalogue=(
        "fused-loss-not-objective",
        "moe-aux-loss-dropped-liger",
        "liger-token-normalisation-accumulation",
        "liger-prompt-learning-peft",
    ),
    requires=("trl>=0.17,<1.14", "liger-kernel"),
    targets="trl.trainer.grpo_trainer:GRPOTrainer.compute_loss",
    expects=("self", "model", "inputs"),
)
def check_fused_loss(wrapped: Any, trainer: Any, *args: Any, **kwargs: Any) -> Any:
    from grpo_compat.fixes.fused_loss import check_first_fused_loss, wants_check

    if not wants_check(trainer):
        return wrapped(trainer, *args, **kwargs)
    from grpo_compat.core.wrapping import bound_arguments

    called = bound_arguments(wrapped, trainer, *args, **kwargs)
    loss = wrapped(trainer, *args, **kwargs)
    if called.get("return_outputs"):
        return loss  # trl raises on it before computing anything; nothing to compare
    check_first_fused_loss(trainer, called.get("model"), called.get("inputs"), loss, PATCH_ID)
    return loss
