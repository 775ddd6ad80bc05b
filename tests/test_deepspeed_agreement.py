"""trl.deepspeed-agreement and swift.deepspeed-agreement: the DeepSpeed config agrees with the trainer's batch.

The rule (grpo_compat.fixes.deepspeed_config.batch_agreement) is tested here as a pure function; the
patches on real installs with deepspeed: the trl-1.16 and trl-0.16 cell envs (.venv has no deepspeed),
and ms-swift 4.6 with the trl-1.16 env's DeepSpeed 0.19.8 put on its path (the swift-4.6 cell has none).
"""

from __future__ import annotations

import base64
import functools
import json
import os
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from grpo_compat.fixes.deepspeed_config import (
    ACCUMULATION,
    MICRO,
    TOTAL,
    TrainerBatch,
    UserConfig,
    batch_agreement,
    load_config,
    refusal,
    unsized_refusal,
)
from matrix.runs import Run, judge, planned_runs
from tests.helpers import cell_python, run_python

counts = st.integers(min_value=1, max_value=64)
batches = st.builds(TrainerBatch, counts, counts, st.integers(min_value=1, max_value=16))


def refused(config: dict, batch: TrainerBatch, source: str = "ds.json") -> str:
    agreement = batch_agreement(config, batch)
    assert agreement.contradictions, "expected a refusal"
    return refusal(agreement, batch, UserConfig(config, source))


# -- the rule, as a pure function -------------------------------------------------------------------------


@given(batches)
def test_auto_batch_keys_always_agree(batch):
    agreement = batch_agreement({MICRO: "auto", ACCUMULATION: "auto", TOTAL: "auto"}, batch)
    assert (agreement.contradictions, agreement.fills) == ({}, {})


@given(batches)
def test_only_an_absent_accumulation_other_than_1_is_filled_deepspeed_derives_the_rest(batch):
    agreement = batch_agreement({"zero_optimization": {"stage": 3}}, batch)
    accumulation = batch.gradient_accumulation_steps
    assert agreement.contradictions == {}
    # accelerate inserts 1 for an absent accumulation: right when the trainer's is 1, wrong otherwise.
    assert agreement.fills == ({ACCUMULATION: accumulation} if accumulation != 1 else {})
    # An absent micro-batch or train batch is DeepSpeed's to derive, from the world size it really runs with.
    assert MICRO not in agreement.fills and TOTAL not in agreement.fills


@given(batches)
def test_hard_coded_values_equal_to_the_trainers_agree(batch):
    config = {key: batch.value_of(key) for key in (MICRO, ACCUMULATION, TOTAL)}
    agreement = batch_agreement(config, batch)
    assert (agreement.contradictions, agreement.fills) == ({}, {})


@given(batches, counts)
def test_contradicting_accumulation_is_refused_with_the_numbers_and_both_fixes(batch, hard_coded):
    assume(hard_coded != batch.gradient_accumulation_steps)
    message = refused({MICRO: "auto", ACCUMULATION: hard_coded, TOTAL: "auto"}, batch)
    ours = batch.gradient_accumulation_steps
    assert f"steps: {hard_coded} in the DeepSpeed config, but --gradient_accumulation_steps {ours}" in message
    assert batch.product() in message
    assert 'Fix: set "gradient_accumulation_steps": "auto" in ds.json' in message
    assert message.endswith(f"or pass --gradient_accumulation_steps {hard_coded} to match the DeepSpeed config.")


def test_train_batch_size_contradiction_names_the_accumulation_that_matches_it():
    batch = TrainerBatch(per_device_train_batch_size=2, gradient_accumulation_steps=2, world_size=2)
    message = refused({TOTAL: 64}, batch)
    assert "train_batch_size: 64 in the DeepSpeed config, but the trainer's 2 per device x 2" in message
    assert "2 processes = 8" in message
    assert "or pass --gradient_accumulation_steps 16 to match" in message


