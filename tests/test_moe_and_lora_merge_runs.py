"""Census rows 41 and 14 in the matrix: the MoE router loss (trl >= 1.7) and a bf16 LoRA merge (ms-swift #5334).

The runs themselves are slow (cell envs): the matrix runs them (matrix/runs.py, matrix/reproducers.py); here, that
they are planned where their versions are, and the tiny MoE model grpo_compat.testing builds for them.
"""

from __future__ import annotations

import pytest

from matrix.runs import planned_runs


def kinds(versions: dict[str, str]) -> set[str]:
    return {run.kind for run in planned_runs(versions, "cpu")}


def test_the_moe_pair_and_its_reproducer_run_where_trl_adds_the_router_loss():
    moe = {"moe", "repro:watchdog-moe-router-loss-only"}
    assert moe <= kinds({"trl": "1.9.2", "transformers": "5.10.0"})
    assert moe <= kinds({"trl": "1.16.0", "transformers": "5.23.0"})
    assert not moe & kinds({"trl": "1.6.0", "transformers": "4.57.6"})  # trl <= 1.6 never adds it
    # CI's quick matrix keeps the reproducer (it trains the MoE plain), the full matrix adds the do-no-harm pair.
    quick = {run.kind for run in planned_runs({"trl": "1.16.0", "transformers": "5.23.0"}, "cpu", quick=True)}
    assert "repro:watchdog-moe-router-loss-only" in quick and "moe" not in quick


def test_the_lora_merge_probe_runs_once_in_ms_swift_cells_with_deepspeed():
    runs = [run for run in planned_runs({"ms-swift": "4.6.0", "deepspeed": "0.19.8"}, "cpu")]
    (probe,) = [run for run in runs if run.kind == "lora-bf16-merge"]
    assert probe.mode == "plain" and probe.group == "lora-bf16-merge-rounds-away"
    assert "lora-bf16-merge" not in kinds({"ms-swift": "4.6.0"})


@pytest.mark.slow
def test_the_tiny_moe_model_is_a_mixture_of_experts_trl_adds_the_router_loss_for(tmp_path):
    from transformers import AutoModelForCausalLM

    from grpo_compat.testing.tiny_model import build_tiny_qwen2

    model = AutoModelForCausalLM.from_pretrained(build_tiny_qwen2(tmp_path / "moe", architecture="qwen3-moe"))
    # trl >= 1.7: aux_loss_enabled = the config has output_router_logits and the coefficient is not 0
    assert hasattr(model.config, "output_router_logits") and model.config.router_aux_loss_coef == 0.001
    assert model.config.num_experts == 4 and model.config.num_experts_per_tok == 2
