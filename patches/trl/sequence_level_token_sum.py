"""Warn, when GRPOConfig is built, that GSPO with a token-summed loss type weights every sequence by its length.

Symptom:   none: importance_sampling_level="sequence" with loss_type bnpo / dr_grpo / dapo / cispo trains, but each
           sequence's ratio is summed over its tokens, so the update weights a sequence by its completion length
           (GSPO's objective weighs each once: loss_type="grpo"). dapo is trl's default loss type from 0.22, so
           setting only importance_sampling_level="sequence" gets it.
Upstream:  huggingface/trl#3823; trl PR #6042 (trl 1.7.0) logs the same warning in GRPOTrainer.__init__.
Versions:  trl 0.20.0 (importance_sampling_level added) to 1.6.x; read in every release's grpo_trainer.py (1.7.0 has
           trl's warning, 1.6.0 not). Reproduced on CPU: trl 0.23.1 (reproducer gspo-token-summed): trains silently.
Remove when: the oldest supported trl is >= 1.7.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch

PATCH_ID = "trl.sequence-level-token-sum"


@patch(
    id=PATCH_ID,
    catalogue="gspo-token-summed-loss",
    requires="trl>=0.20,<1.7",
    targets="trl.trainer.grpo_config:GRPOConfig.__post_init__",
    expects=("self",),
)
def warn_sequence_level_token_sum(wrapped: Any, config: Any, *args: Any, **kwargs: Any) -> Any:
    result = wrapped(config, *args, **kwargs)  # after upstream's: the loss type and level as trl resolved them
    from grpo_compat.core.logs import log
    from grpo_compat.fixes.objective_settings import sequence_level_token_summed

    warning = sequence_level_token_summed(config)
    if warning:
        log("warning", "%s: %s", PATCH_ID, warning)
    return result
