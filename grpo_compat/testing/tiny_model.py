"""A tiny Qwen2 causal LM (or Gemma-3 vision-language model) and BPE tokenizer, built offline, for smoke tests.

``architecture="qwen2-head64"`` is the Qwen2 for vLLM's CPU build, whose attention kernels refuse the
default's 16-wide heads ("Unsupported CPU attention configuration: head_dim=16").

Nothing here touches the Hugging Face Hub: the tokenizer is trained locally on
generated sentences and the weights are drawn from a seeded generator.
"""

from __future__ import annotations

import functools
import json
import os
import random
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MARKER = ".grpo_compat_tiny_qwen2.json"
# Bump when the recipe changes so stale cached directories get rebuilt.
RECIPE_VERSION = 1
REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{%- endif %}"
)

# Splits letters, single digits, punctuation and whitespace runs, as Qwen2 does.
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

_WORDS = (
    "the a one two three cat dog bird model reward token answer question number sum "
    "is are was be add subtract multiply equals because so then first next last small "
    "large red blue green fast slow think solve step result check true false yes no "
    "user assistant system please write short long story about day night sun moon"
).split()


def _corpus(seed: int, n: int = 400) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        words = rng.choices(_WORDS, k=rng.randint(4, 14))
        # Digits and punctuation so arithmetic-style prompts tokenize sensibly.
        words.insert(rng.randrange(len(words)), str(rng.randint(0, 999)))
        lines.append(" ".join(words).capitalize() + rng.choice(".?!"))
    return lines


def _is_built(directory: Path, seed: int, architecture: str = "qwen2") -> bool:
    try:
        marker = json.loads((directory / MARKER).read_text())
    except (OSError, ValueError):
        return False
    return (
        marker.get("seed") == seed
        and marker.get("architecture", "qwen2") == architecture
        and marker.get("recipe") == RECIPE_VERSION
        and all((directory / name).is_file() for name in REQUIRED_FILES)
    )


def _write_tokenizer(
    out: Path, seed: int, extra_special: tuple[str, ...] = (), extra_special_from: int = 0
) -> dict[str, int]:
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    # Qwen2's own normalizer and pre-tokenizer: transformers 5 loads this directory
    # as Qwen2Tokenizer, which imposes them; matching them here keeps token ids
    # identical under 4.x (PreTrainedTokenizerFast) and 5.x.
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_QWEN2_SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(seed), trainer=trainer)
    if extra_special_from:
        tok = _padded(tok, extra_special_from)
    # Appended after training: the trained vocabulary and its ids stay those of the text-only tokenizer.
    tok.add_special_tokens(list(extra_special))
    tok.save(str(out / "tokenizer.json"))
    # Written by hand, not by save_pretrained: transformers 5 would record
    # "TokenizersBackend", which 4.x cannot load, and a chat_template.jinja
    # file that older versions ignore.
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        # A real Qwen2 tokenizer emits no token_type_ids; some trl/transformers
        # pairs pass them to generate() and fail.
        "model_input_names": ["input_ids", "attention_mask"],
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 512,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    special = {k: config[k] for k in ("eos_token", "pad_token")}
    (out / "special_tokens_map.json").write_text(json.dumps(special, indent=2))
    ids = {t: tok.token_to_id(t) for t in [*SPECIAL_TOKENS, *extra_special]}
    ids["vocab_size"] = tok.get_vocab_size(with_added_tokens=True)
    return ids


def _padded(tok: Any, size: int) -> Any:
    """The tokenizer with unused vocabulary entries up to ``size`` ids (no merge produces them: never emitted)."""
    from tokenizers import Tokenizer

    data = json.loads(tok.to_str())
    vocab = data["model"]["vocab"]
    vocab.update({f"<|unused_{index}|>": index for index in range(len(vocab), size)})
    return Tokenizer.from_str(json.dumps(data))


def _token_ids(ids: dict[str, int]) -> dict[str, int]:
    return {
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
    }


def _text_sizes(ids: dict[str, int]) -> dict[str, int]:
    """The language model's sizes (qwen2-head64 widens the attention: HEAD64_SIZES)."""
    return dict(
        vocab_size=ids["vocab_size"],
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        **_token_ids(ids),
    )


