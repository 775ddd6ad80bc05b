"""Version skews that pip allows, on real installs: the shim trains exactly as the compatible pin does."""

from __future__ import annotations

import pytest

from tests.helpers import smoke


@pytest.mark.slow
@pytest.mark.cells("trl-0.16-tf4.52")
def test_trl_0_16_on_transformers_4_52_patched_gives_the_weights_of_transformers_4_51(model_dir, tmp_path):
    # trl 0.16.1's _get_train_sampler takes no dataset; transformers 4.52 passes one (trl.train-sampler-signature).
    plain_skewed = smoke("trl-0.16-tf4.52", "plain", model_dir, tmp_path)
    assert plain_skewed["status"] == "error"
    assert "_get_train_sampler() takes 1 positional argument but 2 were given" in plain_skewed["error"]
    patched_skewed = smoke("trl-0.16-tf4.52", "patched", model_dir, tmp_path)
    compatible_pin = smoke("trl-0.16", "plain", model_dir, tmp_path)  # transformers 4.51.3
    assert patched_skewed["status"] == compatible_pin["status"] == "ok", patched_skewed.get("error")
    assert patched_skewed["all_trainable_params_changed"]
    assert patched_skewed["weights_sha256"] == compatible_pin["weights_sha256"]


@pytest.mark.slow
@pytest.mark.cells("trl-0.23")
def test_trl_0_23_evaluates_before_training_patched_and_trains_as_upstream_does_without_evaluating(model_dir, tmp_path):
    # trl 0.22.0-0.27.0 read current_gradient_accumulation_steps in the loss; transformers sets it only in its
    # training loop (trl.accumulation-steps-default). The pair pip allows: trl 0.23.1 + transformers 4.56.2.
    grpo = 'loss_type="grpo"'
    plain = smoke("trl-0.23", "plain", model_dir, tmp_path, grpo, flags=("--evaluate-first",))
    assert plain["status"] == "error" and plain["phase"] == "train"
    assert "object has no attribute 'current_gradient_accumulation_steps'" in plain["error"]
    patched = smoke("trl-0.23", "patched", model_dir, tmp_path, grpo, flags=("--evaluate-first",))
    assert patched["status"] == "ok" and patched["all_trainable_params_changed"], patched.get("error")
    assert patched["eval_loss"] is not None
    # Where upstream trains (no evaluation first, accumulation 2), the patch stands aside: identical weights.
    untouched = [
        smoke("trl-0.23", mode, model_dir, tmp_path, grpo, "gradient_accumulation_steps=2")
        for mode in ("plain", "patched")
    ]
    assert untouched[0]["status"] == untouched[1]["status"] == "ok"
    assert untouched[0]["weights_sha256"] == untouched[1]["weights_sha256"]


@pytest.mark.slow
@pytest.mark.cells("trl-0.14-tf4.45", "trl-0.14-tf4.52", "trl-0.14")
def test_trl_0_14_is_refused_before_the_model_loads_only_on_the_transformers_it_cannot_train_with(model_dir, tmp_path):
    # transformers 4.45.2 (forced past trl's requirement): Trainer takes no processing_class.
    plain = smoke("trl-0.14-tf4.45", "plain", model_dir, tmp_path)
    assert plain["status"] == "error" and "unexpected keyword argument 'processing_class'" in plain["error"]
    patched = smoke("trl-0.14-tf4.45", "patched", model_dir, tmp_path)
    assert patched["status"] == "error" and patched["phase"] == "model"
    assert "UnsupportedCombinationError: trl 0.14.0 with transformers 4.45.2" in patched["error"]
    assert 'pip install "transformers>=4.46"' in patched["error"]
    # transformers 4.52.4 (pip allows it): trains without an error, on the wrong tokens; the probe shows it.
    probe = smoke("trl-0.14-tf4.52", "plain", model_dir, tmp_path, script="probe_num_logits_to_keep.py")
    assert probe["status"] == "error" and probe["logits_shape"][1] == 12, probe.get("error")
    patched = smoke("trl-0.14-tf4.52", "patched", model_dir, tmp_path)
    assert patched["status"] == "error" and "UnsupportedCombinationError" in patched["error"]
    assert 'pip install "transformers<4.52" or pip install "trl>=0.15"' in patched["error"]
    # transformers 4.51.3, the newest it trains correctly with: honoured, and patched trains as plain does.
    assert smoke("trl-0.14", "plain", model_dir, tmp_path, script="probe_num_logits_to_keep.py")["status"] == "ok"
    edge = [smoke("trl-0.14", mode, model_dir, tmp_path) for mode in ("plain", "patched")]
    assert edge[0]["status"] == edge[1]["status"] == "ok", edge[1].get("error")
    assert edge[0]["weights_sha256"] == edge[1]["weights_sha256"]


@pytest.mark.slow
@pytest.mark.cells("trl-0.23-liger")
def test_liger_loss_without_the_loss_type_is_refused_and_a_loss_type_it_has_trains_as_upstream(model_dir, tmp_path):
    # trl 0.23.1's default loss_type is dapo; liger-kernel 0.6.2 computes grpo, bnpo and dr_grpo only.
    plain = smoke("trl-0.23-liger", "plain", model_dir, tmp_path, "use_liger_loss=true")
    assert plain["status"] == "error" and plain["phase"] == "train"
    assert "Unknown loss type: dapo" in plain["error"]
    patched = smoke("trl-0.23-liger", "patched", model_dir, tmp_path, "use_liger_loss=true")
    assert patched["status"] == "error" and patched["phase"] == "model"
    assert 'pip install "liger-kernel>=0.6.4" or loss_type="bnpo"' in patched["error"]
    bnpo = [
        smoke("trl-0.23-liger", mode, model_dir, tmp_path, "use_liger_loss=true", 'loss_type="bnpo"')
        for mode in ("plain", "patched")
    ]
    assert bnpo[0]["status"] == bnpo[1]["status"] == "ok", bnpo[1].get("error")
    assert bnpo[0]["weights_sha256"] == bnpo[1]["weights_sha256"]


@pytest.mark.slow
@pytest.mark.cells("trl-1.9-liger")
def test_gmpo_with_liger_is_refused_and_gmpo_without_liger_is_not(model_dir, tmp_path):
    # trl 1.9.2: GMPOTrainer with use_liger_kernel computes the fused GRPO loss, not GMPO's objective.
    probe = "probe_gmpo_liger.py"
    plain = smoke("trl-1.9-liger", "plain", model_dir, tmp_path, script=probe)
    assert plain["status"] == "error" and plain["trained_loss"] != plain["gmpo_loss"], plain.get("error")
    patched = smoke("trl-1.9-liger", "patched", model_dir, tmp_path, script=probe)
    assert patched["status"] == "error" and "UnsupportedCombinationError: GMPOTrainer" in patched["error"]
    without_liger = smoke("trl-1.9-liger", "patched", model_dir, tmp_path, "use_liger_kernel=false", script=probe)
    assert without_liger["status"] == "ok", without_liger.get("error")
