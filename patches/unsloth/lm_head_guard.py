"""Check what Unsloth's compiled GRPO loss projects through lm_head; logits are used as logits (KF-3).

Symptom:   Unsloth's GRPO loss asks the model for hidden states (UNSLOTH_RETURN_HIDDEN_STATES=1) and
           multiplies `.logits` by lm_head itself. A model whose forward ignores that switch (Mistral
           before unsloth PR #1900, Nemotron-H, remote-code models) returns logits, and the compiled
           loss fails: "TorchRuntimeError ... a and b must have same reduction dim, but got
           [s0, 32000] X [4096, 32000]" (Mistral 7B, vocab 32000, hidden 4096).
Upstream:  unslothai/unsloth#1790 (KF-3); unsloth-zoo checked the width for VLMs in
           2026.3.2 (#546) and for text models only from 2026.5.4 (#602, merged 2026-05-22).
Versions:  unsloth-zoo 2025.2.5-2026.5.3 (the text path projects whatever the model returned).
Remove when: the oldest supported unsloth-zoo is >= 2026.5.4.

What runs is not unsloth_zoo.rl_replacements: Unsloth copies those functions as source text into a
generated module, unsloth_compiled_cache/UnslothGRPOTrainer.py, whose trainer calls its own copies by
global name. So the guard wraps the copies in that module: when zoo's create_new_function generates it
(apply() before `import unsloth`), or, if it was generated before apply(), through the optional
targets below. Shapes are decided by grpo_compat.fixes.shapes.projection_input (shared with the TRL guard):
- `chunked_hidden_states_selective_log_softmax` (zoo 2026.1.2+: every log-prob of the text path):
  hidden states go to it untouched; logits go to the module's own `chunked_selective_log_softmax`,
  as zoo 2026.5.4 does (scaling and softcapping were applied by the model's forward).
- `UnslothEfficientGRPO.forward` (zoo 2025.2.5-2025.12: projects inside a compiled closure, nothing to
  reroute to): hidden states go on untouched; logits raise LMHeadShapeError with the cause and fix.
- any other width: LMHeadShapeError naming both shapes.
revert() unwraps create_new_function; a trainer module generated while the patch was on keeps its
guard, which only ever changes calls that would have crashed. Proven on CPU by tests of the same
functions and shapes (tests/test_lm_head_shape_guard.py); on a GPU with Unsloth: pending.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

from grpo_compat.core.registry import patch_each

PATCH_ID = "unsloth.lm-head-guard"
GENERATED = "UnslothGRPOTrainer"  # zoo imports it by this name, or as unsloth_cache_<name> / <cache dir>.<name>
PROJECTION = "chunked_hidden_states_selective_log_softmax"
LOGITS_PATH = "chunked_selective_log_softmax"
FIX = "Upgrade unsloth (its forwards honour UNSLOTH_RETURN_HIDDEN_STATES since PR #1900) and unsloth-zoo>=2026.5.4"


def _head(lm_head: Any) -> tuple[int, int] | None:
    from grpo_compat.fixes.shapes import lm_head_shape

    return lm_head_shape(lm_head)


def guarded_projection(wrapped: Any, hidden_states: Any, lm_head: Any, index: Any, *args: Any, **kwargs: Any) -> Any:
    """``wrapped(hidden_states, lm_head, index, ...)``, or the log-probs of ``hidden_states`` if they are logits."""
    from grpo_compat.core.errors import LMHeadShapeError
    from grpo_compat.fixes.shapes import HIDDEN, logits_message, projection_input

    head = _head(lm_head)
    where = f"Unsloth GRPO {PROJECTION}"
    if head is None or projection_input(hidden_states.shape, head, where) == HIDDEN:
        return wrapped(hidden_states, lm_head, index, *args, **kwargs)
    import inspect

    call = inspect.signature(wrapped).bind(hidden_states, lm_head, index, *args, **kwargs)
    call.apply_defaults()
    temperature = call.arguments.get("temperature", 1.0)
    select = getattr(sys.modules.get(getattr(wrapped, "__module__", "")), LOGITS_PATH, None)
    if select is None:
        raise LMHeadShapeError(f"{logits_message(hidden_states.shape, head, where)}. {FIX}.")
    if "temperature" in inspect.signature(select).parameters:
        return select(hidden_states, index, temperature)
    return select(hidden_states / temperature if temperature != 1.0 else hidden_states, index)  # zoo < 2026.3.2


def guarded_grpo_forward(wrapped: Any, *args: Any, **kwargs: Any) -> Any:
    """``UnslothEfficientGRPO.forward``: its hidden-state arguments must be hidden states."""
    import inspect

    from grpo_compat.core.errors import LMHeadShapeError
    from grpo_compat.fixes.shapes import LOGITS, logits_message, projection_input

    try:
        arguments = inspect.signature(wrapped).bind(*args, **kwargs).arguments
    except TypeError:
        return wrapped(*args, **kwargs)  # a bad call: upstream's own error says what is wrong
    head = _head(arguments.get("lm_head"))
    for name, value in arguments.items() if head is not None else ():
        if name.endswith("_hidden_states") and getattr(value, "ndim", 0) >= 1:
            where = f"Unsloth GRPO UnslothEfficientGRPO ({name.strip('_')})"
            if projection_input(value.shape, head, where) == LOGITS:
                raise LMHeadShapeError(f"{logits_message(value.shape, head, where)}. {FIX}.")
    return wrapped(*args, **kwargs)


def guard_generated_module(module: Any) -> None:
    """Wrap the projections of a generated UnslothGRPOTrainer module (idempotent).

    Not recorded for revert(): the module is new, and the guard only changes calls that would crash.
    """
    from grpo_compat.core.wrapping import is_wrapped_by, underlying_function, wrap

    grpo = getattr(module, "UnslothEfficientGRPO", None)
    owners = ((module, PROJECTION, guarded_projection), (grpo, "forward", guarded_grpo_forward))
    for owner, name, guard in owners:
        # The module's and the class's own attribute only: an inherited forward is not the generated loss.
        raw = vars(owner).get(name) if isinstance(owner, type | ModuleType) else None
        if callable(underlying_function(raw)) and not is_wrapped_by(raw, PATCH_ID):
            wrap(owner, name, raw, guard, PATCH_ID)


def guard_new_trainer_module(wrapped: Any, *args: Any, **kwargs: Any) -> Any:
    """``create_new_function``: the module it generates for the GRPO trainer gets the guards."""
    module = wrapped(*args, **kwargs)
    name = args[0] if args else kwargs.get("name")
    if name == GENERATED and module is not None:
        guard_generated_module(module)
    return module


_MODULES = (GENERATED, f"unsloth_cache_{GENERATED}", f"unsloth_compiled_cache.{GENERATED}")

patch_each(
    id=PATCH_ID,
    catalogue="lm-head-applied-twice",
    requires="unsloth-zoo>=2025.2.5,<2026.5.4",
    wrappers={
        "unsloth_zoo.compiler:create_new_function": guard_new_trainer_module,
        # Generated before apply(): wrap the module already there (these never exist at a fresh start).
        **{f"{module}:{PROJECTION}?": guarded_projection for module in _MODULES},
        **{f"{module}:UnslothEfficientGRPO.forward?": guarded_grpo_forward for module in _MODULES},
    },
    rebind_in=("unsloth",),  # unsloth.models.rl imports create_new_function by name
)
