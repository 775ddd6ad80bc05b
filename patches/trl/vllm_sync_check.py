"""Check at the first syncs that a colocated vLLM engine generates with the policy's weights.

Symptom:   none: vLLM keeps sampling from the base (stale) weights while the policy trains; rewards stay flat,
           weights move, nothing is logged (census row 25).
Upstream:  huggingface/trl#2856 (trl <= 0.15), modelscope/ms-swift#9855, PR #4584 (ms-swift 3.5, 4.3.1).
Versions:  reported on trl <= 0.15 and ms-swift; checked on every trl >= 1.0 colocate run (VLLMGeneration.sync_weights),
           at the first two syncs (trl's first sync, at step 0, precedes any update; stale weights show at the
           second), on the parameters vLLM stores under the policy's names. Reported versions cannot run here (their
           vLLM's CPU builds pin torch 2.6-2.7); the check is proven by a sync that does not reach vLLM
           (matrix reproducer vllm-stale-weights) and stays silent on every vLLM cell's healthy runs. trl 1.9 has no
           VLLMGeneration._iter_named_params: the policy's named_parameters are compared there (trl's own
           test_train_vllm crashed patched on it before, cell trl-1.9-vllm's upstream:grpo-vllm).
Remove when: never needed upstream; keep while vLLM generation is supported.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch

_SYNCS_CHECKED = "_grpo_compat_syncs_checked"
CHECKED_SYNCS = 2


@patch(
    id="trl.vllm-sync-check",
    catalogue="vllm-stale-weights",
    requires=("trl>=1.0", "vllm"),
    targets="trl.generation.vllm_generation:VLLMGeneration.sync_weights",
    expects=("self",),
)
def check_first_sync(wrapped: Any, generation: Any, *args: Any, **kwargs: Any) -> Any:
    result = wrapped(generation, *args, **kwargs)
    checked = getattr(generation, _SYNCS_CHECKED, 0)
    if checked < CHECKED_SYNCS:
        setattr(generation, _SYNCS_CHECKED, checked + 1)
        from grpo_compat.fixes.vllm_sync import check_first_sync as check

        check(generation)
    return result
