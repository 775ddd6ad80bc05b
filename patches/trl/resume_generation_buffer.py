"""Generate the completions a resumed trl 0.16 GRPO run lost with its buffer, instead of training on None.

Symptom:   TypeError: 'NoneType' object is not subscriptable (compute_loss: inputs["prompt_ids"]) at the first
           step after trainer.train(resume_from_checkpoint=...) with num_iterations > 1, when the checkpoint's
           global_step is not a multiple of num_iterations (e.g. num_iterations=2 and save_steps=25: checkpoint-25).
           trl 0.16 reuses the completions of the last generation step from an in-memory buffer on the steps
           between; a checkpoint does not hold that buffer, so a resumed trainer's buffer is [None] * GA.
Upstream:  huggingface/trl#3247 (also reached by #3179 and #3635, which report resuming in general);
           huggingface/trl#3148 (trl 0.17.0) generates whenever the buffer is empty, as this patch does.
Versions:  trl 0.16.0-0.16.1: num_iterations and its buffer came with 0.16.0; 0.17.0 regenerates. Reproduced on
           CPU: trl 0.16.1 + transformers 4.51.3, num_iterations=2, 4 steps saved every step, resumed from
           checkpoint-1 (matrix cell trl-0.16, reproducer resume-between-generations). A checkpoint at a generation
           step (checkpoint-2) resumes upstream, and patched with bit-identical weights: the buffer is full there.
Remove when: trl 0.17 is the oldest supported version.

Only the buffer slot upstream is about to read, and only when it is empty: the completions are generated from the
batch the dataloader hands this step (the one the interrupted run generated from, as transformers skips the batches
consumed before the checkpoint), and kept for the remaining reuse steps, as trl 0.17 does. The completions the
interrupted run had sampled are not in the checkpoint: they are sampled anew.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch


@patch(
    id="trl.resume-generation-buffer",
    catalogue="trl-0.16-resume-empty-buffer",
    requires=("trl>=0.16,<0.17",),
    targets="trl.trainer.grpo_trainer:GRPOTrainer._prepare_inputs",
    expects=("self", "inputs"),
)
def generate_into_an_empty_buffer(wrapped: Any, trainer: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
    reuses = not trainer.control.should_evaluate and trainer.state.global_step % trainer.num_iterations != 0
    slot = trainer._step % trainer.args.gradient_accumulation_steps
    if reuses and trainer._buffered_inputs[slot] is None:
        from grpo_compat.core.logs import log_once

        log_once(
            trainer,
            "warning",
            "resumed at step %d, between two generation steps (num_iterations=%d): the completions this trl would "
            "reuse were not saved in the checkpoint (it would train on None); generating them anew, as trl >= 0.17 "
            'does. pip install "trl>=0.17" does this itself.',
            "trl.resume-generation-buffer",
            trainer.state.global_step,
            trainer.num_iterations,
        )
        trainer._buffered_inputs[slot] = trainer._generate_and_score_completions(inputs)
    return wrapped(trainer, inputs, *args, **kwargs)
