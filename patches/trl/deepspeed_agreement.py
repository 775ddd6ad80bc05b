"""Make the DeepSpeed config agree with GRPOConfig's batch settings before any model loads.

Symptom:   a DeepSpeed json that hard-codes gradient_accumulation_steps / train_micro_batch_size_per_gpu /
           train_batch_size against the trainer's arguments is refused only inside trainer.train(), after the
           policy and reference models loaded ("Please correct the following DeepSpeed config values that
           mismatch TrainingArguments values", or DeepSpeed's "Check batch related parameters" while the
           reference model is prepared). A json without "gradient_accumulation_steps" is never refused:
           accelerate inserts 1, and on accelerate < 1.8 the engine takes an optimizer step on every micro-batch
           while the trainer believes it accumulates N (KF-5's accumulation mismatch, silent).
Upstream:  KF-5; huggingface/accelerate#3632 (GA sync, the "GradientAccumulationPlugin has
           1, DeepSpeed config has N" warning every correct run prints on accelerate >= 1.8);
           modelscope/ms-swift#4348. Covers ms-swift 3.x, whose GRPOConfig.__post_init__ calls trl's.
Versions:  trl >= 0.14 with deepspeed: late refusal on every version; the absent key trains with the wrong
           accumulation on accelerate < 1.8 and leaves DeepSpeed's own batch bookkeeping wrong on later ones.
Remove when: transformers compares the batch keys in TrainingArguments.__post_init__ and treats an absent
           gradient_accumulation_steps like "auto".
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch


@patch(
    id="trl.deepspeed-agreement",
    catalogue="deepspeed-batch-keys-disagree",
    requires=("trl>=0.14", "deepspeed>=0.14"),
    targets="trl.trainer.grpo_config:GRPOConfig.__post_init__",
    expects=("self",),
)
def agree_with_deepspeed(wrapped: Any, config: Any, *args: Any, **kwargs: Any) -> Any:
    from grpo_compat.fixes.deepspeed_config import agree_with_trainer

    result = wrapped(config, *args, **kwargs)
    agree_with_trainer(config)  # after: TrainingArguments.__post_init__ has just built the DeepSpeed config
    return result
