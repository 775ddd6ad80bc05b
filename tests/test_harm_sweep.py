"""The do-no-harm sweep (matrix/harm_sweep.py): what it covers, and how a patched run is judged against plain."""

from __future__ import annotations

import itertools
import json

import pytest

from matrix import harm_sweep
from matrix.harm_sweep import ACCUMULATION, MICRO, TOTAL, VARIANTS, judge_patched
from matrix.runs import planned_runs
from tests.helpers import free_port

TRAINS = {"status": "ok", "all_trainable_params_changed": True, "weights_sha256": "a", "phase": "train"}
FAILS_AT_LOAD = {"status": "error", "error": "AssertionError: Check batch related parameters", "phase": "model"}
REFUSED = {"status": "error", "error": "GRPOSettingsError: The DeepSpeed config ...", "phase": "config"}


def test_the_sweep_covers_every_key_state_form_launcher_and_process_count():
    for attribute in ("micro", "accumulation", "total"):
        assert {getattr(v, attribute) for v in VARIANTS} == {"absent", "auto", "match", "contradict"}, attribute
    assert {v.given for v in VARIANTS} == {
        "path",
        "dict",
        "accelerate-flag",
        "accelerate-flag+path",
        "accelerate-config",
    }
    launches = {(v.launcher, v.processes) for v in VARIANTS}
    assert launches == set(itertools.product(("accelerate", "torchrun", "deepspeed"), (1, 2)))
    assert {(v.stage, v.blocks) for v in VARIANTS} == set(itertools.product((2, 3), (False, True)))
    assert len({v.id for v in VARIANTS}) == len(VARIANTS)


def test_the_issue_12_configuration_runs_in_ci():
    # train_batch_size absent, ZeRO-3, accelerate's flag and GRPOConfig(deepspeed=path): patched broke it once.
    quick = [v for v in VARIANTS if v.quick]
    assert any(v.stage == 3 and v.total == "absent" and v.given == "accelerate-flag+path" for v in quick)
    newest = planned_runs({"trl": "1.16.0", "deepspeed": "0.19.8"}, "cpu", quick=True)
    assert {run.kind for run in newest if run.variant} == {f"harm:{v.id}" for v in quick}


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.id)
def test_a_variants_json_holds_each_key_as_the_user_wrote_it(variant):
    config = variant.config()
    per_step = variant.processes * 2 * 4  # the trainer's batch 2 x accumulation 4, per process
    for key, state, trainer in (
        (MICRO, variant.micro, 2),
        (ACCUMULATION, variant.accumulation, 4),
        (TOTAL, variant.total, per_step),
    ):
        if state == "absent":
            assert key not in config
        elif state == "auto":
            assert config[key] == "auto"
        elif state == "match":
            assert config[key] == trainer
        else:
            assert isinstance(config[key], int) and config[key] != trainer
    assert config["zero_optimization"] == {"stage": variant.stage}
    assert ("optimizer" in config) is variant.blocks


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.id)
def test_a_variant_is_launched_its_way_with_its_json(variant, tmp_path):
    python = tmp_path / "bin" / "python"
    port = free_port()
    argv = harm_sweep.launch(variant, python, ["smoke_grpo.py", "--mode", "plain"], tmp_path, port)
    given_port = (
        (tmp_path / f"{variant.id}.accelerate.yaml").read_text() if variant.given == "accelerate-config" else ""
    )
    assert str(port) in argv or f"main_process_port: {port}" in given_port  # the rendezvous is at the port given
    launcher = {"accelerate": "accelerate", "torchrun": "torchrun", "deepspeed": "deepspeed"}[variant.launcher]
    assert argv[0] == str(tmp_path / "bin" / launcher)
    assert str(python) not in argv  # each launcher starts the script with the cell's interpreter itself
    written = json.loads((tmp_path / f"{variant.id}.json").read_text())
    assert written == variant.config()
    given_to_trainer = [a.removeprefix("deepspeed=") for a in argv if a.startswith("deepspeed=")]
    if variant.given in ("path", "accelerate-flag+path"):
        assert given_to_trainer == [str(tmp_path / f"{variant.id}.json")]
    elif variant.given == "dict":
        assert [json.loads(a) for a in given_to_trainer] == [variant.config()]
    else:
        assert given_to_trainer == []
    if variant.given.startswith("accelerate-flag"):
        assert argv[argv.index("--deepspeed_config_file") + 1] == str(tmp_path / f"{variant.id}.json")
    if variant.given == "accelerate-config":
        yaml = (tmp_path / f"{variant.id}.accelerate.yaml").read_text()
        assert "distributed_type: DEEPSPEED" in yaml and f"num_processes: {variant.processes}" in yaml