def test_a_deepspeed_config_that_contradicts_itself_gets_only_the_auto_fix():
    batch = TrainerBatch(per_device_train_batch_size=2, gradient_accumulation_steps=2, world_size=1)
    message = refused({MICRO: 2, ACCUMULATION: 3, TOTAL: 5}, batch)  # 2 x 3 x 1 != 5: no flags can match it
    assert '"gradient_accumulation_steps": "auto", "train_batch_size": "auto"' in message
    assert "or pass" not in message


def test_a_number_written_as_a_string_is_a_contradiction_as_transformers_sees_it():
    batch = TrainerBatch(per_device_train_batch_size=1, gradient_accumulation_steps=8, world_size=2)
    assert batch_agreement({ACCUMULATION: "8"}, batch).contradictions == {ACCUMULATION: "8"}
    assert 'gradient_accumulation_steps: "8" in the DeepSpeed config' in refused({ACCUMULATION: "8"}, batch)


def test_a_config_with_neither_micro_batch_nor_train_batch_is_refused_with_the_key_to_add():
    batch = TrainerBatch(per_device_train_batch_size=2, gradient_accumulation_steps=4, world_size=2)
    # DeepSpeed: "Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided", after the load.
    assert batch_agreement({"zero_optimization": {"stage": 2}, ACCUMULATION: "auto"}, batch).unsized
    for sized in ({MICRO: "auto"}, {TOTAL: 16}, {MICRO: 2, TOTAL: None}):
        assert not batch_agreement(sized, batch).unsized, sized
    message = unsized_refusal(batch, UserConfig({}, "ds.json"))
    assert 'add "train_micro_batch_size_per_gpu": "auto" to ds.json' in message
    assert "--per_device_train_batch_size 2" in message


def test_auto_find_batch_size_compares_only_the_accumulation():
    batch = TrainerBatch(4, 2, 1, auto_find_batch_size=True)  # the trainer halves the micro-batch on OOM
    agreement = batch_agreement({MICRO: 16, TOTAL: 999}, batch)
    assert agreement.contradictions == {}
    assert agreement.fills == {ACCUMULATION: 2}
    assert batch_agreement({ACCUMULATION: 4}, batch).contradictions == {ACCUMULATION: 4}
    assert batch_agreement({}, batch).fills == {ACCUMULATION: 2}


def test_accumulation_from_the_accelerate_config_gets_the_accelerate_fix():
    batch = TrainerBatch(per_device_train_batch_size=2, gradient_accumulation_steps=2, world_size=1)
    config = {MICRO: "auto", ACCUMULATION: 4, TOTAL: "auto"}
    agreement = batch_agreement(config, batch)
    message = refusal(agreement, batch, UserConfig(config, "accelerate's DeepSpeed settings", launcher_steps=4))
    assert "Fix: remove gradient_accumulation_steps from the deepspeed_config section of the accelerate" in message
    assert '"auto"' not in message  # no json the user could edit


def test_user_config_is_read_from_a_dict_a_file_json_or_base64_without_changing_the_dict(tmp_path):
    config = {"zero_optimization": {"stage": 2}, ACCUMULATION: "auto"}
    text = json.dumps(config)
    (tmp_path / "ds.json").write_text(text)
    loaded = load_config(config)
    loaded["zero_optimization"]["stage"] = 3
    assert config["zero_optimization"]["stage"] == 2
    for form in (
        str(tmp_path / "ds.json"),
        tmp_path / "ds.json",
        text,
        base64.urlsafe_b64encode(text.encode()).decode(),
    ):
        assert load_config(form) == config


# -- the patches on real installs --------------------------------------------------------------------------

