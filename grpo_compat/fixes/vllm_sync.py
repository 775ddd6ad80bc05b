"""After the first weight syncs to a colocated vLLM engine: does vLLM hold the policy's weights?

Census row 25: vLLM kept sampling from the base (stale) weights while the policy moved, so the reward stayed flat
and nothing said why. Checked at the first two syncs (trl syncs first at step 0, before any update), on the
parameters vLLM stores under the policy's own names (embeddings, norms, output projections: fused ones such as
qkv_proj are not compared), each cast to vLLM's dtype. Only where reading them needs no collective: a sharded
(ZeRO-3, FSDP) or PEFT policy is not checked.
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
        if copy is None or copy.shape != param.shape:
            continue
        compared += 1
        if not torch.equal(copy.detach().cpu(), param.detach().to(copy.dtype).cpu()):
            differing.append(name)
    return differing, compared


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
    engine = generation.llm.llm_engine.model_executor.driver_worker.model_runner.model
    differing, compared = stale_parameters(policy_parameters(generation), engine)
    if differing:
        raise VLLMWeightsError(
            f"after a weight sync, vLLM generates with weights that are not the policy's: {len(differing)} of "
            f"{compared} compared parameters differ ({', '.join(differing[:5])}). Completions would be sampled from "
            "stale weights while the policy trains (census row 25: flat reward, moving weights). Fix: a trl whose "
            "sync reaches vLLM (see the catalogue record vllm-stale-weights); report it with `grpo-compat doctor`."
        )
