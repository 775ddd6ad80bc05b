"""trl.tool-mask-length-check: trl 0.26-0.29's tool mask outgrows the completion ids after a re-rendered tool call.

Proven on real installs in the trl-0.27-tools cell (trl 0.27.2, transformers 5.0.0) through the matrix's reproducer
tool-call-retokenised: the tiny model fitted to call a tool (grpo_compat.testing.tool_caller) writes its call with
blank space the chat template drops, so the re-rendered turn is shorter than the model wrote it;
- unpatched, the first step fails in _compute_loss with upstream's tensor size mismatch (trl #5144);
- patched, it stops at the same step with grpo_compat's message, naming the completion, the lengths and the fix.
Where the tool answers at length the conversation grows and upstream trains: the matrix's tool-round pair.
"""

from __future__ import annotations

import re

import pytest

from matrix.runs import planned_runs
from tests.helpers import reproducer_results

CELL = "trl-0.27-tools"
PATCH = "trl.tool-mask-length-check"


@pytest.fixture(scope="module")
def retokenised(tmp_path_factory):
    return reproducer_results(CELL, PATCH, tmp_path_factory.mktemp("tool-mask"))


@pytest.mark.slow  # its fixture fits the tool-calling model in the trl-0.27-tools cell and runs 2 GRPO launches
@pytest.mark.cells("trl-0.27-tools")
def test_plain_tool_round_fails_in_compute_loss_with_the_mask_longer_than_the_ids(retokenised):
    record, result = retokenised["plain"]
    assert record["status"] == "pass", record
    assert result["versions"]["trl"] == "0.27.2"
    assert result["phase"] == "train"
    mismatch = re.search(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)", result["error"])
    assert mismatch and int(mismatch[1]) < int(mismatch[2]), result["error"][:300]  # ids shorter than the mask
    assert 'completion_mask * inputs["tool_mask"]' in result["error"]


@pytest.mark.slow
@pytest.mark.cells("trl-0.27-tools")
def test_patched_tool_round_is_named_at_the_first_step_with_the_cause(retokenised):
    record, result = retokenised["patched"]
    assert record["status"] == "pass", record
    assert "UnsupportedCombinationError" in result["error"]
    assert re.search(r"completion \d+: tool_mask (\d+) tokens, completion_ids (\d+)", result["error"])
    assert 'pip install "trl>=1.0"' in result["error"]


def test_tool_rounds_run_only_in_the_releases_that_re_render_the_conversation():
    def kinds(trl: str, transformers: str) -> set[str]:
        versions = {"torch": "2.13.0", "trl": trl, "transformers": transformers}
        return {run.kind for run in planned_runs(versions, "cpu")}

    assert {"tool-round", "repro:tool-call-retokenised"} <= kinds("0.27.2", "5.0.0")
    assert not {"tool-round", "repro:tool-call-retokenised"} & kinds("1.0.0", "5.0.0")
    assert not {"tool-round", "repro:tool-call-retokenised"} & kinds("0.27.2", "4.57.6")  # trl refuses tools there


def test_the_fitted_call_outgrows_its_re_rendering_with_a_short_tool_result_only(tmp_path):
    from transformers import AutoTokenizer

    from grpo_compat.testing import multi_turn
    from grpo_compat.testing.multi_turn import add
    from grpo_compat.testing.tiny_model import _write_tokenizer
    from grpo_compat.testing.tool_caller import CHAT_TEMPLATE, TOOL_CALL, TOOL_CALL_TEXT

    _write_tokenizer(tmp_path, 0)
    tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    prompt = [{"role": "user", "content": "Question 1: add 3 and 4."}]
    call = {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": TOOL_CALL}]}
    result = {"role": "tool", "name": "add", "content": "3"}
    long_result = {"role": "tool", "name": "add", "content": multi_turn._add_at_length(1, 2)}  # the tool-round pair's

    def rendered(messages: list) -> list[int]:
        text = tokenizer.apply_chat_template(
            messages, tools=[add], chat_template=CHAT_TEMPLATE, tokenize=False, add_generation_prompt=True
        )
        return tokenizer(text)["input_ids"]

    written = tokenizer(TOOL_CALL_TEXT + "<|im_end|>")["input_ids"]  # what the fitted model writes
    # trl 0.27's tool_length: the re-rendered conversation's growth past the prompt, less what the model wrote.
    tool_length = len(rendered([*prompt, call, result])) - len(rendered(prompt)) - len(written)
    assert tool_length < 0, tool_length
    grown = len(rendered([*prompt, call, long_result])) - len(rendered(prompt)) - len(written)
    assert grown > 0, grown  # aligned: upstream trains
