"""swift.grpo-arguments-check on a real ms-swift 4.6 install (the swift-4.6 cell env).

ms-swift 4.x skips trl's GRPOConfig.__post_init__, so only this patch explains its GRPO batch rules.
"""

from __future__ import annotations

import pytest

from tests.helpers import smoke

CELL = "swift-4.6"
pytestmark = [pytest.mark.slow, pytest.mark.cells(CELL)]  # real ms-swift runs in a cell env


def test_single_generation_gets_the_reason_and_a_fix_before_the_model_loads(model_dir, tmp_path):
    plain = smoke(CELL, "plain", model_dir, tmp_path, "num_generations=1", script="smoke_swift.py")
    assert "num_generations must be greater than 1 for GRPO" in plain["error"]
    patched = smoke(CELL, "patched", model_dir, tmp_path, "num_generations=1", script="smoke_swift.py")
    first_line = patched["error"].splitlines()[0]
    assert first_line.startswith("GRPOSettingsError: GRPO needs at least 2 completions per prompt")
    assert "Set num_generations=2 (--num_generations 2)" in first_line
    statuses = {p["id"]: p["status"] for p in patched["grpo_compat"]["patches"]}
    assert statuses["swift.grpo-arguments-check"] == "applied"


def test_impossible_batch_names_the_numbers_instead_of_valid_values_none(model_dir, tmp_path):
    settings = ("num_generations=3", "per_device_train_batch_size=4")
    plain = smoke(CELL, "plain", model_dir, tmp_path, *settings, script="smoke_swift.py")
    assert "Valid values" in plain["error"]
    patched = smoke(CELL, "patched", model_dir, tmp_path, *settings, script="smoke_swift.py")
    message = patched["error"].splitlines()[0]
    assert "4 completions is not a multiple of num_generations 3" in message
    assert "Set per_device_train_batch_size=6 (--per_device_train_batch_size 6)" in message
