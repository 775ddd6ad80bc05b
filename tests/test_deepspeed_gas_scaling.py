"""trl.deepspeed-gas-double-scaling: transformers 4.48 + DeepSpeed divide the GRPO loss by gradient accumulation twice.

Proven on real installs in the trl-0.15 cell (trl 0.15.2, transformers 4.48.3, accelerate 1.4.0,
DeepSpeed 0.16.4), through the matrix's own reproducer run (matrix/probe_ga_scaling.py: the same GRPO
step, GA 4, 2 CPU processes, launched with DDP and with ZeRO-2):
- unpatched, ZeRO-2's grad_norm is exactly 1/4 of DDP's;
- patched, they agree, DDP's is bit-identical to the unpatched one (the patch acts only under DeepSpeed),
  and the patch is applied in the DeepSpeed processes;
- the matrix expects patched DeepSpeed runs with accumulation > 1 to differ from plain on 4.48 only.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace

import pytest

from matrix.runs import Run, judge, planned_runs
from tests.helpers import reproducer_results

CELL = "trl-0.15"
PATCH = "trl.deepspeed-gas-double-scaling"


@pytest.fixture(scope="module")
def ga_scaling(tmp_path_factory):
    return reproducer_results(CELL, PATCH, tmp_path_factory.mktemp("ga-scaling"))


@pytest.mark.slow
@pytest.mark.cells("trl-0.15")
def test_zero2_grad_norm_is_a_quarter_of_ddp_on_transformers_4_48_unpatched(ga_scaling):
    record, result = ga_scaling["plain"]
    assert record["status"] == "pass", record
    assert result["versions"]["transformers"] == "4.48.3"
    assert re.search(r"ZeRO-2 grad_norm is 1/4 of DDP's", result["error"])
    assert math.isclose(result["grad_norm_ratio"], 0.25, rel_tol=1e-3), result["grad_norm_ratio"]


@pytest.mark.slow  # its fixture runs the reproducer in the trl-0.15 cell (env build, DeepSpeed's op build, 4 launches)
@pytest.mark.cells("trl-0.15")
def test_patched_zero2_grad_norm_equals_ddp_and_ddp_is_untouched(ga_scaling):
    record, result = ga_scaling["patched"]
    assert record["status"] == "pass", record
    assert result["status"] == "ok", result["error"]
    assert math.isclose(result["grad_norm_ratio"], 1.0, rel_tol=1e-3), result["grad_norm_ratio"]
    assert result["patch_status_zero2"] == "applied"
    # Without DeepSpeed the wrapper calls straight through: the same gradient to the last bit.
    assert result["grad_norm_ddp"] == ga_scaling["plain"][1]["grad_norm_ddp"]


def test_matrix_expects_patched_accumulating_deepspeed_runs_to_differ_from_plain_only_on_4_48():
    def accumulating_patched(transformers: str) -> list[Run]:
        versions = {"torch": "2.13.0", "trl": "0.15.2", "transformers": transformers, "deepspeed": "0.16.4"}
        runs = [r for r in planned_runs(versions, "cpu") if r.kind.endswith("-ga8") and r.mode == "patched"]
        assert [r.launcher for r in runs] == ["zero2", "zero3"]
        return runs

    trained = {"status": "ok", "all_trainable_params_changed": True, "weights_sha256": "patched"}
    for run in accumulating_patched("4.48.3"):  # the patch corrects the gradient scale: other weights, by design
        assert not run.same_as_plain and PATCH in run.expectation
        assert judge(replace(run, checks=()), trained, {**trained, "weights_sha256": "plain"})[0] == "pass"
    for run in accumulating_patched("4.51.3"):  # nothing to correct: bit-identical, as everywhere else
        assert run.same_as_plain
        assert judge(replace(run, checks=()), trained, {**trained, "weights_sha256": "plain"}) == (
            "fail",
            "trained, but weights differ from the plain run",
        )
