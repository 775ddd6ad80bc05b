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


def test_head64_variant_has_64_wide_heads_and_leaves_the_default_model_alone(built, tmp_path):
    """vLLM's CPU attention refuses 16-wide heads; the head64 variant is the same recipe with 64-wide ones."""
    from transformers import AutoConfig

    wide = build_tiny_qwen2(tmp_path / "head64", seed=0, architecture="qwen2-head64")
    config = AutoConfig.from_pretrained(wide)
    assert config.hidden_size // config.num_attention_heads == 64
    assert (config.num_attention_heads, config.num_key_value_heads) == (2, 1)
    assert (wide / "tokenizer.json").read_bytes() == (built / "tokenizer.json").read_bytes()
    default = AutoConfig.from_pretrained(built)
    assert (default.hidden_size, default.num_attention_heads, default.num_key_value_heads) == (64, 4, 2)


def test_an_unknown_architecture_is_refused_with_the_choices(tmp_path):
    with pytest.raises(ValueError, match="qwen2, qwen2-head64, qwen2-untied, gemma3"):
        build_tiny_qwen2(tmp_path / "x", architecture="llama")


def test_build_tiny_qwen2s_docstring_names_the_default_its_signature_has():
    import inspect

    from grpo_compat.testing.tiny_model import ARCHITECTURES, build_tiny_qwen2

    default = inspect.signature(build_tiny_qwen2).parameters["architecture"].default
    assert f'"{default}" (the default' in build_tiny_qwen2.__doc__
    assert all(f'"{name}"' in build_tiny_qwen2.__doc__ for name in ARCHITECTURES)
