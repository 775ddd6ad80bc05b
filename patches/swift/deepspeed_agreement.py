"""Make ms-swift 4.x's DeepSpeed config agree with its GRPO batch settings while arguments are parsed.

Symptom:   `swift rlhf --rlhf_type grpo --deepspeed my_ds.json` with a json that hard-codes
           gradient_accumulation_steps / train_micro_batch_size_per_gpu / train_batch_size against
           --gradient_accumulation_steps / --per_device_train_batch_size is refused only inside
           trainer.train(), after the model (loaded first by swift's pipeline) and the reference model;
           a json without "gradient_accumulation_steps" runs DeepSpeed with 1 (inserted by accelerate)
           while the trainer accumulates N. ms-swift 4.x skips trl's GRPOConfig.__post_init__, so
           trl.deepspeed-agreement never sees its config.
Upstream:  KF-5; modelscope/ms-swift#4348 (batch 1, GA 32, ZeRO-3: nothing trains);
           huggingface/accelerate#3632.
Versions:  ms-swift >= 4.0 with deepspeed. swift's built-in --deepspeed zero0..zero3_offload configs use
           "auto" and always agree. --sequence_parallel_size multiplies the trainer's accumulation later,
           on purpose: not checked again.
Remove when: transformers compares the batch keys in TrainingArguments.__post_init__ and treats an absent
           gradient_accumulation_steps like "auto".
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch


@patch(
    id="swift.deepspeed-agreement",
    catalogue="deepspeed-batch-keys-disagree",
    requires=("ms-swift>=4.0", "deepspeed>=0.14"),
    targets="swift.rlhf_trainers.arguments:GRPOConfig.__post_init__",
    expects=("self",),
)
def agree_with_deepspeed(wrapped: Any, config: Any, *args: Any, **kwargs: Any) -> Any:
    from grpo_compat.fixes.deepspeed_config import agree_with_trainer

    result = wrapped(config, *args, **kwargs)
    agree_with_trainer(config)  # after: swift's __post_init__ ran TrainingArguments' and set its own defaults
    return result
