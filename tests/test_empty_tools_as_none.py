"""trl.empty-tools-as-none on real installs: trl #5379 (census row 43).

A GRPO run on conversational prompts with no tools, under a chat template that writes a tool section when
`tools is not none` (as Llama 3.x's do): trl 0.29.1 renders every prompt with tools=[], so the section lands in what
the policy trains on. The cell trl-0.29-peft-zero3 holds trl 0.29.1 (CI builds it for the PEFT tests already).
"""

from __future__ import annotations

import pytest

from tests.helpers import smoke

CELL = "trl-0.29-peft-zero3"
pytestmark = [pytest.mark.slow, pytest.mark.cells(CELL)]  # real trl runs in a cell env
NOT_NONE, IF_TOOLS = "template=is-not-none", "template=if-tools"


def probe(mode: str, template: str, model_dir, tmp_path) -> dict:
    return smoke(CELL, mode, model_dir, tmp_path, template, script="probe_empty_tools.py")


def test_no_tools_puts_the_tool_section_in_every_prompt_upstream_and_none_patched(model_dir, tmp_path):
    plain = probe("plain", NOT_NONE, model_dir, tmp_path)
    assert "carry the template's tool section" in plain["error"]
    assert plain["prompt"].startswith("<|im_start|>system\nEnvironment: tools\nYou may call: []")
    patched = probe("patched", NOT_NONE, model_dir, tmp_path)
    assert patched["status"] == "ok", patched["error"]
    assert patched["prompt"].startswith("<|im_start|>user\n")
    # Patched, the run trains as upstream does on a template that renders nothing for an empty list.
    control = probe("plain", IF_TOOLS, model_dir, tmp_path)
    assert control["status"] == "ok" and control["prompt"] == patched["prompt"]
    assert patched["weights"] == control["weights"]


def test_a_template_that_renders_nothing_for_no_tools_trains_to_the_same_weights_patched(model_dir, tmp_path):
    runs = [probe(mode, IF_TOOLS, model_dir, tmp_path) for mode in ("plain", "patched")]
    assert runs[0]["status"] == runs[1]["status"] == "ok", runs[1]["error"]
    assert runs[0]["weights"] == runs[1]["weights"]
    assert {p["id"]: p["status"] for p in runs[1]["grpo_compat"]["patches"]}["trl.empty-tools-as-none"] == "applied"