# vLLM's CPU attention takes heads 64 wide (hidden 128 / 2 heads); one key-value head keeps it grouped-query.
HEAD64_SIZES = dict(hidden_size=128, intermediate_size=256, num_attention_heads=2, num_key_value_heads=1)


def _qwen2(ids: dict[str, int], tied: bool = True, **sizes: int) -> Any:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        **{**_text_sizes(ids), **sizes},
        tie_word_embeddings=tied,
        # 4.x defaults sliding_window to 4096 and warns under sdpa; unused anyway.
        use_sliding_window=False,
        sliding_window=None,
    )
    return Qwen2ForCausalLM(config)


def _gemma3(ids: dict[str, int]) -> Any:
    """Gemma3ForConditionalGeneration (text through its language model; a 1-layer vision tower beside it)."""
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration, Gemma3TextConfig, SiglipVisionConfig

    text = Gemma3TextConfig(**_text_sizes(ids), head_dim=16, sliding_window=16)
    vision = SiglipVisionConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=32, patch_size=8
    )
    config = Gemma3Config(text_config=text, vision_config=vision.to_dict(), mm_tokens_per_image=4, **_token_ids(ids))
    config._attn_implementation = "eager"  # Gemma-3's recommended attention for training
    return Gemma3ForConditionalGeneration(config)


def _qwen2_head64(ids: dict[str, int]) -> Any:
    return _qwen2(ids, **HEAD64_SIZES)


# lm_head its own parameter, as in Qwen3-8B, and over DeepSpeed's default stage3_param_persistence_threshold (1e5
# elements: 504 x 256): ZeRO-3 partitions it apart from the embeddings (Liger-Kernel #1048 reproducer).
UNTIED_SIZES = dict(hidden_size=256, intermediate_size=512, num_attention_heads=4, num_key_value_heads=2)


def _qwen2_untied(ids: dict[str, int]) -> Any:
    return _qwen2(ids, tied=False, **UNTIED_SIZES)


def _qwen3_moe(ids: dict[str, int]) -> Any:
    """Qwen3-MoE: 4 experts, 2 per token, each layer sparse; the config's own router_aux_loss_coef (0.001)."""
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    config = Qwen3MoeConfig(
        **_text_sizes(ids),
        head_dim=16,
        moe_intermediate_size=32,
        num_experts=4,
        num_experts_per_tok=2,
        use_sliding_window=False,
        sliding_window=None,
    )
    return Qwen3MoeForCausalLM(config)


# Qwen2.5-VL's image and video tokens, at their ids in Qwen's vocabulary (151652-151656): ms-swift's template finds
# the image placeholder by the id 151655 (Qwen2VLTemplate.image_token_id), whatever the tokenizer says.
QWEN2_5_VL_TOKENS = ("<|vision_start|>", "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>")
QWEN2_5_VL_FIRST_TOKEN_ID = 151652
# The vision tower's geometry, which its image processor must share: 14-pixel patches merged 2 x 2 into one
# token, so images are resized to multiples of 28 pixels; 56 x 56 (the fewest pixels qwen_vl_utils keeps) is
# 16 patches, 4 image tokens.
QWEN2_5_VL_PATCH, QWEN2_5_VL_MERGE, QWEN2_5_VL_TEMPORAL = 14, 2, 2
QWEN2_5_VL_PIXELS = (56 * 56, 112 * 112)  # the image processor's min_pixels, max_pixels


def _qwen2_5_vl(ids: dict[str, int]) -> Any:
    """Qwen2_5_VLForConditionalGeneration: the text model of _text_sizes, a 1-block vision tower of width 32."""
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    vision = dict(
        depth=1,
        hidden_size=32,
        intermediate_size=64,
        num_heads=2,
        out_hidden_size=64,  # the text model's hidden_size
        patch_size=QWEN2_5_VL_PATCH,
        spatial_merge_size=QWEN2_5_VL_MERGE,
        temporal_patch_size=QWEN2_5_VL_TEMPORAL,
        window_size=QWEN2_5_VL_PATCH * QWEN2_5_VL_MERGE * 2,
        fullatt_block_indexes=[0],
    )
    config = Qwen2_5_VLConfig(
        **_text_sizes(ids),
        vision_config=vision,
        # Multimodal rotary sections (temporal, height, width) of the 16-wide heads' 8 frequencies.
        rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]},
        tie_word_embeddings=True,
        use_sliding_window=False,
        sliding_window=None,
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
    )
    return Qwen2_5_VLForConditionalGeneration(config)


