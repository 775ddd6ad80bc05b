"""Refuse a GRPOTrainer subclass whose _get_per_token_logps_and_entropies lacks the keywords trl passes it.

Symptom:   TypeError: AsyncGRPOTrainer._get_per_token_logps_and_entropies() got an unexpected keyword argument
           'num_tiles' (axolotl #3971; 'compute_aux_loss' first for a trainer written for trl <= 1.6), at the
           first training step, after the models loaded and the first completions were generated.
Upstream:  axolotl-ai-cloud/axolotl#3971, fixed there by #3976 (an override with trl 1.9.0's signature); the
           same shape in Unsloth's replacement (unslothai/unsloth#6960).
Versions:  trl 1.7 to 1.16: GRPOTrainer._compute_loss calls the method at every step with the keywords of
           LOSS_KEYWORDS (read in the 1.7.0, 1.9.0 and 1.16.0 wheels: compute_aux_loss, spatial_shapes and
           num_tiles arrived in 1.7). Refused only where that call is certain to fail: the override takes
           neither one of those keywords nor **kwargs, and the class inherits trl's compute_loss and _compute_loss
           without the Liger loss (which does not call the method at every step). Reproduced on CPU: trl 1.9.0,
           1.9.2 and 1.16.0 with a subclass of trl 1.6's signature (matrix reproducer logps-override-old-signature).
Remove when: never by version: it checks a subclass against the installed trl (widen the window as trl's
           call is read in newer releases).
"""

from __future__ import annotations

import inspect
from typing import Any

from grpo_compat.core.registry import patch
from grpo_compat.fixes.detectors import trl_grpo_trainer_init_present

# The keywords trl's GRPOTrainer._compute_loss passes _get_per_token_logps_and_entropies (1.7.0 to 1.16.0).
LOSS_KEYWORDS = (
    "compute_entropy",
    "compute_aux_loss",
    "pixel_values",
    "image_grid_thw",
    "num_images",
    "pixel_attention_mask",
    "spatial_shapes",
    "num_tiles",
    "image_sizes",
    "token_type_ids",
    "mm_token_type_ids",
    "image_position_ids",
)
METHOD = "_get_per_token_logps_and_entropies"


def keywords_not_taken(function: Any) -> list[str]:
    """The LOSS_KEYWORDS ``function`` cannot take ([] when it takes **kwargs or has no readable signature)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return []
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return []
    taken = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return [name for name in LOSS_KEYWORDS if name not in taken]


@patch(
    id="trl.refuse-outdated-logps-override",
    catalogue="trl-logps-override-old-signature",
    requires=("trl>=1.7,<1.17",),
    targets="trl.trainer.grpo_trainer:GRPOTrainer.__init__",
    expects=("self", "model", "args"),
    detect=trl_grpo_trainer_init_present,
)
def refuse_outdated_logps_override(wrapped: Any, trainer: Any, *args: Any, **kwargs: Any) -> Any:
    from trl.trainer.grpo_trainer import GRPOTrainer

    from grpo_compat.core.wrapping import bound_arguments
    from grpo_compat.fixes.combinations import installed, refuse

    cls = type(trainer)
    override = getattr(cls, METHOD, None)
    config = bound_arguments(wrapped, trainer, *args, **kwargs).get("args")
    inherits_loss = all(
        getattr(cls, name, None) is getattr(GRPOTrainer, name, None) for name in ("compute_loss", "_compute_loss")
    )
    if (
        override is getattr(GRPOTrainer, METHOD, None)
        or not inherits_loss
        or getattr(config, "use_liger_kernel", False)
    ):
        return wrapped(trainer, *args, **kwargs)
    missing = keywords_not_taken(override)
    if missing:
        owner = next((c for c in cls.__mro__ if METHOD in vars(c)), cls)
        refuse(
            "trl-logps-override-old-signature",
            f"{owner.__module__}.{owner.__qualname__} overrides {METHOD} without the keywords "
            f"{', '.join(missing)}, which {installed('trl')} passes it at every training step: the first step would "
            f"fail with '{METHOD}() got an unexpected keyword argument {missing[0]!r}' after the model loaded.",
            [
                f"upgrade the package that defines {owner.__qualname__} to a release written for this trl",
                "end the override's parameters with **kwargs, pass them on to super(), and return the 3 values "
                "trl >= 1.7 unpacks",
            ],
        )
    return wrapped(trainer, *args, **kwargs)
