"""Refuse a loss_type that the installed liger-kernel's GRPO loss does not compute, before the model loads.

Symptom:   ValueError: Unknown loss type: dapo, at the first training step (after the first generation and
           scoring), from liger_kernel/chunked_loss/grpo_loss.py. trl passes loss_type through unchecked and
           liger stores it without a check; the default loss_type is "dapo" from trl 0.22, which no liger had
           before 0.6.4.
Upstream:  huggingface/trl#4172 (trl 0.26 raised its liger minimum to 0.6.4); census row 32.
Versions:  trl 0.18-1.12 with the Liger GRPO loss (use_liger_loss; use_liger_kernel from trl 0.25) and a
           liger-kernel whose loss lacks the loss_type: dapo before 0.6.4, cispo / sapo before 0.7.0, luspo /
           vespo before 0.8.0 (LOSS_TYPES_SINCE below, read from every liger release). Crashing pairs pip allows:
           trl 0.22-0.25 + liger 0.5.8-0.6.3 (the default), 0.26-0.28 + 0.6.4-0.6.5 (cispo, sapo), 0.28-1.3 +
           liger < 0.8 (luspo, vespo). trl 1.13 uses its own copy of the loss, 1.14+ none: outside the window.
           Reproduced on CPU: trl 0.23.1 + liger-kernel 0.6.2 (matrix cell trl-0.23-liger, reproducer
           liger-loss-type); bnpo trains there, patched with weights identical to plain.
Remove when: the oldest supported trl is >= 1.13 (or requires a liger-kernel that computes every loss_type it has).
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch
from grpo_compat.fixes.detectors import trl_grpo_trainer_init_present

# The first liger-kernel release whose LigerFusedLinearGRPOLoss computes each loss_type (0.5.7 added loss_type).
LOSS_TYPES_SINCE = {
    "grpo": "0.5.7",
    "bnpo": "0.5.7",
    "dr_grpo": "0.5.7",
    "dapo": "0.6.4",
    "cispo": "0.7.0",
    "sapo": "0.7.0",
    "luspo": "0.8.0",
    "vespo": "0.8.0",
}


def liger_loss_selected(args: Any, trl_version: str) -> bool:
    """Whether the config trains with the Liger GRPO loss on this trl (before 0.25 use_liger_kernel is another flag)."""
    from grpo_compat.core.versions import release

    switch = "use_liger_loss" if release(trl_version) < (0, 25) else "use_liger_kernel"
    return getattr(args, switch, False) is True


@patch(
    id="trl.refuse-liger-missing-loss-type",
    catalogue="liger-loss-type-missing",
    requires=("trl>=0.18,<1.13", "liger-kernel>=0.5.7,<0.8"),
    targets="trl.trainer.grpo_trainer:GRPOTrainer.__init__",
    expects=("self", "model", "args"),
    detect=trl_grpo_trainer_init_present,
)
def refuse_missing_loss_type(wrapped: Any, trainer: Any, *args: Any, **kwargs: Any) -> Any:
    from grpo_compat.core.versions import installed_version, release
    from grpo_compat.core.wrapping import bound_arguments
    from grpo_compat.fixes.combinations import installed, refuse

    config = bound_arguments(wrapped, trainer, *args, **kwargs).get("args")
    trl, liger = installed_version("trl"), installed_version("liger-kernel")
    loss_type = getattr(config, "loss_type", None)
    since = LOSS_TYPES_SINCE.get(loss_type) if isinstance(loss_type, str) else None
    if config is None or not trl or not liger or since is None or not liger_loss_selected(config, trl):
        return wrapped(trainer, *args, **kwargs)
    if release(liger) < release(since):
        available = ", ".join(name for name, first in LOSS_TYPES_SINCE.items() if release(first) <= release(liger))
        refuse(
            "liger-loss-type-missing",
            f"loss_type={loss_type!r} with the Liger GRPO loss needs liger-kernel >= {since}: "
            f"{installed('trl', 'liger-kernel')} computes {available} only, and would fail at the first step with "
            f"'Unknown loss type: {loss_type}'.",
            [f'pip install "liger-kernel>={since}"', f'loss_type="bnpo" (liger-kernel {liger} has {available})'],
        )
    return wrapped(trainer, *args, **kwargs)
