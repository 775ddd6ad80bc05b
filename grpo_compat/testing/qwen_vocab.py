"""Tiny Qwen3 and Qwen3-MoE models on Qwen's real 151,936-id vocabulary, built offline.

trl's tool and environment tests fake ``model.generate`` with Qwen's own token ids (151657 ``<tool_call>``,
151645 ``<|im_end|>``, ...), so their tiny models need Qwen's vocabulary, not the 512-token one of tiny_model.py.
Qwen's byte-level BPE ranks (151,643, shared by Qwen 1, 2, 2.5 and 3) ship as ``qwen.tiktoken`` in the
``qwen-agent`` wheel on PyPI; whoever calls this fetched it beforehand (matrix/upstream_suite.py does, at build
time). The ranks become a ``tokenizers`` byte-level BPE here (transformers' TikTokenConverter needs the tiktoken
package, which no cell installs, from 5.x on), with Qwen2's pre-tokenizer pattern and normaliser and Qwen3's 26
added tokens at their ids: it derives one merge for each of the 151,387 ranks longer than a byte. The chat
template is the caller's (trl ships Qwen3's, ``trl/chat_templates/qwen3.jinja``, which trl recognises by exact text).

Weights are drawn as tiny_model.py draws them (seeded, by sorted name); the sizes are those of trl's own tiny
Qwen3 models (hidden 8, 2 layers, 4 heads of 128, 2 key-value heads).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path
from typing import Any

# The wheel that carries the ranks, and the file's digest: a different file is refused, not converted.
QWEN_AGENT = ("qwen-agent", "0.0.34")
TIKTOKEN_MEMBER = "qwen_agent/utils/qwen.tiktoken"
TIKTOKEN_SHA256 = "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186"
BPE_RANKS = 151643
VOCAB_SIZE = 151936  # the embedding's rows: Qwen pads past its last added token (151668)

# Qwen3's added tokens, from 151643 on, and whether each is special (skipped when decoding with
# skip_special_tokens): the tool, fim, think and tool-response markers are not, so a decoded completion keeps them.
ADDED_TOKENS: tuple[tuple[str, bool], ...] = (
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
)
ENDOFTEXT, IM_END = BPE_RANKS, BPE_RANKS + 2

MARKER = ".grpo_compat_tiny_qwen3.json"
RECIPE_VERSION = 1
ARCHITECTURES = ("qwen3", "qwen3-moe")


def tiktoken_digest(path: str | os.PathLike[str]) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def read_ranks(path: str | os.PathLike[str]) -> dict[bytes, int]:
    """``qwen.tiktoken``: one ``<base64 token bytes> <rank>`` a line."""
    ranks = {}
    for line in Path(path).read_bytes().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def _merge_of(token: bytes, ranks: dict[bytes, int]) -> tuple[bytes, bytes] | None:
    """The pair whose merge makes ``token``: byte-pair encoding of its bytes with the ranks below its own ends in
    exactly two parts (None when it ends in more: such a token is only ever reached whole)."""
    parts = [token[i : i + 1] for i in range(len(token))]
    limit = ranks[token]
    while len(parts) > 2:
        best = min(
            ((ranks.get(parts[i] + parts[i + 1], limit), i) for i in range(len(parts) - 1)), key=lambda pair: pair
        )
        if best[0] >= limit:
            return None
        i = best[1]
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
    return (parts[0], parts[1]) if len(parts) == 2 else None


def _converted(tiktoken_path: Path) -> Any:
    """A byte-level BPE tokenizer of the ranks: vocabulary in GPT-2's byte-to-unicode alphabet, merges in rank
    order, whole pieces that are tokens taken as they are (tiktoken's shortcut, ``ignore_merges``)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    from grpo_compat.testing.tiny_model import _QWEN2_SPLIT

    ranks = read_ranks(tiktoken_path)
    unicode_of = _byte_alphabet()

    def text(token: bytes) -> str:
        return "".join(unicode_of[b] for b in token)

    vocab = {text(token): rank for token, rank in ranks.items()}
    merges = sorted(
        ((ranks[token], pair) for token in ranks if len(token) > 1 and (pair := _merge_of(token, ranks))),
        key=lambda item: item[0],
    )
    model = models.BPE(vocab, [(text(a), text(b)) for _, (a, b) in merges], ignore_merges=True)
    tokenizer = Tokenizer(model)
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_QWEN2_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    # In order: each call appends, so the special ones (all before the others) keep their ids.
    special = [AddedToken(text, normalized=False, special=True) for text, is_special in ADDED_TOKENS if is_special]
    plain = [AddedToken(text, normalized=False, special=False) for text, is_special in ADDED_TOKENS if not is_special]
    tokenizer.add_special_tokens(special)
    tokenizer.add_tokens(plain)
    return tokenizer


def _byte_alphabet() -> dict[int, str]:
    """GPT-2's printable stand-in of each byte (byte-level BPE's alphabet)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    stand_in = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in stand_in:
            stand_in[b] = chr(256 + extra)
            extra += 1
    return stand_in


def write_tokenizer(out: Path, tiktoken_path: Path, chat_template: str) -> None:
    if tiktoken_digest(tiktoken_path) != TIKTOKEN_SHA256:
        raise ValueError(f"{tiktoken_path} is not qwen-agent {QWEN_AGENT[1]}'s qwen.tiktoken (sha256 differs)")
    tokenizer = _converted(tiktoken_path)
    first = tokenizer.token_to_id(ADDED_TOKENS[0][0])
    if tokenizer.get_vocab_size(with_added_tokens=False) != BPE_RANKS or first != ENDOFTEXT:
        raise ValueError(f"converted vocabulary has {tokenizer.get_vocab_size()} ids, <|endoftext|> at {first}")
    tokenizer.save(str(out / "tokenizer.json"))
    decoder = {
        str(ENDOFTEXT + index): dict(
            content=text, lstrip=False, normalized=False, rstrip=False, single_word=False, special=special
        )
        for index, (text, special) in enumerate(ADDED_TOKENS)
    }
    config = {
        "tokenizer_class": "Qwen2Tokenizer",
        "added_tokens_decoder": decoder,
        "additional_special_tokens": [text for text, special in ADDED_TOKENS[1:] if special],
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "errors": "replace",
        "add_prefix_space": False,
        "split_special_tokens": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 131072,
        "chat_template": chat_template,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False))


def _model(architecture: str) -> Any:
    sizes = dict(
        vocab_size=VOCAB_SIZE,
        hidden_size=8,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=128,
        max_position_embeddings=40960,
        bos_token_id=ENDOFTEXT,
        eos_token_id=IM_END,
        pad_token_id=ENDOFTEXT,
        tie_word_embeddings=False,
        use_sliding_window=False,
        sliding_window=None,
    )
    if architecture == "qwen3":
        from transformers import Qwen3Config, Qwen3ForCausalLM

        return Qwen3ForCausalLM(Qwen3Config(**sizes))
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    experts = dict(moe_intermediate_size=32, num_experts=4, num_experts_per_tok=2, norm_topk_prob=True)
    config = Qwen3MoeConfig(**sizes, **experts)
    return Qwen3MoeForCausalLM(config)


def build_tiny_qwen3(
    directory: str | os.PathLike[str],
    tiktoken_path: str | os.PathLike[str],
    chat_template: str,
    architecture: str = "qwen3",
    seed: int = 0,
) -> Path:
    """Build (or reuse) a tiny Qwen3 (``"qwen3"``) or Qwen3-MoE (``"qwen3-moe"``) with Qwen's vocabulary."""
    from grpo_compat.testing.tiny_model import build_once

    if architecture not in ARCHITECTURES:
        raise ValueError(f"architecture {architecture!r}: expected one of {', '.join(ARCHITECTURES)}")
    template_digest = hashlib.sha256(chat_template.encode()).hexdigest()[:16]
    stamp = {"recipe": RECIPE_VERSION, "architecture": architecture, "seed": seed, "chat_template": template_digest}

    def is_built(directory: Path) -> bool:
        try:
            return json.loads((directory / MARKER).read_text()) == stamp
        except (OSError, ValueError):
            return False

    def write(staging: Path) -> dict[str, Any]:
        import torch
        from transformers import GenerationConfig

        from grpo_compat.testing.tiny_model import seeded_init

        write_tokenizer(staging, Path(tiktoken_path), chat_template)
        with torch.random.fork_rng(devices=[]):
            model = _model(architecture).to(torch.float32)
        seeded_init(model, seed)
        model.generation_config = GenerationConfig(bos_token_id=ENDOFTEXT, eos_token_id=IM_END, pad_token_id=ENDOFTEXT)
        model.save_pretrained(str(staging))
        return stamp

    return build_once(directory, MARKER, is_built, write, "build_tiny_qwen3")
