"""Refuse trl's GRPOTrainer on a transformers older than 4.46, before the model loads.

Symptom:   TypeError: Trainer.__init__() got an unexpected keyword argument 'processing_class', in
           GRPOTrainer.__init__ after the policy (and reference) model loaded.
Upstream:  MedicalGPT #444, huggingface/trl#2770 (census row 17). Every trl with GRPO passes processing_class,
           which Trainer takes from transformers 4.46.0; trl declares transformers>=4.46.0, so the pair is
           reached with --no-deps or a later forced downgrade.
Versions:  trl >= 0.14 with transformers < 4.46. Reproduced on CPU: trl 0.14.0 and 0.15.2 + transformers 4.45.2
           fail; 4.46.0 trains (matrix cell trl-0.14-tf4.45, reproducer processing-class).
Remove when: never needed by an install that respects trl's declared requirements; delete with trl 0.x support.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch
from grpo_compat.fixes.detectors import trl_grpo_trainer_init_present


@patch(
    id="trl.refuse-transformers-without-processing-class",
    catalogue="trl-processing-class-transformers-4.45",
    requires=("trl>=0.14", "transformers<4.46"),
    targets="trl.trainer.grpo_trainer:GRPOTrainer.__init__",
    detect=trl_grpo_trainer_init_present,
)
def refuse_old_transformers(wrapped: Any, trainer: Any, *args: Any, **kwargs: Any) -> Any:
    from grpo_compat.fixes.combinations import installed, refuse

    refuse(
        "trl-processing-class-transformers-4.45",
        f"{installed('trl', 'transformers')} cannot build a GRPOTrainer: trl passes processing_class to "
        "transformers' Trainer, which takes it from transformers 4.46.0 (trl declares transformers>=4.46.0).",
        ['pip install "transformers>=4.46"'],
    )
