"""KF-3: hidden states pass a fused GRPO loss's lm_head projection untouched, logits are used as logits,
anything else is refused naming both shapes.

- grpo_compat.fixes.shapes.projection_input, the one decision both guard patches use;
- trl.liger-lm-head-guard with the real TRL 0.23 and the real Liger GRPO loss (liger-kernel compiles it
  with torch.compile on CPU), in the trl-0.23-liger cell env, through matrix/probe_lm_head.py;
- unsloth.lm-head-guard: Unsloth imports only on a GPU, so its guard functions run here on stand-ins of
  the functions Unsloth generates (same names, signatures and shapes: hidden (B, T, H), logits (B, T, V),
  lm_head weight (V, H), H != V as in Mistral's 4096 / 32000). The GPU proof is pending.
"""

from __future__ import annotations

import json
import re
import sys
import types

import pytest
import torch
from grpo_compat.patches.unsloth import lm_head_guard as unsloth_guard

from grpo_compat.core.errors import LMHeadShapeError
from grpo_compat.fixes.shapes import HIDDEN, LOGITS, lm_head_shape, projection_input
from matrix.reproducers import REPRODUCERS
from tests.helpers import cell_python, run_script

B, T, H, V = 2, 5, 64, 500  # Mistral's H=4096, V=32000, scaled down; H != V


def test_mistral_shapes_are_told_apart_without_a_tensor():
    head = (32000, 4096)
    assert projection_input((1, 7, 4096), head, "here") == HIDDEN
    assert projection_input((1, 7, 32000), head, "here") == LOGITS
    with pytest.raises(
        LMHeadShapeError, match=r"here: .*\[32000, 4096\].*\[1, 7, 1024\].*neither the hidden size 4096"
    ):
        projection_input((1, 7, 1024), head, "here")


def test_a_square_head_is_read_as_hidden_states():
    assert projection_input((B, T, H), (H, H), "here") == HIDDEN


def test_head_shape_comes_from_deepspeed_zero3_metadata_and_is_unknown_for_empty_shards():
    shard = torch.empty(0)
    assert lm_head_shape(shard) is None  # a ZeRO-3 shard without its metadata, or a flat FSDP1 view
    shard.ds_shape = torch.Size([V, H])
    assert lm_head_shape(shard) == (V, H)
    assert lm_head_shape(torch.empty(V, H)) == (V, H)


# -- trl.liger-lm-head-guard: the real TRL + Liger, in the trl-0.23-liger cell --------------------------------


