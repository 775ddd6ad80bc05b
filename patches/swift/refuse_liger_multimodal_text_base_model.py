"""Refuse ms-swift >= 3.7 GRPO with use_liger_kernel on a vision-language model whose `.model` is text only.

Symptom:   `TypeError: Qwen2_5_VLModel.forward() got an unexpected keyword argument 'pixel_values'` at the
           first training step, after the model, the reference model and the first generation: with
           --use_liger_kernel, ms-swift's GRPOTrainer._get_last_hidden_state calls `model.model(**inputs)` with
           the batch's images (pixel_values, image_grid_thw). From transformers 4.52 that submodule is the
           whole vision-language base model; before 4.52 it is the text decoder (Qwen2_5_VLModel, Qwen2VLModel),
           which takes no images.
Upstream:  ms-swift #5377 (census row 20: "ms-swift 3.7.0 and 3.8.0.dev0 fail, 3.6.0 does not"; the report's
           transformers 4.51.3, trl 0.18.0, liger-kernel 0.6.0). ms-swift 3.7.0 (#5178) replaced the whole-model
           forward (output_hidden_states) of 3.6 by the `model.model` call; 3.8-4.x make the same call and
           declare transformers>=4.33, so pip keeps a 4.51 beside them.
Versions:  ms-swift >= 3.7 with transformers < 4.52, for a model whose `<Name>Model` beside its
           `<Name>ForConditionalGeneration` takes no pixel_values (Qwen2-VL, Qwen2.5-VL on 4.51). Reproduced with
           ms-swift 3.7.0 + transformers 4.51.3 + trl 0.18.0 + liger-kernel 0.6.0 on a tiny Qwen2.5-VL (matrix cell
           swift-3.7-vl-liger, reproducer swift-liger-multimodal-text-base-model); ms-swift 3.8-4.x read only.
           Vision-language models whose base model takes the images (Idefics3, SmolVLM) are not refused.
Remove when: ms-swift requires transformers >= 4.52, or computes the hidden states without `model.model`.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

from grpo_compat.core.registry import patch


def text_only_base_model(architectures: list[str]) -> str:
    """The class name of the first architecture's base model that takes no images.

    "" when every one takes them, or none is a transformers vision-language class.
    """
    import transformers

    for name in architectures:
        model_class = getattr(transformers, name, None) if name.endswith("ForConditionalGeneration") else None
        if model_class is None:
            continue
        base_name = name.removesuffix("ForConditionalGeneration") + "Model"
        base = getattr(sys.modules[model_class.__module__], base_name, None)
        if base is not None and "pixel_values" not in inspect.signature(base.forward).parameters:
            return base_name
    return ""


def _architectures(arguments: Any) -> list[str]:
    config = getattr(getattr(arguments, "model_info", None), "config", None)
    meta = getattr(arguments, "model_meta", None)
    return list(getattr(config, "architectures", None) or getattr(meta, "architectures", None) or [])


@patch(
    id="swift.refuse-liger-multimodal-text-base-model",
    catalogue="swift-liger-multimodal-pixel-values",
    requires=("ms-swift>=3.7", "transformers<4.52"),
    # The pipeline's step that loads the models: the model's config is read, nothing is loaded yet.
    targets=[
        "swift.pipelines.train.rlhf:SwiftRLHF._prepare_model_tokenizer?",  # 4.x
        "swift.llm.train.rlhf:SwiftRLHF._prepare_model_tokenizer?",  # 3.x
    ],
    expects=("self",),
)
def refuse_liger_on_text_only_base_model(wrapped: Any, pipeline: Any, *args: Any, **kwargs: Any) -> Any:
    arguments = getattr(pipeline, "args", None)
    if (
        getattr(arguments, "rlhf_type", None) == "grpo"
        and getattr(arguments, "use_liger_kernel", False)
        and getattr(getattr(arguments, "model_meta", None), "is_multimodal", False)
    ):
        base = text_only_base_model(_architectures(arguments))
        if base:
            from grpo_compat.fixes.combinations import installed, refuse

            refuse(
                "swift-liger-multimodal-pixel-values",
                f"{installed('ms-swift', 'transformers')} cannot train GRPO with use_liger_kernel on this "
                f"vision-language model: ms-swift computes the Liger loss's hidden states with model.model(...) "
                f"and the batch's images, and before transformers 4.52 that submodule ({base}) is the text "
                f'decoder, so the first step fails with "{base}.forward() got an unexpected keyword argument '
                "'pixel_values'\" after the model loaded.",
                ['pip install "transformers>=4.52"', "--use_liger_kernel false"],
            )
    return wrapped(pipeline, *args, **kwargs)
