"""trl.refuse-outdated-logps-override on the installed trl (1.16 in the development env): axolotl #3971's shape is
refused before the model loads, and every subclass whose override trl's loss can call, or does not call, is left to
upstream. The upstream crash itself: matrix reproducer logps-override-old-signature (trl 1.9, 1.16 cells)."""

from __future__ import annotations

from typing import Any

import pytest

from grpo_compat.core.errors import UnsupportedCombinationError
from grpo_compat.testing.smoke import with_trl_1_6_logps_signature

pytest.importorskip("trl")
MISSING_MODEL = "/nonexistent/model"  # upstream fails loading it; a refusal comes before


@pytest.fixture(autouse=True)
def applied():
    import grpo_compat

    grpo_compat.apply()
    yield
    grpo_compat.revert()


def build(trainer_class: type, tmp_path, **settings: Any) -> BaseException:
    from trl import GRPOConfig

    config = GRPOConfig(
        output_dir=str(tmp_path),
        num_generations=2,
        per_device_train_batch_size=2,
        use_cpu=True,
        report_to="none",
        **settings,
    )
    with pytest.raises(Exception) as raised:  # the refusal, or upstream failing on the missing model
        trainer_class(
            model=MISSING_MODEL, reward_funcs=lambda completions, **kwargs: [0.0] * len(completions), args=config
        )
    return raised.value


def test_an_override_with_trl_1_6s_signature_is_refused_naming_the_class_and_the_missing_keywords(tmp_path):
    from trl import GRPOTrainer

    error = build(with_trl_1_6_logps_signature(GRPOTrainer), tmp_path)
    assert isinstance(error, UnsupportedCombinationError)
    assert (
        "OldSignatureGRPOTrainer overrides _get_per_token_logps_and_entropies without the keywords "
        "compute_aux_loss, spatial_shapes, num_tiles" in str(error)
    )
    assert "**kwargs" in str(error) and "Refused before the model loads" in str(error)


def test_overrides_trl_can_call_or_does_not_call_are_left_to_upstream(tmp_path):
    from trl import GRPOTrainer

    class ForwardsKeywords(GRPOTrainer):
        def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, **kwargs):
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, **kwargs
            )

    old = with_trl_1_6_logps_signature(GRPOTrainer)
    own_loss = type("OwnLoss", (old,), {"_compute_loss": lambda self, model, inputs: 0})
    for trainer_class in (GRPOTrainer, ForwardsKeywords, own_loss):
        assert not isinstance(build(trainer_class, tmp_path), UnsupportedCombinationError), trainer_class
    # The Liger loss does not call the method at every step: upstream decides (here: liger-kernel is missing).
    assert not isinstance(build(old, tmp_path, use_liger_kernel=True), UnsupportedCombinationError)