def test_patched_must_train_to_the_same_weights_where_plain_trains():
    assert judge_patched(TRAINS, TRAINS, [], []) == ("pass", "both train, identical weights")
    status, outcome = judge_patched({**TRAINS, "weights_sha256": "b"}, TRAINS, [], [])
    assert status == "fail" and outcome.startswith("HARM")
    for broken in (FAILS_AT_LOAD, REFUSED):
        status, outcome = judge_patched(broken, TRAINS, [], [])
        assert status == "fail" and outcome.startswith("HARM: plain trains, patched fails")


def test_patched_may_fail_where_plain_fails_but_no_later():
    assert judge_patched(REFUSED, FAILS_AT_LOAD, [], [])[0] == "pass"
    assert judge_patched(FAILS_AT_LOAD, FAILS_AT_LOAD, [], [])[0] == "pass"
    late = {"status": "error", "error": "RuntimeError: in train()", "phase": "train"}
    assert judge_patched(late, FAILS_AT_LOAD, [], [])[0] == "fail"
    assert judge_patched(TRAINS, FAILS_AT_LOAD, [], [])[1].startswith("corrects upstream")


def test_where_plain_trains_wrongly_patched_must_correct_it_refuse_it_or_leave_it_as_it_was():
    wrong = ["DeepSpeed took 12 optimizer steps for 3 trainer steps"]
    assert judge_patched({**TRAINS, "weights_sha256": "b"}, TRAINS, [], wrong)[1].startswith("corrects upstream")
    assert judge_patched(REFUSED, TRAINS, [], wrong)[0] == "pass"
    # Untouched (the same weights), with the watchdog naming the cause: no harm done.
    named = ["the watchdog warned on a run expected to learn: GRPO is not learning ... the learning rate is 0"]
    status, outcome = judge_patched(TRAINS, TRAINS, [*wrong, *named], wrong)
    assert status == "pass" and outcome.startswith("as upstream") and "learning rate is 0" in outcome
    # Other weights, still wrong: grpo_compat changed the run without correcting it.
    assert judge_patched({**TRAINS, "weights_sha256": "b"}, TRAINS, wrong, wrong)[0] == "fail"
    assert judge_patched(TRAINS, None, [], [])[0] == "fail"


def test_a_watchdog_warning_on_a_run_upstream_trains_correctly_is_a_failure():
    named = ["the watchdog warned on a run expected to learn: GRPO is not learning"]
    status, outcome = judge_patched(TRAINS, TRAINS, named, [])
    assert status == "fail" and outcome.startswith("HARM: plain trains, patched trains wrongly")


def test_a_plain_run_on_the_versions_of_a_silent_catalogue_failure_is_known_to_train_wrongly():
    from matrix.harm_sweep import silent_upstream_failures

    deepspeed_accumulating = {
        **TRAINS,
        "engine_gradient_accumulation_steps": 4,
        "trainer_gradient_accumulation_steps": 4,
    }
    on_4_48 = {**deepspeed_accumulating, "versions": {"transformers": "4.48.3", "deepspeed": "0.16.4"}}
    (finding,) = silent_upstream_failures(on_4_48)
    assert "deepspeed-loss-divided-twice" in finding
    # so the patched run's other weights (the loss divided once) correct upstream rather than harm it
    assert judge_patched({**on_4_48, "weights_sha256": "b"}, on_4_48, [], [finding])[1].startswith("corrects upstream")
    assert silent_upstream_failures({**on_4_48, "versions": {"transformers": "4.49.0", "deepspeed": "0.16.4"}}) == []
    assert silent_upstream_failures({**on_4_48, "trainer_gradient_accumulation_steps": 1}) == []
    assert silent_upstream_failures({**TRAINS, "versions": on_4_48["versions"]}) == []  # no DeepSpeed engine
