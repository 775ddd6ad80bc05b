"""Feature detection shared by patches: is the upstream target still the one the patch was written for?"""

from __future__ import annotations

import sys
from types import ModuleType

from grpo_compat.core.import_hooks import still_loading

# ms-swift's GRPO trainer modules (4.x, 3.x): both delete trl's GRPOTrainer.__init__ right after importing it.
SWIFT_GRPO_TRAINER_MODULES = ("swift.rlhf_trainers.grpo_trainer", "swift.trainers.rlhf_trainer.grpo_trainer")
# The processes that train GRPO import one of these; a launcher that only parses arguments does not.
GRPO_TRAINER_MODULES = ("trl.trainer.grpo_trainer", *SWIFT_GRPO_TRAINER_MODULES)


def trl_grpo_trainer_init_present(module: ModuleType) -> str | None:
    """None while trl's GRPOTrainer has its own __init__; ms-swift deletes it on import.

    Wrapping what remains would resurrect an __init__ swift removed on purpose (its trainer then
    runs Trainer.__init__ directly); swift runs are checked through swift's own arguments instead.
    """
    if "__init__" not in vars(module.GRPOTrainer):
        return "ms-swift removed trl's GRPOTrainer.__init__: swift runs are checked by swift.grpo-arguments-check"
    if any(still_loading(sys.modules.get(name)) for name in SWIFT_GRPO_TRAINER_MODULES):
        # Swift's trainer module imported trl's and deletes __init__ on its next line: a wrapper would vanish.
        return "ms-swift deletes trl's GRPOTrainer.__init__ right after importing it: a wrapper there would never run"
    return None
