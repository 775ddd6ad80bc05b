"""After the first weight syncs to a colocated vLLM engine: does vLLM hold the policy's weights?

Census row 25: vLLM kept sampling from the base (stale) weights while the policy moved, so the reward stayed flat
and nothing said why. Checked at the first two syncs (trl syncs first at step 0, before any update), each weight cast
to vLLM's dtype: the parameters vLLM stores under the policy's own names (norms, output projections; a vocabulary
padded by vLLM on the policy's rows), and what each layer of vLLM's CPU GEMM dispatch computes with, read through its
own kernel (grpo_compat.fixes.vllm_cpu_prepack.packed_columns: the first columns of the weight; fused qkv_proj /
gate_up_proj against their parts, stacked). vLLM's CPU build packs those weights away (empty parameters) where its
kernels take the dtype, so without the second comparison the check saw nothing there. Only where reading them needs
no collective: a sharded (ZeRO-3, FSDP) or PEFT policy is not checked.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.errors import GRPOCompatError


class VLLMWeightsError(GRPOCompatError, RuntimeError):
    """vLLM generates with weights that are not the policy's after a weight sync."""


def unchecked_because(generation: Any) -> str | None:
    """Why the weights cannot be compared without collectives here (None: they can)."""
    if getattr(generation, "mode", None) != "colocate":
        return "server mode (the weights live in another process)"
    model = generation.model
    if getattr(getattr(generation, "_dist", None), "is_fsdp", False) or any(
        hasattr(param, "ds_id") for param in model.parameters()
    ):
        return "a sharded policy (ZeRO-3 / FSDP)"
    if hasattr(model, "peft_config"):
        return "a PEFT policy (vLLM holds the merged weights)"
    return None


def stale_parameters(policy: Any, engine_model: Any) -> tuple[list[str], int]:
    """(names whose vLLM copy differs from the policy's, number compared)."""
    import torch

    held = dict(engine_model.named_parameters())
    differing, compared = [], 0
    for name, param in policy:
        copy = held.get(name)
        if copy is None or copy.ndim != param.ndim or copy.shape[1:] != param.shape[1:]:
            continue
        if copy.shape[0] != param.shape[0]:
            if copy.ndim != 2 or copy.shape[0] < param.shape[0]:
                continue
            copy = copy[: param.shape[0]]  # a vocabulary vLLM padded: the policy's rows
        compared += 1
        if not torch.equal(copy.detach().cpu(), param.detach().to(copy.dtype).cpu()):
            differing.append(name)
    return differing, compared


def stale_packed_layers(policy: dict[str, Any], engine_model: Any) -> tuple[list[str], int, float]:
    """(layers of vLLM's CPU GEMM dispatch computing with weights that are not the policy's, number compared,
    largest difference): each layer's first columns read through its kernel against the policy's weight (the parts
    of a fused projection stacked; a layer that keeps its weight, such as a tied lm_head, under that weight's name)."""
    import torch

    from grpo_compat.fixes.vllm_cpu_prepack import linear_layers, packed_columns

    fused = getattr(engine_model, "packed_modules_mapping", None) or {}
    named = {id(param): name for name, param in engine_model.named_parameters()}
    differing, compared, largest = [], 0, 0.0
    for name, layer in linear_layers(engine_model):
        parent, _, leaf = name.rpartition(".")
        if layer.weight.numel() > 0:
            parts = [named.get(id(layer.weight), f"{name}.weight")]
        else:
            parts = [f"{parent}.{part}.weight" if parent else f"{part}.weight" for part in fused.get(leaf, [leaf])]
        weights = [policy.get(part) for part in parts]
        if any(w is None or w.ndim != 2 for w in weights) or len({w.shape[1] for w in weights}) != 1:
            continue
        expected = torch.cat([w.detach() for w in weights]).to(layer.weight.dtype).cpu()
        read = packed_columns(layer, expected.shape[1]).detach().cpu()
        if read.shape[1] < expected.shape[0]:
            continue
        expected = expected[:, : read.shape[0]].T
        read = read[:, : expected.shape[1]]  # a vocabulary vLLM padded: the policy's rows
        compared += 1
        largest = max(largest, (read.float() - expected.float()).abs().max().item())
        if not torch.equal(read, expected):
            differing.append(name)
    return differing, compared, largest


def stale_in_engine(generation: Any, engine_model: Any) -> tuple[list[str], int, int, float]:
    """(names not the policy's, parameters compared by name, CPU GEMM layers compared through their kernels, their
    largest difference) between trl's policy and the colocated engine's model."""
    policy = dict(policy_parameters(generation))
    differing, compared = stale_parameters(policy.items(), engine_model)
    packed_differing, packed_compared, largest = stale_packed_layers(policy, engine_model)
    return differing + packed_differing, compared, packed_compared, largest


def policy_parameters(generation: Any) -> Any:
    """(name, tensor) of the policy under the names vLLM stores them.

    trl's own iterator where it has one (trl 1.16's VLLMGeneration._iter_named_params); trl 1.9's has none (the
    patched run of trl's test_train_vllm crashed on it with AttributeError where the plain one trained), and then
    named_parameters with trl's name fix, what the iterator yields for the unsharded, non-PEFT policies checked.
    """
    iterate = getattr(generation, "_iter_named_params", None)
    if iterate is not None:
        return iterate()
    fix = getattr(generation, "_fix_param_name_to_vllm", lambda name: name)
    return ((fix(name), param.data) for name, param in generation.model.named_parameters())


def check_first_sync(generation: Any) -> None:
    """Raise VLLMWeightsError when the colocated engine's weights are not the policy's after a sync."""
    if unchecked_because(generation) is not None:
        return
    from grpo_compat.fixes.vllm_cpu_prepack import model_runner

    engine = model_runner(generation.llm.llm_engine).model
    differing, compared, packed_compared, _ = stale_in_engine(generation, engine)
    compared += packed_compared
    if differing:
        raise VLLMWeightsError(
            f"after a weight sync, vLLM generates with weights that are not the policy's: {len(differing)} of "
            f"{compared} compared parameters differ ({', '.join(differing[:5])}). Completions would be sampled from "
            "stale weights while the policy trains (census row 25: flat reward, moving weights). Fix: a trl whose "
            "sync reaches vLLM (see the catalogue record vllm-stale-weights); report it with `grpo-compat doctor`."
        )