DEEPSPEED_CELLS = ["trl-1.16", "trl-0.16"]
AUTO = {"zero_optimization": {"stage": 2}, MICRO: "auto", ACCUMULATION: "auto", TOTAL: "auto"}
CASES = {  # name -> (environment of an accelerate launch, GRPOConfig(deepspeed=...))
    "auto": ({}, AUTO),
    "absent": ({}, {"zero_optimization": {"stage": 2}, MICRO: "auto"}),  # no accumulation, no train batch
    "hard-coded": ({}, {**AUTO, ACCUMULATION: 4}),
    "launch-absent": ({"ACCELERATE_DEEPSPEED_CONFIG_FILE": "absent.json"}, None),
    "launch-hard-coded": ({"ACCELERATE_DEEPSPEED_CONFIG_FILE": "hard-coded.json"}, None),
    "launch-accumulation": ({"ACCELERATE_GRADIENT_ACCUMULATION_STEPS": "4"}, None),
}
BUILD_CONFIGS = """
import importlib, json, os, sys
import grpo_compat
from grpo_compat.fixes.deepspeed_config import BATCH_KEYS, agree_with_trainer
if sys.argv[1] == "patched":
    grpo_compat.apply()
GRPOConfig = importlib.import_module(sys.argv[4]).GRPOConfig  # trl's, or ms-swift 4.x's own

outcomes = {}
for name, (environment, deepspeed) in json.loads(sys.argv[2]).items():
    os.environ.update(environment, ACCELERATE_USE_DEEPSPEED="true")
    try:
        config = GRPOConfig(
            output_dir=sys.argv[3], deepspeed=deepspeed, per_device_train_batch_size=2, gradient_accumulation_steps=2,
            num_generations=2, use_cpu=True, bf16=False, report_to="none",
        )
    except Exception as error:
        outcomes[name] = {"error": f"{type(error).__name__}: {error}"}
        continue
    finally:
        for key in environment:
            del os.environ[key]
    live = config.deepspeed_plugin.deepspeed_config
    hf = getattr(config, "hf_deepspeed_config", None)
    outcomes[name] = {
        "config": {key: live.get(key) for key in BATCH_KEYS},
        "plugin_accumulation": config.deepspeed_plugin.gradient_accumulation_steps,
        "mismatches": hf.mismatches if hf is not None else None,
    }
    if sys.argv[1] == "patched":
        config.gradient_accumulation_steps *= 2  # as ms-swift's sequence parallel does on purpose, after the fill
        outcomes[name]["checked_again"] = agree_with_trainer(config) is not None
print(json.dumps({"outcomes": outcomes, "report": grpo_compat.report().to_dict()}))
"""


