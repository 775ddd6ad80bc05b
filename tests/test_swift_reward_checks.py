"""swift.reward-dry-run against real ms-swift installs (the swift-3.5, swift-3.12 and swift-4.6 cell envs).

The dry run's keyword arguments must be the ones the installed ms-swift really passes a reward function, or it
would refuse a reward that trains (or pass one that fails). The refusals themselves are proven in the same cells
by the matrix reproducers swift-reward-without-kwargs(-cli), swift-reward-one-value-dry-run and
swift-reward-one-value-broadcast; the logic on its own by tests/test_reward_dry_run.py.
"""

from __future__ import annotations

import json

import pytest

from tests.helpers import cell_python, run_script

pytestmark = pytest.mark.slow  # real ms-swift runs in a cell env


@pytest.mark.parametrize("cell", ["swift-3.5", "swift-3.12", "swift-4.6"])
def test_the_dry_run_passes_the_keyword_arguments_the_installed_ms_swift_passes(cell, model_dir, tmp_path):
    output = tmp_path / "kwargs.json"
    completed = run_script(
        cell_python(cell), "tests/swift_reward_kwargs.py", "--model-dir", str(model_dir), "--output", str(output)
    )
    assert output.exists(), completed.stderr[-3000:]
    result = json.loads(output.read_text())
    assert result["status"] == 0 and result["passed"] == result["dry_run"]