def _write_qwen2_5_vl_processor(out: Path) -> None:
    """The image processor's settings (Qwen2VLImageProcessor), the processor class beside the tokenizer's."""
    settings = {
        "image_processor_type": "Qwen2VLImageProcessor",
        "processor_class": "Qwen2_5_VLProcessor",
        "do_resize": True,
        "do_rescale": True,
        "do_normalize": True,
        "do_convert_rgb": True,
        "rescale_factor": 1 / 255,
        "image_mean": [0.48145466, 0.4578275, 0.40821073],
        "image_std": [0.26862954, 0.26130258, 0.27577711],
        "patch_size": QWEN2_5_VL_PATCH,
        "merge_size": QWEN2_5_VL_MERGE,
        "temporal_patch_size": QWEN2_5_VL_TEMPORAL,
        "min_pixels": QWEN2_5_VL_PIXELS[0],
        "max_pixels": QWEN2_5_VL_PIXELS[1],
    }
    (out / "preprocessor_config.json").write_text(json.dumps(settings, indent=2))
    config = json.loads((out / "tokenizer_config.json").read_text())
    config["processor_class"] = "Qwen2_5_VLProcessor"
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2))


def write_tiny_images(directory: str | os.PathLike[str], count: int = 4, seed: int = 0) -> list[Path]:
    """``count`` small RGB PNG images (56 x 56 pixels, seeded noise: 4 image tokens each) for vision-language runs."""
    import numpy as np
    from PIL import Image

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths = []
    for index in range(count):
        path = directory / f"tiny_image_{index}.png"
        Image.fromarray(rng.integers(0, 256, (56, 56, 3), dtype=np.uint8)).save(path)
        paths.append(path)
    return paths


def _qwen2_tool_caller(ids: dict[str, int]) -> Any:
    """The default Qwen2 with room for trl's tools prompt (about 600 tokens here), then fitted to call a tool."""
    return _qwen2(ids, max_position_embeddings=2048)


ARCHITECTURES = {
    "qwen2": _qwen2,
    "qwen2-head64": _qwen2_head64,
    "qwen2-untied": _qwen2_untied,
    "gemma3": _gemma3,
    "qwen3-moe": _qwen3_moe,
    "qwen2.5-vl": _qwen2_5_vl,
    "qwen2-tool-caller": _qwen2_tool_caller,
}
# RMSNorm weights named otherwise than "*norm.weight" (Qwen2.5-VL's vision blocks and merger): 1, their identity.
VISION_NORMS = {"qwen2.5-vl": ("norm1.weight", "norm2.weight", "ln_q.weight")}
# Tokens an architecture needs beyond SPECIAL_TOKENS (appended: the other tokens' ids are unchanged),
# and the id of the first (the vocabulary is padded up to it with entries never emitted).
EXTRA_SPECIAL_TOKENS = {"qwen2.5-vl": (QWEN2_5_VL_TOKENS, QWEN2_5_VL_FIRST_TOKEN_ID)}