@pytest.fixture(scope="module")
def liger_probe(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lm-head-probe")
    python = cell_python("trl-0.23-liger")
    results = {}
    for mode in ("plain", "patched"):
        output = folder / f"{mode}.json"
        arguments = ["--mode", mode, "--output", str(output), "--model-dir", str(folder / "tiny-model")]
        completed = run_script(python, "matrix/probe_lm_head.py", *arguments)
        assert output.exists(), completed.stderr[-3000:]
        results[mode] = json.loads(output.read_text())
    return results


@pytest.mark.slow
@pytest.mark.cells("trl-0.23-liger")
def test_trl_liger_loss_on_logits_fails_upstream_with_the_kf3_matmul_error(liger_probe):
    plain = liger_probe["plain"]
    assert plain["status"] == "error"
    reproducer = next(r for r in REPRODUCERS if r.patch == "trl.liger-lm-head-guard")
    assert re.search(reproducer.upstream, plain["error"], re.S), plain["error"][:2000]
    assert "[64, 504]" in plain["error"]  # Liger multiplies the (B*K, 504) logits by lm_head.weight.t() (64, 504)


@pytest.mark.slow
@pytest.mark.cells("trl-0.23-liger")
def test_trl_liger_guard_keeps_hidden_states_and_uses_the_non_liger_loss_for_logits(liger_probe):
    patched = liger_probe["patched"]
    assert patched["status"] == "ok", patched["error"]
    # The probe checked each of these itself and failed otherwise; the summary says which ran.
    summary = patched["summary"]
    assert "bit-identical to upstream's, no copy" in summary  # hidden states: Liger gets upstream's own tensor
    assert "non-Liger loss" in summary and "equal bit for bit" in summary  # logits: TRL's non-Liger loss
    assert "LMHeadShapeError naming [504, 64]" in summary  # another width: a clear error with both shapes
    statuses = {p["id"]: p["status"] for p in patched["grpo_compat"]["patches"]}
    assert statuses["trl.liger-lm-head-guard"] == "applied"


def test_trl_liger_guard_stands_back_outside_its_window():
    from grpo_compat.core.engine import Engine

    # trl 1.16 here: no _get_last_hidden_state / compute_liger_loss (trl >= 1.14 projects elsewhere).
    assert Engine().plan().status_of("trl.liger-lm-head-guard").value == "outside version window"


# -- unsloth.lm-head-guard: the guard functions on stand-ins of Unsloth's generated module ---------------------


def _generated_module(name: str, logits_take_temperature: bool = True) -> types.ModuleType:
    """A stand-in for unsloth_compiled_cache/UnslothGRPOTrainer.py: the two log-prob functions it defines."""
    module = types.ModuleType(name)

    def chunked_hidden_states_selective_log_softmax(
        hidden_states, lm_head, index, chunks=4, logit_scale_multiply=0.0, logit_scale_divide=0.0,
        logit_softcapping=0.0, temperature=1.0,
    ):  # fmt: skip
        logits = (hidden_states @ lm_head.t()).float() / temperature
        return logits.log_softmax(-1).gather(-1, index.unsqueeze(-1)).squeeze(-1)

    def with_temperature(logits, index, temperature=1.0):
        return (logits.float() / temperature).log_softmax(-1).gather(-1, index.unsqueeze(-1)).squeeze(-1)

    def without_temperature(logits, index):  # unsloth-zoo < 2026.3.2
        return logits.float().log_softmax(-1).gather(-1, index.unsqueeze(-1)).squeeze(-1)

    module.chunked_hidden_states_selective_log_softmax = chunked_hidden_states_selective_log_softmax
    module.chunked_selective_log_softmax = with_temperature if logits_take_temperature else without_temperature
    for function in (chunked_hidden_states_selective_log_softmax, with_temperature, without_temperature):
        function.__module__ = name
    return module


@pytest.fixture
def generated(monkeypatch):
    def make(logits_take_temperature: bool = True) -> types.ModuleType:
        module = _generated_module(f"UnslothGRPOTrainer_{id(object())}", logits_take_temperature)
        monkeypatch.setitem(sys.modules, module.__name__, module)

        def create_new_function(name, new_source, model_location, functions, **kwargs):
            return module

        # What unsloth.lm-head-guard does when zoo's create_new_function generates the trainer module.
        assert unsloth_guard.guard_new_trainer_module(create_new_function, "UnslothGRPOTrainer", "", "", []) is module
        return module

    return make


def _tensors(seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    hidden = torch.randn(B, T, H, generator=generator)
    head = torch.randn(V, H, generator=generator) * 0.05
    index = torch.randint(0, V, (B, T), generator=generator)
    return hidden, head, index


def test_unsloth_guard_passes_hidden_states_to_the_generated_projection_untouched(generated):
    module = generated()
    hidden, head, index = _tensors()
    upstream = module.chunked_hidden_states_selective_log_softmax.__wrapped__
    calls = []

    def projection(*args, **kwargs):
        calls.append((args, upstream(*args, **kwargs)))
        return calls[-1][1]

    result = unsloth_guard.guarded_projection(projection, hidden, head, index, 4, 0.0, 0.0, 0.0, 0.7)
    (args, returned), *_ = calls
    assert args[0] is hidden and args[1] is head  # the very tensors go in
    assert result is returned  # and upstream's own result comes out: nothing computed besides
    guarded = module.chunked_hidden_states_selective_log_softmax(hidden, head, index)
    assert torch.equal(guarded, upstream(hidden, head, index))


@pytest.mark.parametrize("logits_take_temperature", [True, False], ids=["zoo-2026.3.2+", "zoo-2026.1.2"])
def test_unsloth_guard_reads_logits_as_logits_giving_the_hidden_states_log_probs(generated, logits_take_temperature):
    module = generated(logits_take_temperature)
    hidden, head, index = _tensors()
    project = module.chunked_hidden_states_selective_log_softmax
    for temperature in (1.0, 0.7):
        from_hidden = project(hidden, head, index, 4, 0.0, 0.0, 0.0, temperature)
        from_logits = project(hidden @ head.t(), head, index, 4, 0.0, 0.0, 0.0, temperature)
        torch.testing.assert_close(from_logits, from_hidden)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):  # what the unguarded projection does
        project.__wrapped__(hidden @ head.t(), head, index)


def test_unsloth_guard_refuses_another_width_naming_both_shapes(generated):
    module = generated()
    hidden, head, index = _tensors()
    with pytest.raises(LMHeadShapeError, match=rf"\[{V}, {H}\].*\[{B}, {T}, 40\]"):
        module.chunked_hidden_states_selective_log_softmax(hidden[..., :40], head, index)


def test_unsloth_guard_wraps_a_generated_module_once(generated):
    module = generated()
    guarded = module.chunked_hidden_states_selective_log_softmax
    unsloth_guard.guard_generated_module(module)
    assert module.chunked_hidden_states_selective_log_softmax is guarded


class _EfficientGRPO2025(torch.autograd.Function):
    """Stand-in of zoo 2025.x UnslothEfficientGRPO: projects its hidden-state arguments inside forward."""

    @staticmethod
    def forward(ctx, _new_hidden_states, _old_hidden_states, lm_head, _input_ids, _mask, _advantages, beta):
        new = torch.matmul(_new_hidden_states, lm_head.t()).log_softmax(-1)
        return -(new.gather(-1, _input_ids.unsqueeze(-1)).squeeze(-1) * _mask * _advantages.unsqueeze(1)).mean()

    @staticmethod
    def backward(ctx, grad):
        return (None,) * 7


def test_unsloth_2025_guard_passes_hidden_states_and_explains_logits(monkeypatch):
    module = types.ModuleType("UnslothGRPOTrainer_2025")
    grpo = type("UnslothEfficientGRPO", (_EfficientGRPO2025,), {"forward": _EfficientGRPO2025.__dict__["forward"]})
    module.UnslothEfficientGRPO = grpo
    hidden, head, index = _tensors()
    mask, advantages = torch.ones(B, T), torch.randn(B)
    expected = grpo.apply(hidden, None, head, index, mask, advantages, 0.0)
    unsloth_guard.guard_generated_module(module)
    assert torch.equal(grpo.apply(hidden, None, head, index, mask, advantages, 0.0), expected)
    with pytest.raises(LMHeadShapeError, match=rf"\[{B}, {T}, {V}\], i\.e\. logits.*UNSLOTH_RETURN_HIDDEN_STATES"):
        grpo.apply(hidden @ head.t(), None, head, index, mask, advantages, 0.0)


def test_the_liger_reproducer_runs_its_probe_in_cells_with_liger_and_a_trl_in_the_window():
    from matrix.runs import planned_runs

    def liger_runs(versions: dict) -> list[tuple[str, str]]:
        return [(r.mode, r.script) for r in planned_runs(versions, "cpu") if r.kind == "repro:liger-logits-as-hidden"]

    assert liger_runs({"trl": "0.23.1", "liger-kernel": "0.6.2"}) == [("plain", "lm-head"), ("patched", "lm-head")]
    assert liger_runs({"trl": "0.23.1"}) == []  # no liger-kernel: TRL refuses use_liger_loss
    assert liger_runs({"trl": "1.16.0", "liger-kernel": "0.8.5"}) == []  # no Liger path in trl >= 1.14
