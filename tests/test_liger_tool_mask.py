"""trl.liger-tool-mask: trl 0.26-0.28's Liger GRPO loss trains on tool results (trl #4974, fixed by #4975 in 0.29).

Proven on real installs in the trl-0.27-tools cell (trl 0.27.2, transformers 5.0.0, liger-kernel 0.6.4) through the
matrix's reproducer liger-tool-results-trained (matrix/probe_liger_tool_mask.py): on one batch with a tool round,
unpatched, the gradient of the loss trl trains on (Liger's) differs from that of trl's own loss, which masks the
tool's result; patched, they agree.
"""

from __future__ import annotations

import pytest

from matrix.runs import planned_runs
from tests.helpers import reproducer_results

CELL = "trl-0.27-tools"
PATCH = "trl.liger-tool-mask"


@pytest.fixture(scope="module")
def liger_tool_mask(tmp_path_factory):
    return reproducer_results(CELL, PATCH, tmp_path_factory.mktemp("liger-tool-mask"))


@pytest.mark.slow  # its fixture fits the tool-calling model in the trl-0.27-tools cell and runs 2 probes
@pytest.mark.cells("trl-0.27-tools")
def test_plain_liger_gradient_takes_in_the_tool_results(liger_tool_mask):
    record, result = liger_tool_mask["plain"]
    assert record["status"] == "pass", record
    assert result["tool_result_tokens"] > 0
    assert abs(result["trained_grad_norm"] - result["masked_grad_norm"]) > 1e-3 * result["masked_grad_norm"]


@pytest.mark.slow
@pytest.mark.cells("trl-0.27-tools")
def test_patched_liger_gradient_is_trl_own_masked_one(liger_tool_mask):
    record, result = liger_tool_mask["patched"]
    assert record["status"] == "pass", record
    assert result["status"] == "ok", result["error"]
    assert result["trained_grad_norm"] == pytest.approx(result["masked_grad_norm"], rel=1e-5)


def test_liger_tool_mask_reproducer_runs_only_before_trl_0_29_with_liger():
    def kinds(trl: str, liger: str | None) -> set[str]:
        versions = {"torch": "2.13.0", "trl": trl, "transformers": "5.0.0", "liger-kernel": liger}
        return {run.kind for run in planned_runs(versions, "cpu")}

    assert "repro:liger-tool-results-trained" in kinds("0.27.2", "0.6.4")
    assert "repro:liger-tool-results-trained" not in kinds("0.29.0", "0.6.4")
    assert "repro:liger-tool-results-trained" not in kinds("0.27.2", None)
