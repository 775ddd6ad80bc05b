"""Version skews that pip allows, on real installs: the shim trains exactly as the compatible pin does."""

from __future__ import annotations

import pytest

from tests.helpers import smoke


@pytest.mark.slow
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