def seeded_init(model: Any, seed: int, other_norms: tuple[str, ...] = (), gemma: bool = False) -> None:
    """Own init from a local generator, by sorted name, so the weights depend only on the seed and not on the
    transformers version's init scheme: norms at their identity, biases 0, the rest N(0, 0.02)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in sorted(model.named_parameters()):
            if name.endswith("norm.weight") or name.endswith(other_norms):
                # Gemma's RMSNorm scales by 1 + weight: 0 is its identity (its vision tower's LayerNorms are not).
                param.fill_(0.0 if gemma and "vision" not in name else 1.0)
            elif name.endswith(".bias"):
                param.zero_()
            else:
                param.normal_(0.0, 0.02, generator=gen)


def _write_model(out: Path, seed: int, ids: dict[str, int], architecture: str = "qwen2") -> None:
    import torch
    from transformers import GenerationConfig

    # fork_rng: the constructor's own init consumes the global RNG; the caller's
    # RNG state must not depend on whether the model was cached.
    with torch.random.fork_rng(devices=[]):
        model = ARCHITECTURES[architecture](ids).to(torch.float32)
    seeded_init(model, seed, VISION_NORMS.get(architecture, ()), gemma=architecture == "gemma3")
    if architecture == "qwen2-tool-caller":
        from grpo_compat.testing.tool_caller import fit_tool_caller

        fit_tool_caller(model, str(out / "tokenizer.json"), seed)
    model.generation_config = GenerationConfig(**_token_ids(ids))
    model.save_pretrained(str(out))


def build_tiny_qwen2(directory: str | os.PathLike[str], seed: int = 0, architecture: str = "qwen2") -> Path:
    """Build (or reuse) a tiny Qwen2 model + tokenizer in ``directory``.

    ``architecture``: "qwen2" (the default: hidden 64, 4 heads of 16), "qwen2-head64" (hidden 128, 2 heads of
    64, 1 key-value head: vLLM's CPU attention), "qwen2-untied" (hidden 256, an lm_head of its own, not tied to
    the embeddings), "gemma3" (a tiny Gemma-3), "qwen3-moe" (a tiny Qwen3 mixture of experts), "qwen2.5-vl" (a tiny
    Qwen2.5-VL with its image processor: write_tiny_images makes images for it), "qwen2-tool-caller" (fitted to
    answer every chat turn with one tool call: tool_caller.py); the tokenizer and token ids are the same for all
    (qwen2.5-vl appends its 5 vision tokens at Qwen's ids, 151652-151656).

    Deterministic in ``seed``. Several processes (the ranks of one launch) may call
    it on the same directory: a file lock lets one build while the others wait.
    """
    if architecture not in ARCHITECTURES:
        raise ValueError(f"architecture {architecture!r}: expected one of {', '.join(ARCHITECTURES)}")

    def write(staging: Path) -> dict[str, Any]:
        extra, first_id = EXTRA_SPECIAL_TOKENS.get(architecture, ((), 0))
        ids = _write_tokenizer(staging, seed, extra, first_id)
        _write_model(staging, seed, ids, architecture)
        if architecture == "qwen2.5-vl":
            _write_qwen2_5_vl_processor(staging)
        return {"seed": seed, "recipe": RECIPE_VERSION, "vocab_size": ids["vocab_size"], "architecture": architecture}

    built = functools.partial(_is_built, seed=seed, architecture=architecture)
    return build_once(directory, MARKER, built, write, "build_tiny_qwen2")


def build_once(
    directory: str | os.PathLike[str],
    marker: str,
    is_built: Callable[[Path], bool],
    write: Callable[[Path], dict[str, Any]],
    builder: str,
) -> Path:
    """``write(staging)`` moved into ``directory`` unless ``is_built(directory)``; its return is the marker file.

    Several processes (the ranks of one launch) may call it on the same directory: a file lock lets one build
    while the others wait. The marker goes off first and back on last: a half-replaced directory never looks built.
    """
    import fcntl

    directory = Path(directory).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_built(directory):
            return directory
        if (directory / "config.json").exists() and not (directory / marker).exists():
            # Never overwrite a model this builder did not make (or a build that crashed).
            raise FileExistsError(f"{directory} holds a model not built by {builder}; remove it")
        staging = Path(tempfile.mkdtemp(prefix=".build-", dir=directory))
        try:
            stamp = write(staging)
            (directory / marker).unlink(missing_ok=True)
            for item in sorted(staging.iterdir()):
                item.chmod(0o644)  # transformers 5 saves weights as 0600
                os.replace(item, directory / item.name)
            (staging / marker).write_text(json.dumps(stamp))
            os.replace(staging / marker, directory / marker)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return directory
