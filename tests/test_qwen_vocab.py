"""The tiny Qwen3 models on Qwen's real vocabulary (grpo_compat.testing.qwen_vocab) tokenize as Qwen does.

The proof is trl's own: its tool and environment tests fake generate() with Qwen token ids and say in a comment
what each row reads; here every such row of trl v1.9.0's tests decodes to its comment and encodes back. The
vocabulary comes from PyPI (qwen-agent's qwen.tiktoken, cached under .matrix/qwen-vocab): where it cannot be
fetched these tests are skipped, saying so.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

from grpo_compat.testing import qwen_vocab
from matrix import upstream_suite

TRL_TAG = "v1.9.0"  # the tag of cell trl-1.9's tests, whose tool tests the oracle runs (upstream:grpo-tools)


@pytest.fixture(scope="module")
def tiktoken() -> Path:
    try:
        return upstream_suite.ensure_qwen_tiktoken()
    except RuntimeError as error:
        pytest.skip(str(error))


@pytest.fixture(scope="module")
def qwen3(tiktoken, tmp_path_factory) -> Path:
    template = upstream_suite.trl_chat_template("qwen3")
    return qwen_vocab.build_tiny_qwen3(tmp_path_factory.mktemp("q") / "qwen3", tiktoken, template, "qwen3", seed=0)


@pytest.fixture(scope="module")
def tokenizer(qwen3):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(qwen3)


# A row of token ids, with its reading in a comment on the line above ("# '<tool_call>\n{...}<|im_end|>'") or
# after it ("[17453, 0, 151645],  # 'Done!<|im_end|>'"), possibly "+ eos + pad" / "+ pad" after the quoted text.
_ROW = re.compile(r"^\s*(\[[\d,\s]+\]),?\s*(?:#\s*(.*))?$")
_COMMENT = re.compile(r"^\s*#\s*(['\"].*)$")


def commented_rows(source: str) -> list[tuple[list[int], str]]:
    """(token ids, what trl's comment says they read) for every commented row of Qwen ids in ``source``."""
    rows, comment = [], None
    for line in source.splitlines():
        above = _COMMENT.match(line)
        if above:
            comment = above.group(1)
            continue
        row = _ROW.match(line)
        if row and re.search(r"\b1516\d\d\b", row.group(1)):
            text = row.group(2) if row.group(2) and row.group(2)[:1] in "'\"" else comment
            if text is not None:
                rows.append((ast.literal_eval(row.group(1)), text))
        comment = None if not above else comment
    return rows


def expected_text(comment: str) -> str:
    """The comment's quoted text, with "+ eos" as <|im_end|> (pads are stripped from the ids instead)."""
    literal = re.match(r"""('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")(.*)$""", comment)
    text, rest = ast.literal_eval(literal.group(1)), literal.group(2)
    return text + ("<|im_end|>" if "eos" in rest else "")


def test_comment_rows_are_read_with_their_eos_and_without_pads() -> None:
    source = "\n".join(
        [
            "    # 'Hi!<|im_end|>'",
            "    [13048, 0, 151645],",
            "    [17453, 0, 151645, 151643],  # 'Done!' + eos + pad",
            "    # a comment that is no reading",
            "    [1, 2],",
        ]
    )
    rows = commented_rows(source)
    assert rows == [([13048, 0, 151645], "'Hi!<|im_end|>'"), ([17453, 0, 151645, 151643], "'Done!' + eos + pad")]
    assert [expected_text(comment) for _, comment in rows] == ["Hi!<|im_end|>", "Done!<|im_end|>"]


def _trl_tests() -> str:
    for candidate in (upstream_suite.os.environ.get("GRPO_COMPAT_TRL_SOURCE"), "/work/.mirror/huggingface+trl/repo"):
        gdir = upstream_suite.git_dir(Path(candidate)) if candidate and Path(candidate).exists() else None
        if gdir is not None and TRL_TAG in upstream_suite.list_tags(gdir):
            show = ["git", f"--git-dir={gdir}", "show", f"{TRL_TAG}:tests/test_grpo_trainer.py"]
            return subprocess.run(show, capture_output=True, text=True, check=True).stdout
    pytest.skip(f"no trl git source with tag {TRL_TAG}: set GRPO_COMPAT_TRL_SOURCE")


def test_trls_mocked_generations_decode_to_their_comments_and_encode_back(tokenizer) -> None:
    rows = commented_rows(_trl_tests())
    assert len(rows) >= 20, rows  # trl v1.9.0: tools, malformed tool calls, environments, owned data
    for ids, comment in rows:
        while ids and ids[-1] == qwen_vocab.ENDOFTEXT:  # the pad of a shorter row
            ids = ids[:-1]
        text = expected_text(comment)
        assert tokenizer.decode(ids) == text, (ids, comment)
        assert tokenizer.encode(text) == ids, (text, ids)


def test_added_tokens_sit_at_qwens_ids_and_the_tool_markers_survive_decoding(tokenizer) -> None:
    ids = {text: qwen_vocab.ENDOFTEXT + index for index, (text, _) in enumerate(qwen_vocab.ADDED_TOKENS)}
    assert {text: tokenizer.convert_tokens_to_ids(text) for text in ids} == ids
    assert ids["<tool_call>"] == 151657 and ids["</think>"] == 151668
    assert (tokenizer.eos_token_id, tokenizer.pad_token_id) == (151645, 151643)
    call = tokenizer.encode("<tool_call>\n{}\n</tool_call><|im_end|>")
    assert tokenizer.decode(call, skip_special_tokens=True) == "<tool_call>\n{}\n</tool_call>"


def test_the_models_take_every_id_and_trl_recognises_the_chat_template(qwen3, tokenizer, tiktoken, tmp_path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    template = upstream_suite.trl_chat_template("qwen3")
    assert tokenizer.chat_template == template  # trl picks its tool-call parser by this exact text
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}], add_generation_prompt=True)
    prompt = prompt["input_ids"] if isinstance(prompt, dict) or hasattr(prompt, "keys") else prompt
    assert prompt[0] == 151644  # <|im_start|>
    moe = qwen_vocab.build_tiny_qwen3(tmp_path / "moe", tiktoken, template, "qwen3-moe", seed=0)
    for directory, model_type in ((qwen3, "qwen3"), (moe, "qwen3_moe")):
        model = AutoModelForCausalLM.from_pretrained(directory)
        assert model.config.model_type == model_type and model.config.vocab_size == qwen_vocab.VOCAB_SIZE
        with torch.no_grad():
            logits = model(torch.tensor([[151657, 40, 151668]])).logits
        assert logits.shape == (1, 3, qwen_vocab.VOCAB_SIZE) and torch.isfinite(logits).all()
