"""ms-swift #5377: GRPO with use_liger_kernel on a Qwen2.5-VL fails on transformers < 4.52; refused before it loads.

The slow tests run the tiny Qwen2.5-VL in the swift-3.7-vl-liger cell (ms-swift 3.7.0, transformers 4.51.3, trl 0.18.0,
liger-kernel 0.6.0, torch 2.6.0): the matrix's reproducer plain and patched (about 40 s), and the same GRPO run
without Liger plain and patched (about 90 s).
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
from grpo_compat.patches.swift.refuse_liger_multimodal_text_base_model import (
    refuse_liger_on_text_only_base_model,
    text_only_base_model,
)

from matrix.reproducers import REPRODUCERS
from tests.helpers import reproducer_results, smoke

PATCH = "swift.refuse-liger-multimodal-text-base-model"
CELL = "swift-3.7-vl-liger"


def test_a_base_model_that_takes_the_images_is_not_named():
    # transformers >= 4.52 (this env's): Qwen2_5_VLModel is the vision-language base model, pixel_values included.
    assert text_only_base_model(["Qwen2_5_VLForConditionalGeneration", "Qwen2VLForConditionalGeneration"]) == ""


def test_architectures_that_are_not_transformers_vision_classes_are_not_named():
    assert text_only_base_model(["Qwen2ForCausalLM", "InternVLChatModel", "NoSuchForConditionalGeneration"]) == ""


@pytest.mark.parametrize(
    "arguments",
    [
        {"rlhf_type": "grpo", "use_liger_kernel": False},
        {"rlhf_type": "dpo", "use_liger_kernel": True},
        {"rlhf_type": "grpo", "use_liger_kernel": True, "multimodal": False},
    ],
)
def test_runs_without_liger_grpo_on_a_vision_model_go_on_to_swift(arguments):
    multimodal = arguments.pop("multimodal", True)
    architectures = ["Qwen2_5_VLForConditionalGeneration"]
    pipeline = SimpleNamespace(
        args=SimpleNamespace(
            **arguments,
            model_meta=SimpleNamespace(is_multimodal=multimodal, architectures=architectures),
            model_info=SimpleNamespace(config=SimpleNamespace(architectures=architectures)),
        )
    )
    assert refuse_liger_on_text_only_base_model(lambda p: "loaded", pipeline) == "loaded"


def reproducer() -> object:
    return next(r for r in REPRODUCERS if r.patch == PATCH)


@pytest.mark.slow
@pytest.mark.cells("swift-3.7-vl-liger")
def test_liger_grpo_on_a_qwen2_5_vl_fails_at_the_first_step_plain_and_is_refused_before_the_model_loads_patched(
    tmp_path,
):
    results = reproducer_results(CELL, PATCH, tmp_path)
    plain_record, plain = results["plain"]
    assert plain_record["status"] == "pass", plain_record
    assert plain["status"] == "error" and plain["steps"] == 0  # the models loaded and trained no step
    assert re.search(reproducer().upstream, plain["error"]), plain["error"][:2000]
    assert "_get_last_hidden_state" in plain["error"]

    patched_record, patched = results["patched"]
    assert patched_record["status"] == "pass", patched_record
    assert re.search(reproducer().patched, patched["error"]), patched["error"][:2000]
    assert patched["steps"] is None  # refused while the arguments' model was looked up: no trainer was built
    assert 'pip install "transformers>=4.52"' in patched["error"]


@pytest.mark.slow
@pytest.mark.cells("swift-3.7-vl-liger")
def test_grpo_on_a_qwen2_5_vl_without_liger_trains_to_identical_weights_plain_and_patched(tmp_path):
    # The patch is in its window here (ms-swift 3.7, transformers 4.51) and must leave this run to swift untouched.
    model_dir = tmp_path / "model"
    flags = ("--model-arch", "qwen2.5-vl")
    plain = smoke(CELL, "plain", model_dir, tmp_path, script="smoke_swift.py", flags=flags)
    patched = smoke(CELL, "patched", model_dir, tmp_path, script="smoke_swift.py", flags=flags)
    assert plain["status"] == "ok", plain["error"]
    assert patched["status"] == "ok", patched["error"]
    assert plain["steps"] == patched["steps"] == 3
    assert plain["all_trainable_params_changed"]
    assert plain["weights_sha256"] == patched["weights_sha256"]
    statuses = {p["id"]: p["status"] for p in patched["grpo_compat"]["patches"]}
    assert statuses[PATCH] == "applied"
