"""trl.think-block-training-template on real installs (trl #6361, census row 43), and the judge of its do-no-harm pairs.

GRPO with a tool on prompts holding an earlier assistant turn as a thinking model wrote it after a generation prompt
that opens the think block: reasoning, `</think>`, answer. trl 1.8.0 renders such prompts with its Qwen3 training
template, which puts the reasoning after an empty think block (matrix/probe_think_block.py). The cell trl-1.8-tools
holds trl 1.8.0 + transformers 5.0.0 with jmespath (trl < 1.10 parses tool calls with it); trl-1.16 (the default
cell) holds a trl with upstream's fix. SFT with assistant_only_loss renders the turn with Qwen3.5 Think's training
template too, and trains on it.
"""

from __future__ import annotations

import pytest

from tests.helpers import smoke

CELL = "trl-1.8-tools"
UPSTREAM_FIX_CELL = "trl-1.9"
FIXED_CELL = "trl-1.16"
TURN = "<|im_start|>assistant\n{}<|im_end|>"
CORRUPTED = TURN.format("<think>\n\n</think>\n\nTwo plus two is four.\n</think>\n\nThe answer is 4.")
INSIDE = TURN.format("<think>\nTwo plus two is four.\n</think>\n\nThe answer is 4.")
# Qwen3.5's template, which GRPO keeps, drops an earlier turn's reasoning, as at inference.
DROPPED = TURN.format("The answer is 4.")


def probe(cell: str, mode: str, model_dir, tmp_path, *settings: str) -> dict:
    return smoke(cell, mode, model_dir, tmp_path, *settings, script="probe_think_block.py")


def patch_status(result: dict) -> str:
    return {p["id"]: p["status"] for p in result["grpo_compat"]["patches"]}["trl.think-block-training-template"]


def test_a_probes_patched_twin_that_passes_with_other_weights_than_plain_fails_the_matrix():
    from matrix.runs import Run, judge

    patched = Run("think-block-one-turn", "patched", "think-block", settings=("history=none",))
    passed = {"status": "ok", "summary": "no earlier turn", "weights": "a"}
    assert judge(patched, passed, passed) == ("pass", "no earlier turn")
    assert judge(patched, {**passed, "weights": "b"}, passed)[0] == "fail"
    # Where plain failed (a reproducer), the patched run's weights differ by design.
    assert judge(patched, {**passed, "weights": "b"}, {"status": "error", "weights": "a"})[0] == "pass"


@pytest.mark.slow
@pytest.mark.cells(CELL)
def test_an_earlier_thinking_turn_reaches_the_policy_outside_its_think_block_upstream_and_inside_patched(
    model_dir, tmp_path
):
    plain = probe(CELL, "plain", model_dir, tmp_path)
    assert "reasoning lies outside its think block" in plain["error"]
    assert plain["training_template"] and plain["earlier_turn"] == CORRUPTED
    patched = probe(CELL, "patched", model_dir, tmp_path)
    assert patched["status"] == "ok", patched["error"]
    assert patched["training_template"] and patched["earlier_turn"] == INSIDE
    assert patch_status(patched) == "applied"


@pytest.mark.slow
@pytest.mark.cells(CELL)
def test_sft_assistant_only_loss_trains_on_qwen3_5_reasoning_outside_its_think_block_upstream_and_inside_patched(
    model_dir, tmp_path
):
    settings = ("trainer=sft", "template=qwen3_5_think")
    plain, patched = (probe(CELL, mode, model_dir, tmp_path, *settings) for mode in ("plain", "patched"))
    assert "trains on the turn with its reasoning outside its think block" in plain["error"]
    assert plain["trained_on"] == CORRUPTED.removeprefix("<|im_start|>assistant\n") + "\n"
    assert patched["status"] == "ok", patched["error"]
    assert patched["trained_on"] == INSIDE.removeprefix("<|im_start|>assistant\n") + "\n"


@pytest.mark.slow
@pytest.mark.cells(CELL)
@pytest.mark.parametrize("setting", ["template=qwen3_5_think", "history=none"])
def test_prompts_upstream_renders_right_train_to_the_same_weights_patched(setting, model_dir, tmp_path):
    """Qwen3.5 Think's template (GRPO keeps it: trl's prefix check passes), and one-turn prompts under Qwen3's training
    template, which the patch edits but which render alike."""
    plain, patched = (probe(CELL, mode, model_dir, tmp_path, setting) for mode in ("plain", "patched"))
    assert plain["status"] == patched["status"] == "ok", patched["error"]
    assert plain["prompt"] == patched["prompt"]
    assert plain["weights"] == patched["weights"]
    assert plain["training_template"] is (setting == "history=none")
    assert patched["earlier_turn"] == (DROPPED if setting.startswith("template") else "")
    assert patch_status(patched) == "applied"


@pytest.mark.slow
@pytest.mark.cells(FIXED_CELL)
def test_trl_with_upstreams_fix_renders_the_reasoning_inside_and_the_patch_stands_back(model_dir, tmp_path):
    plain, patched = (probe(FIXED_CELL, mode, model_dir, tmp_path) for mode in ("plain", "patched"))
    assert plain["status"] == patched["status"] == "ok", plain["error"]
    assert plain["earlier_turn"] == patched["earlier_turn"] == INSIDE
    assert plain["weights"] == patched["weights"]
    assert patch_status(patched) == "outside version window"


@pytest.mark.slow
@pytest.mark.cells(UPSTREAM_FIX_CELL)
def test_sft_on_trl_1_9_trains_on_the_reasoning_inside_and_the_patch_stands_back(model_dir, tmp_path):
    settings = ("trainer=sft", "template=qwen3_5_think")
    plain, patched = (probe(UPSTREAM_FIX_CELL, mode, model_dir, tmp_path, *settings) for mode in ("plain", "patched"))
    assert plain["status"] == patched["status"] == "ok", plain["error"]
    assert plain["trained_on"] == patched["trained_on"] == INSIDE.removeprefix("<|im_start|>assistant\n") + "\n"
    assert plain["weights"] == patched["weights"]
    assert patch_status(patched) == "outside version window"
