"""Issue 41 items 2-4: the fused loss is the objective; settings that quietly change it; defaults that change it.

Fast tests read grpo_compat's own rules and the settings data; the slow ones run the probes and smoke runs on the
real installs of the cells they name (docs/objective-invariants.md has their numbers).
"""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest

from grpo_compat.fixes.objective_settings import sequence_level_token_summed, sleep_level_forces_accumulation
from matrix.runs import planned_runs
from tests.helpers import smoke


@pytest.mark.parametrize("loss_type", ["bnpo", "dr_grpo", "dapo", "cispo"])
def test_gspo_with_a_token_summed_loss_type_is_named(loss_type):
    warning = sequence_level_token_summed(SimpleNamespace(importance_sampling_level="sequence", loss_type=loss_type))
    assert warning and f"loss_type={loss_type!r}" in warning and "loss_type='grpo'" in warning


@pytest.mark.parametrize(("level", "loss_type"), [("sequence", "grpo"), ("token", "dapo"), ("token", "bnpo")])
def test_gspo_per_sequence_and_token_level_runs_are_not_named(level, loss_type):
    assert sequence_level_token_summed(SimpleNamespace(importance_sampling_level=level, loss_type=loss_type)) is None


def test_sleep_level_with_accumulation_is_named_and_one_step_or_no_vllm_is_not():
    colocated = {"rlhf_type": "grpo", "use_vllm": True, "sleep_level": 1}
    assert "gradient_accumulation_steps=4 with 1" in sleep_level_forces_accumulation(
        {**colocated, "gradient_accumulation_steps": 4}, "3.3.1"
    )
    assert "its default" in sleep_level_forces_accumulation(colocated, "3.3.1")  # ms-swift's default is replaced too
    assert sleep_level_forces_accumulation({**colocated, "gradient_accumulation_steps": 1}, "3.3.1") is None
    for other in ({"use_vllm": False}, {"sleep_level": 0}, {"async_generate": True}, {"rlhf_type": "dpo"}):
        assert (
            sleep_level_forces_accumulation({**colocated, "gradient_accumulation_steps": 4, **other}, "3.3.1") is None
        )


def test_check_from_says_the_bias_correction_default_changes_the_loss_only_with_a_kl_term():
    def changes(*settings):
        command = [sys.executable, "-m", "grpo_compat", "check", "--json", "--from", "trl==1.9.2", *settings]
        completed = subprocess.run(command, capture_output=True, text=True, timeout=120)
        report = json.loads(completed.stdout)
        return {change["setting"]: change for change in report["upgrade"]["changes"]}

    with_kl = changes("beta=0.04")["use_bias_correction_kl"]
    assert (with_kl["before"], with_kl["after"]) == ("False", "True")
    assert with_kl["note"] == "default changed; changes the loss (beta=0.04)"
    assert "only with beta set" in changes("num_generations=4")["use_bias_correction_kl"]["note"]


def test_the_fused_loss_runs_are_planned_where_trl_has_a_fused_loss():
    def kinds(**versions):
        return {run.kind for run in planned_runs(versions, "cpu")}

    trl_1_9 = kinds(trl="1.9.2", transformers="5.10.0", **{"liger-kernel": "0.8.0"})
    assert {"fused-loss-agrees", "repro:fused-loss-token-normalisation", "repro:fused-loss-moe-aux-dropped"} <= trl_1_9
    trl_0_23 = kinds(trl="0.23.1", transformers="4.56.2", **{"liger-kernel": "0.6.2"})
    assert "fused-loss-agrees" in trl_0_23 and "repro:fused-loss-token-normalisation" not in trl_0_23  # no dapo
    assert "fused-loss-agrees" not in kinds(trl="1.16.0", transformers="5.23.0", **{"liger-kernel": "0.8.0"})


@pytest.mark.slow  # two trainings on the fused loss (about 2 minutes each on 2 shared cores)
@pytest.mark.cells("trl-1.9-liger")
def test_dapo_with_accumulation_on_the_fused_loss_is_named_with_both_values(model_dir, tmp_path):
    settings = ("loss_type=dapo", "gradient_accumulation_steps=2")
    plain = smoke("trl-1.9-liger", "plain", model_dir, tmp_path, *settings, script="probe_fused_loss.py")
    patched = smoke("trl-1.9-liger", "patched", model_dir, tmp_path, *settings, script="probe_fused_loss.py")
    assert "the fused GRPO loss is not the objective" in plain["error"]
    assert patched["status"] == "ok", patched["error"]
    check = patched["grpo_compat_check"]
    assert not check["agrees"] and (check["fused"], check["reference"]) == (
        pytest.approx(plain["trained_loss"], rel=1e-6),
        pytest.approx(plain["objective_loss"], rel=1e-6),
    )
    assert "loss_type='dapo' with gradient accumulation" in check["message"]
    assert patched["weights"] == plain["weights"]  # a warning: the run trains as plain does


@pytest.mark.slow
@pytest.mark.cells("trl-1.9-liger")
def test_the_check_is_silent_and_changes_no_weight_where_the_fused_loss_is_the_objective(model_dir, tmp_path):
    plain = smoke("trl-1.9-liger", "plain", model_dir, tmp_path, "loss_type=bnpo", script="probe_fused_loss.py")
    patched = smoke("trl-1.9-liger", "patched", model_dir, tmp_path, "loss_type=bnpo", script="probe_fused_loss.py")
    assert plain["status"] == patched["status"] == "ok", (plain["error"], patched["error"])
    assert patched["grpo_compat_check"]["agrees"] and not patched.get("objective_warnings")
    assert patched["weights"] == plain["weights"]


@pytest.mark.slow
@pytest.mark.cells("trl-0.23-liger")
def test_gspo_with_bnpo_trains_silently_plain_and_is_named_patched_with_the_same_weights(model_dir, tmp_path):
    settings = ('importance_sampling_level="sequence"', 'loss_type="bnpo"')
    plain = smoke("trl-0.23-liger", "plain", model_dir, tmp_path, *settings)
    patched = smoke("trl-0.23-liger", "patched", model_dir, tmp_path, *settings)
    assert plain["status"] == patched["status"] == "ok"
    assert not plain.get("objective_warnings")
    assert "importance_sampling_level='sequence' (GSPO) with loss_type='bnpo'" in patched["objective_warnings"][0]
    assert patched["weights_sha256"] == plain["weights_sha256"]


@pytest.mark.slow
@pytest.mark.cells("swift-3.3")
def test_swift_sleep_level_accumulation_is_refused_and_one_step_is_kept(model_dir, tmp_path):
    script = "probe_swift_sleep_level.py"
    plain = smoke("swift-3.3", "plain", model_dir, tmp_path, "gradient_accumulation_steps=4", script=script)
    assert "trains with gradient_accumulation_steps 1, not the 4 asked for" in plain["error"]
    patched = smoke("swift-3.3", "patched", model_dir, tmp_path, "gradient_accumulation_steps=4", script=script)
    assert (
        "GRPOSettingsError" in patched["error"] and "replaces gradient_accumulation_steps=4 with 1" in patched["error"]
    )
    for mode in ("plain", "patched"):
        kept = smoke("swift-3.3", mode, model_dir, tmp_path, "gradient_accumulation_steps=1", script=script)
        assert kept["status"] == "ok" and kept["gradient_accumulation_steps"] == 1, kept["error"]
