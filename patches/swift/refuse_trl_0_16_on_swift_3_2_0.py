"""Refuse ms-swift 3.2.0 GRPO on trl 0.16 with transformers >= 4.49: it fails at the first step, after the models load.

Symptom:   `AttributeError: 'GRPOTrainer' object has no attribute 'temperature'` in trl's
           GRPOTrainer._get_per_token_logps, once the model, the reference model and the first generation
           are done: ms-swift 3.2.0 hands a text model's log-probs to trl's method (when the model's forward
           takes `logits_to_keep`, as transformers >= 4.49 models do), which from trl 0.16 divides the logits by
           self.temperature - set in trl's GRPOTrainer.__init__, which swift's trainer does not run.
Upstream:  ms-swift #3470 (census row 20); ms-swift 3.2.1 sets self.temperature itself.
Versions:  ms-swift 3.2.0 (and its .post1 / .post2, same code), which declares trl>=0.13,<0.17 and transformers<4.50, so
           pip installs the pair. Reproduced with ms-swift 3.2.0 + trl 0.16.1 + transformers 4.49.0 (matrix cell
           swift-3.2-trl0.16, reproducer swift-trl-0.16-temperature). A multimodal model takes swift's own log-prob
           path and is not refused; transformers 4.48 names the argument num_logits_to_keep, so swift takes its own
           path too.
Remove when: ms-swift 3.2.0 is no longer supported.
"""

from __future__ import annotations

from typing import Any

from grpo_compat.core.registry import patch


@patch(
    id="swift.refuse-trl-0.16-on-swift-3.2.0",
    catalogue="swift-3.2.0-trl-0.16-temperature",
    requires=("ms-swift>=3.2.0,<3.2.1", "trl>=0.16,<0.17", "transformers>=4.49"),
    # The pipeline's step that loads the models: the arguments are complete (with the model swift looked up, on
    # the command line too, where the plugin is imported before that lookup) and nothing is loaded yet.
    targets="swift.llm.train.rlhf:SwiftRLHF._prepare_model_tokenizer",
    expects=("self",),
)
def refuse_text_model_on_trl_0_16(wrapped: Any, pipeline: Any, *args: Any, **kwargs: Any) -> Any:
    arguments = getattr(pipeline, "args", None)
    model_meta = getattr(arguments, "model_meta", None)
    if getattr(arguments, "rlhf_type", None) == "grpo" and not getattr(model_meta, "is_multimodal", False):
        from grpo_compat.fixes.combinations import installed, refuse

        refuse(
            "swift-3.2.0-trl-0.16-temperature",
            f"{installed('ms-swift', 'trl', 'transformers')} cannot train GRPO on a text model: ms-swift 3.2.0 "
            "hands its log-probs to trl's GRPOTrainer._get_per_token_logps, which from trl 0.16 reads "
            "self.temperature that only trl's own __init__ sets, so the first step fails with \"'GRPOTrainer' "
            "object has no attribute 'temperature'\" after the model loaded.",
            ['pip install "ms-swift==3.2.2"'],
        )
    return wrapped(pipeline, *args, **kwargs)
