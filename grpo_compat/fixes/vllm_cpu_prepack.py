"""vLLM's CPU build packs its linear weights away after loading: how to tell, how to load into them, what they hold.

After loading, vLLM's CPU build hands each linear layer to dispatch_cpu_unquantized_gemm(layer, remove_weight=True).
Where its kernels (oneDNN, the sgl kernel) take the layer's dtype (float32 on any x86 CPU; bf16 on CPUs with
AVX512-BF16 / AMX) it packs the weight into the layer's ``cpu_linear`` and replaces ``layer.weight`` with an empty
Parameter that has no weight_loader, so the model's load_weights fails on it ("'Parameter' object has no attribute
'weight_loader'"). Where they refuse the dtype (bf16 on an AVX2 CPU) the weight stays and loads as usual.

vLLM's own in-place update, ``model_runner.reload_weights(weights_iterator=..., is_checkpoint_format=True)`` (vLLM >=
0.18), restores each layer on its recorded parameters, loads it and packs it again. It leaves one kind of layer
packed from the old weights: a layer whose weight is another's (a tied lm_head: its weight is the embedding's, which
loads under the embedding's name), so the layers that keep their weight beside a packed copy are packed again
(``repack_kept_weights``). Used by trl.vllm-cpu-prepacked-sync and swift.vllm-cpu-prepacked-sync (the sync) and by
trl.vllm-sync-check (``packed_columns``: what a packed layer computes with).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Iterator
from typing import Any

# Columns of a packed weight read back by the sync check: a few identity rows through the layer's own kernel.
READ_COLUMNS = 8


def cpu_packs_bf16() -> bool:
    """Whether this CPU has bf16 matmul (AVX512-BF16 or AMX-BF16, the flags Linux lists), so that vLLM's CPU build
    packs a bf16 engine's linear weights away too (oneDNN refuses bf16 without them; vLLM itself asks
    torch.cpu._is_avx512_bf16_supported()). Read from /proc/cpuinfo: no torch import; False where it is absent."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return bool({"avx512_bf16", "amx_bf16"} & set(line.split(":", 1)[1].split()))
    except OSError:
        pass
    return False


def model_runner(llm_engine: Any) -> Any | None:
    """The model runner of an in-process (colocated) vLLM engine; None where it has none here."""
    try:
        driver = llm_engine.model_executor.driver_worker
    except AttributeError:
        return None
    worker = getattr(driver, "worker", None) or driver  # vLLM's WorkerWrapperBase holds the worker
    return getattr(worker, "model_runner", None)


def emptied_parameters(model: Any) -> list[str]:
    """Names of the parameters vLLM's CPU build packed away: empty, and without the weight_loader loading needs."""
    return [
        name for name, param in model.named_parameters() if param.numel() == 0 and not hasattr(param, "weight_loader")
    ]


def prepacked_runner(llm_engine: Any) -> Any | None:
    """The engine's model runner when its model holds packed-away weights and it can reload in place; else None."""
    runner = model_runner(llm_engine)
    model = getattr(runner, "model", None)
    reload = getattr(runner, "reload_weights", None)
    if model is None or reload is None or "is_checkpoint_format" not in inspect.signature(reload).parameters:
        return None
    return runner if emptied_parameters(model) else None


def reload(runner: Any, weights: Iterable[tuple[str, Any]]) -> None:
    """Load checkpoint-format (name, tensor) pairs into a prepacked engine in place, then pack again the layers that
    keep their weight beside a packed copy (a tied lm_head), which the reload leaves stale."""
    runner.reload_weights(weights_iterator=iter(weights), is_checkpoint_format=True)
    repack_kept_weights(runner.model)


def repack_kept_weights(model: Any) -> list[str]:
    """Pack again each layer that computes through a packed copy of a weight it keeps (vLLM's embedding / lm_head
    method packs with remove_weight=False); the names repacked. Layers whose weight is packed away are left alone:
    processing them again would pack their empty weight (and raises on AVX512-BF16 CPUs, which read a 1-D weight as
    a convolution's)."""
    repacked = []
    for name, layer in linear_layers(model):
        method, weight = getattr(layer, "quant_method", None), layer.weight
        if method is not None and weight.ndim == 2 and weight.numel() > 0 and not weight.is_meta:
            method.process_weights_after_loading(layer)
            repacked.append(name)
    return repacked


def linear_layers(model: Any) -> Iterator[tuple[str, Any]]:
    """(name, layer) of each layer that computes through vLLM's CPU GEMM dispatch (``cpu_linear``)."""
    for name, layer in model.named_modules():
        if hasattr(layer, "cpu_linear") and getattr(layer, "weight", None) is not None:
            yield name, layer


def packed_columns(layer: Any, in_features: int, columns: int = READ_COLUMNS) -> Any:
    """The first ``columns`` columns of the weight ``layer`` computes with, one a row ((columns, out_features)):
    identity rows through its own kernel, so a packed weight is read as the kernel holds it."""
    import torch

    rows = torch.eye(min(columns, in_features), in_features, dtype=layer.weight.dtype, device=layer.weight.device)
    with torch.no_grad():
        return layer.cpu_linear(rows, layer.weight, None)
