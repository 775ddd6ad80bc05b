"""Feature detection shared by patches: is the upstream target still the one the patch was written for?"""

from __future__ import annotations

from types import ModuleType


def trl_grpo_trainer_init_present(module: ModuleType) -> str | None:
    """None while trl's GRPOTrainer has its own __init__; ms-swift deletes it on import.

    Wrapping what remains would resurrect an __init__ swift removed on purpose (its trainer then
    runs Trainer.__init__ directly); swift runs are checked through swift's own arguments instead.
    """
    if "__init__" in vars(module.GRPOTrainer):
        return None
    return "ms-swift removed trl's GRPOTrainer.__init__: swift runs are checked by swift.grpo-arguments-check"