@functools.cache
def built(cell: str, mode: str, folder: str) -> dict:
    """GRPOConfig built for every case, in one process of the cell's env (one trl import for all cases)."""
    for name in ("absent", "hard-coded"):
        (Path(folder) / f"{name}.json").write_text(json.dumps(CASES[name][1]))
    cases = {
        name: ({k: str(Path(folder) / v) if v.endswith(".json") else v for k, v in env.items()}, deepspeed)
        for name, (env, deepspeed) in CASES.items()
    }
    result = run_python(
        f"import sys; sys.argv[1:] = {[mode, json.dumps(cases), folder, 'trl']!r}\n" + BUILD_CONFIGS,
        python=cell_python(cell),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return str(tmp_path_factory.mktemp("deepspeed-configs"))


@pytest.mark.slow
@pytest.mark.parametrize("cell", DEEPSPEED_CELLS)
def test_hard_coded_accumulation_is_refused_when_the_config_is_built_not_after_the_models_load(cell, folder):
    plain = built(cell, "plain", folder)["outcomes"]
    # Upstream only records the contradiction here; it raises it inside trainer.train().
    assert plain["hard-coded"]["mismatches"] == [
        "- ds gradient_accumulation_steps=4 vs hf gradient_accumulation_steps=2"
    ]
    assert "error" not in plain["launch-hard-coded"] and "error" not in plain["launch-accumulation"]
    patched = built(cell, "patched", folder)
    for name in ("hard-coded", "launch-hard-coded", "launch-accumulation"):
        error = patched["outcomes"][name]["error"]
        assert error.startswith("GRPOSettingsError: The DeepSpeed config (")
        assert "gradient_accumulation_steps: 4 in the DeepSpeed config, but --gradient_accumulation_steps 2" in error
        assert "or pass --gradient_accumulation_steps 4 to match the DeepSpeed config." in error
    assert f"{folder}/hard-coded.json" in patched["outcomes"]["launch-hard-coded"]["error"]
    assert "ACCELERATE_GRADIENT_ACCUMULATION_STEPS=4" in patched["outcomes"]["launch-accumulation"]["error"]
    statuses = {p["id"]: p["status"] for p in patched["report"]["patches"]}
    assert statuses["trl.deepspeed-agreement"] == statuses["trl.grpo-config-check"] == "applied"


@pytest.mark.slow
@pytest.mark.parametrize("cell", DEEPSPEED_CELLS)
def test_absent_accumulation_is_filled_as_auto_would_fill_it(cell, folder):
    plain, patched = built(cell, "plain", folder)["outcomes"], built(cell, "patched", folder)["outcomes"]
    assert plain["auto"]["config"] == patched["auto"]["config"] == {MICRO: 2, ACCUMULATION: 2, TOTAL: 4}
    # Upstream: accelerate inserts 1, no mismatch, no warning; DeepSpeed accumulates 1 micro-batch, the trainer 2.
    assert (plain["absent"]["config"][ACCUMULATION], plain["absent"]["plugin_accumulation"]) == (1, 1)
    assert plain["absent"]["mismatches"] == []
    # Patched: the accumulation only; the absent train_batch_size stays absent for DeepSpeed to derive (issue 12).
    assert (
        patched["absent"]["config"]
        == {**plain["absent"]["config"], ACCUMULATION: 2}
        == {
            MICRO: 2,
            ACCUMULATION: 2,
            TOTAL: None,
        }
    )
    assert patched["absent"]["plugin_accumulation"] == 2
    # accelerate launch --deepspeed_config_file: transformers fills "auto" later, from the same dict.
    assert plain["launch-absent"]["config"][ACCUMULATION] == 1
    assert patched["launch-absent"]["config"] == {MICRO: "auto", ACCUMULATION: 2, TOTAL: None}
    # Checked once: a later change of the arguments (ms-swift's sequence parallel) is neither refused nor re-filled.
    assert [outcome.get("checked_again") for outcome in patched.values() if "config" in outcome] == [False] * 3


REVERT_IN_ANY_ORDER = """
import grpo_compat, json, sys
from grpo_compat.core.errors import GRPOSettingsError
IDS = ["trl.deepspeed-agreement", "trl.grpo-config-check"]
if sys.argv[1] == "import-then-apply":
    import trl.trainer.grpo_config
grpo_compat.apply(only=IDS)
from trl.trainer.grpo_config import GRPOConfig
original = GRPOConfig.__post_init__
while hasattr(original, "__wrapped__"):
    original = original.__wrapped__

def refusals():
    found = []
    hard_coded = {"zero_optimization": {"stage": 2}, "gradient_accumulation_steps": 4}
    for kwargs in ({"num_generations": 1}, {"num_generations": 2, "deepspeed": hard_coded}):
        try:
            GRPOConfig(output_dir=sys.argv[2], per_device_train_batch_size=2, use_cpu=True, bf16=False, **kwargs)
        except GRPOSettingsError as error:
            found.append("deepspeed" if str(error).startswith("The DeepSpeed config") else "settings")
        except ValueError:
            found.append("upstream")
        else:
            found.append("built")
    return found

steps = {"both": refusals()}
grpo_compat.revert()
steps["reverted"] = [refusals(), GRPOConfig.__post_init__ is original]
for only in (IDS[1:], IDS[:1]):
    grpo_compat.apply(only=only)
    steps[only[0]] = refusals()
    grpo_compat.revert()
steps["end"] = GRPOConfig.__post_init__ is original
print(json.dumps(steps))
"""


@pytest.mark.slow
@pytest.mark.parametrize("order", ["apply-then-import", "import-then-apply"])
def test_two_patches_on_grpo_config_post_init_apply_and_revert_cleanly(order, folder):
    # trl.grpo-config-check refuses before upstream's __post_init__, trl.deepspeed-agreement after it.
    result = run_python(
        f"import sys; sys.argv[1:] = {[order, folder]!r}\n" + REVERT_IN_ANY_ORDER, python=cell_python("trl-1.16")
    )
    assert result.returncode == 0, result.stderr[-3000:]
    steps = json.loads(result.stdout.strip().splitlines()[-1])
    assert steps["both"] == ["settings", "deepspeed"]
    assert steps["reverted"] == [["upstream", "built"], True]
    assert steps["trl.grpo-config-check"] == ["settings", "built"]
    assert steps["trl.deepspeed-agreement"] == ["upstream", "deepspeed"]
    assert steps["end"] is True


def deepspeed_beside_swift(folder: Path) -> Path:
    """A folder that puts the trl-1.16 env's DeepSpeed 0.19.8 (same torch 2.13 CPU build) on swift-4.6's path."""
    site = next(Path(cell_python("trl-1.16")).parent.parent.glob("lib/python3.*/site-packages"))
    swift_site = next(Path(cell_python("swift-4.6")).parent.parent.glob("lib/python3.*/site-packages"))
    assert {p.name for p in site.glob("torch-*.dist-info")} == {p.name for p in swift_site.glob("torch-*.dist-info")}
    folder.mkdir(exist_ok=True)
    for pattern in ("deepspeed", "deepspeed-*", "hjson", "hjson-*", "msgpack", "msgpack-*", "ninja", "ninja-*"):
        for source in site.glob(pattern):
            if not (folder / source.name).exists():
                (folder / source.name).symlink_to(source)
    for source in (*site.glob("cpuinfo"), *site.glob("py_cpuinfo-*")):
        if not (folder / source.name).exists():
            (folder / source.name).symlink_to(source)
    return folder


@pytest.mark.slow
@pytest.mark.cells("swift-4.6")
def test_swift_4_config_is_checked_by_the_swift_patch_because_swift_skips_trls_post_init(folder):
    cases = {
        "hard-coded": ({}, {**AUTO, ACCUMULATION: 4}),
        "absent": ({}, {"zero_optimization": {"stage": 2}, MICRO: "auto", TOTAL: "auto"}),
    }
    arguments = [json.dumps(cases), folder, "swift.rlhf_trainers.arguments"]
    code = f"import sys; sys.argv[1:] = {['patched', *arguments]!r}\n" + BUILD_CONFIGS
    swift = cell_python("swift-4.6")
    offline = {"MODELSCOPE_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    without = run_python(code, python=swift, env=offline)
    assert without.returncode == 0, without.stderr[-3000:]
    statuses = {p["id"]: p["status"] for p in json.loads(without.stdout.strip().splitlines()[-1])["report"]["patches"]}
    assert statuses["swift.deepspeed-agreement"] == "not installed"  # the swift-4.6 cell has no deepspeed
    overlay = deepspeed_beside_swift(Path(folder) / "deepspeed-overlay")
    python_path = os.pathsep.join(filter(None, [str(overlay), os.environ.get("PYTHONPATH")]))
    outcomes = {}
    for mode in ("plain", "patched"):
        code = f"import sys; sys.argv[1:] = {[mode, *arguments]!r}\n" + BUILD_CONFIGS
        result = run_python(code, python=swift, env={**offline, "PYTHONPATH": python_path})
        assert result.returncode == 0, result.stderr[-3000:]
        outcomes[mode] = json.loads(result.stdout.strip().splitlines()[-1])
    plain, patched = outcomes["plain"]["outcomes"], outcomes["patched"]["outcomes"]
    assert {name: outcome["config"][ACCUMULATION] for name, outcome in plain.items()} == {"hard-coded": 4, "absent": 1}
    assert (
        "gradient_accumulation_steps: 4 in the DeepSpeed config, but --gradient_accumulation_steps 2"
        in (patched["hard-coded"]["error"])
    )
    assert patched["absent"]["config"][ACCUMULATION] == 2
    statuses = {p["id"]: p["status"] for p in outcomes["patched"]["report"]["patches"]}
    assert statuses["swift.deepspeed-agreement"] == "applied"


# -- the matrix: the field report's shape and the two reproducers, judged ---------------------------------

GOOD = {  # a ZeRO run of the field report's shape that trains as it should (numbers from the trl-1.16 cell)
    "status": "ok",
    "all_trainable_params_changed": True,
    "steps": 3,
    "changed_on_ranks": [True, True],
    "kl_per_step": [0.0, 5.1e-07, 9.0e-07],
    "trainer_gradient_accumulation_steps": 8,
    "engine_gradient_accumulation_steps": 8,
    "engine_optimizer_steps": 3,
    "phase": "train",
}


def planned(versions: dict, kind: str, mode: str) -> Run:
    return next(run for run in planned_runs(versions, "cpu") if (run.kind, run.mode) == (kind, mode))


NEWEST = {"trl": "1.16.0", "transformers": "5.23.0", "accelerate": "1.15.0", "deepspeed": "0.19.8"}
OLD = {"trl": "0.16.1", "transformers": "4.51.3", "accelerate": "1.6.0", "deepspeed": "0.16.5"}


def test_field_shape_runs_pass_only_when_every_rank_moved_kl_rose_and_deepspeed_stepped_with_the_trainer():
    run = planned(NEWEST, "zero3-ga8", "plain")
    assert "gradient_accumulation_steps=8" in run.settings and run.launcher == "zero3" and not run.skip
    status, outcome = judge(run, GOOD, None)
    assert status == "pass"
    assert "DeepSpeed 3 optimizer steps x 8 accumulation = trainer 3 x 8" in outcome
    broken = {
        "changed_on_ranks": [True, False],
        "kl_per_step": [0.0, 0.0, 0.0],
        "engine_optimizer_steps": 24,
    }
    for key, value in broken.items():
        assert judge(run, {**GOOD, key: value}, None)[0] == "fail", key
    patched = planned(NEWEST, "zero3-ga8", "patched")
    assert judge(patched, {**GOOD, "weights_sha256": "b"}, {**GOOD, "weights_sha256": "a"})[1] == (
        "trained, but weights differ from the plain run"
    )
    assert planned(OLD, "zero3-ga8", "plain").skip  # DeepSpeed < 0.19.8 ZeRO-3 on CPU: see matrix/runs.py


def test_absent_accumulation_reproducer_needs_upstream_to_step_on_every_micro_batch_and_ours_not_to():
    plain = planned(OLD, "repro:deepspeed-accumulation-absent", "plain")
    silent = {**GOOD, "engine_gradient_accumulation_steps": 1, "engine_optimizer_steps": 24}
    assert judge(plain, silent, None)[0] == "pass"
    assert judge(plain, GOOD, None)[0] == "fail"  # upstream agreeing would mean the reproducer reproduces nothing
    patched = planned(OLD, "repro:deepspeed-accumulation-absent", "patched")
    assert judge(patched, GOOD, None)[0] == "pass"
    assert judge(patched, silent, None)[0] == "fail"
    # accelerate >= 1.8 lets the trainer decide when DeepSpeed steps: nothing to reproduce there.
    assert not [run for run in planned_runs(NEWEST, "cpu") if run.kind == "repro:deepspeed-accumulation-absent"]


def test_contradiction_reproducer_passes_patched_only_when_refused_while_the_config_is_built():
    patched = planned(NEWEST, "repro:deepspeed-accumulation-contradiction", "patched")
    error = refusal(
        batch_agreement({ACCUMULATION: 4}, TrainerBatch(1, 8, 2)),
        TrainerBatch(1, 8, 2),
        UserConfig({ACCUMULATION: 4}, "deepspeed=<dict>"),
    )
    result = {"status": "error", "error": f"GRPOSettingsError: {error}", "phase": "config"}
    assert judge(patched, result, None)[0] == "pass"
    assert judge(patched, {**result, "phase": "model"}, None)[0] == "fail"
    plain = planned(NEWEST, "repro:deepspeed-accumulation-contradiction", "plain")
    late = "AssertionError: Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
    late += "gradient_acc_step * world_size 16 != 1 * 4 * 2"
    assert judge(plain, {"status": "error", "error": late, "phase": "model"}, None)[0] == "pass"
