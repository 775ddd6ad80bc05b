"""The offline tiny Qwen2 fixture: loadable, deterministic, with a chat template; no Hub access."""

from __future__ import annotations

import hashlib
import json

import pytest

from grpo_compat.testing.tiny_model import build_tiny_qwen2


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build_tiny_qwen2(tmp_path_factory.mktemp("a") / "model", seed=0)


def test_model_and_tokenizer_load_offline_and_generate(built, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(built)
    model = AutoModelForCausalLM.from_pretrained(built)
    assert model.config.model_type == "qwen2" and model.config.vocab_size >= len(tokenizer)
    assert tokenizer.model_input_names == ["input_ids", "attention_mask"]
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "what is 2 plus 3?"}], tokenize=False, add_generation_prompt=True
    )
    assert "<|im_start|>user" in text and text.rstrip().endswith("<|im_start|>assistant")
    inputs = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=4, do_sample=False, pad_token_id=tokenizer.pad_token_id)
    assert out.shape[1] > inputs["input_ids"].shape[1]


def test_tokenizer_config_loads_on_transformers_4(built):
    config = json.loads((built / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"


def test_same_seed_builds_the_same_files(built, tmp_path):
    again = build_tiny_qwen2(tmp_path / "model", seed=0)
    for name in ("model.safetensors", "tokenizer.json"):
        assert (
            hashlib.sha256((built / name).read_bytes()).digest() == hashlib.sha256((again / name).read_bytes()).digest()
        )
