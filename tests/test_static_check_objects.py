"""The static check's reads on objects other than self (grpo_compat.static_check.objects): an attribute the trainer
reads on an annotated parameter, which a release of the parameter's class had and the installed release no longer
sets. A trainer written into tmp_path in the shape trl 0.14-0.26 have (``model.warnings_issued[...] = True`` in
``GRPOTrainer.__init__``), read against the transformers and torch this env installs and transformers' API history;
the real trl 0.24 with transformers 5.1 and 5.0 are in test_static_check.py (slow)."""

from __future__ import annotations

import sysconfig
import textwrap

import pytest

import grpo_compat.static_check as static_check
from grpo_compat.core.versions import installed_version
from grpo_compat.histories import load
from grpo_compat.static_check.hypothetical import installed_set, what_if_findings

SITE = sysconfig.get_paths()["purelib"]  # this env's transformers and torch, as installed

TRAINER = """
    from typing import Optional, Union

    from transformers import AutoModelForCausalLM, PreTrainedModel, Trainer


    class GRPOTrainer(Trainer):
        def __init__(self, {parameter}, args=None, peft_config=None):
            if isinstance(model, str):
                model = AutoModelForCausalLM.from_pretrained(model)
            if peft_config is not None:
                model = wrap(model, peft_config)
            {rebind}
            {read}
            super().__init__(model=model, args=args)


    def wrap(model, config):
        return model
"""
READ = 'model.warnings_issued["estimate_tokens"] = True'


def _tree(tmp_path, read=READ, parameter="model: Union[str, PreTrainedModel]", rebind="", extra="") -> list[str]:
    """The trainer's tree ahead of this env's site folder."""
    trainer = textwrap.dedent(TRAINER).replace("{read}", read).replace("{parameter}", parameter)
    files = {
        "trl/__init__.py": "",
        "trl/trainer/__init__.py": "",
        "trl/trainer/grpo_trainer.py": trainer.replace("{rebind}", rebind) + textwrap.dedent(extra),
    }
    info = tmp_path / "trl-0.24.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Name: trl\nVersion: 0.24.0\n")
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    return [str(tmp_path), SITE]


def _findings(tmp_path, *args) -> list:
    return [f for f in static_check.find(static_check.Install(_tree(tmp_path, *args))) if f.kind == "attribute"]


def _removed_in() -> str:
    """The first transformers release whose PreTrainedModel no longer sets warnings_issued, from its history."""
    history = load("transformers")
    had = history._data.get("attributes", {}).get("transformers.modeling_utils.PreTrainedModel", {})
    spans = had.get("warnings_issued")
    if not spans:
        pytest.skip("this transformers history does not record self-assignments")
    return history.releases[max(last for _, last in spans) + 1]


def test_a_read_on_a_model_whose_class_no_longer_sets_it_is_found_with_the_release_that_removed_it(tmp_path):
    removed = _removed_in()
    found = _findings(tmp_path)
    assert len(found) == 1, [f.line() for f in found]
    finding = found[0]
    assert finding.where == "trl/trainer/grpo_trainer.py:14"
    assert f"transformers {installed_version('transformers')}" == finding.other
    assert f"removed in {removed}" in finding.message
    assert finding.message.endswith("'PreTrainedModel' object has no attribute 'warnings_issued'")
    assert finding.fix == f"pip install 'transformers<{removed}'"


@pytest.mark.parametrize(
    ("case", "read", "parameter", "rebind", "extra"),
    [
        ("an attribute the class sets", "model.config.use_cache = False", None, "", ""),
        ("an attribute no release had", 'model.never_had_this["x"] = True', None, "", ""),
        ("a hasattr test", 'if hasattr(model, "warnings_issued"): ' + READ, None, "", ""),
        ("a getattr default", 'getattr(model, "warnings_issued", {})["estimate_tokens"] = True', None, "", ""),
        ("a rebinding every model takes", READ, None, "model = wrap(model, None)", ""),
        ("a rebinding a model takes", READ, None, "if not isinstance(model, str): model = wrap(model, None)", ""),
        ("a rebinding in a test", READ, None, "if (model := wrap(model, None)) is None: pass", ""),
        ("an annotation that does not resolve", READ, "model: Union[str, SomeModel]", "", ""),
        ("no annotation", READ, "model", "", ""),
        ("the trainer's package sets it", READ, None, "", "def prepare(model):\n    model.warnings_issued = {}\n"),
    ],
)
def test_a_read_the_check_cannot_prove_fails_is_left_alone(tmp_path, case, read, parameter, rebind, extra):
    _removed_in()
    found = _findings(tmp_path, read, parameter or "model: Union[str, PreTrainedModel]", rebind, extra)
    assert found == [], (case, [f.line() for f in found])


@pytest.mark.parametrize("transformers", ["removed", "5.0.0"])
def test_the_what_if_reads_the_installed_trainer_against_the_release_the_set_picks(tmp_path, transformers):
    """``check --with transformers==...`` with this trainer installed: the release that removed it is flagged from
    its history (and so is this env's, newer), the last release that set it is not."""
    removed = _removed_in()
    paths = _tree(tmp_path)
    installed = installed_set(paths)
    release = removed if transformers == "removed" else transformers
    found = what_if_findings({**installed, "transformers": release}, installed, paths)
    if transformers == "5.0.0":
        assert found == []
        return
    assert [(f["where"], f["fix"], f["installed_too"]) for f in found] == [
        ("trl/trainer/grpo_trainer.py:14", f"pip install 'transformers<{removed}'", True)
    ]
    assert f"in transformers {removed} sets it" in found[0]["message"]


# -- the what-if of another trl release: the reads trl's API history recorded by this same reading ---------------------


def _this_env() -> tuple[dict[str, str], dict[str, str]]:
    installed = installed_set()
    if "trl" not in installed or "transformers" not in installed:
        pytest.skip("this env lacks trl or transformers")
    return installed, dict(installed)


def test_the_what_if_of_trl_0_24_finds_the_read_its_history_recorded_against_this_env_transformers():
    """``check --with trl==0.24.0`` in an env whose transformers no longer sets warnings_issued: trl 0.24.0's
    GRPOTrainer.__init__ (its history) writes model.warnings_issued[...] on line 406."""
    removed = _removed_in()
    installed, versions = _this_env()
    if load("transformers").releases.index(installed["transformers"]) < load("transformers").releases.index(removed):
        pytest.skip("this env's transformers still sets warnings_issued")
    found = what_if_findings({**versions, "trl": "0.24.0"}, installed)
    assert [(f["where"], f["fix"]) for f in found] == [
        ("trl/trainer/grpo_trainer.py:406", f"pip install 'transformers<{removed}'")
    ]
    assert found[0]["message"].startswith("trl 0.24.0's GRPOTrainer.__init__ reads model.warnings_issued")
    assert f"in transformers {installed['transformers']} sets it" in found[0]["message"]


@pytest.mark.parametrize(
    ("trl", "silent_with", "found_with"),
    [
        ("0.24.0", "5.0.0", "5.1.0"),  # transformers 5.0.0 still sets it: that set trains
        ("0.27.2", "5.2.0", None),  # trl 0.27 no longer reads it (0.26.2 does, and is found with 5.2.0)
    ],
)
def test_the_what_if_of_another_trl_is_silent_where_the_set_sets_it_or_trl_no_longer_reads_it(
    trl, silent_with, found_with
):
    _removed_in()
    installed, versions = _this_env()
    assert what_if_findings({**versions, "trl": trl, "transformers": silent_with}, installed) == []
    reading_trl = trl if found_with else "0.26.2"
    found = what_if_findings({**versions, "trl": reading_trl, "transformers": found_with or silent_with}, installed)
    assert [f["where"].split(":")[0] for f in found] == ["trl/trainer/grpo_trainer.py"], (reading_trl, found)


def test_trl_history_records_the_read_from_0_14_to_0_26_and_not_after():
    history = load("trl")
    reading = {r: [(a.parameter, a.attribute) for a in history.argument_reads(r)] for r in history.releases}
    read = [r for r, reads in reading.items() if ("model", "warnings_issued") in reads]
    assert read and read[0] == "0.14.0" and read[-1].startswith("0.26."), read
    assert ("model", "warnings_issued") not in reading["0.27.2"]


def _release_reads(tmp_path, **shape) -> dict:
    from grpo_compat.histories import reader
    from grpo_compat.settings import extract

    folder = tmp_path / "release"
    folder.mkdir()
    _tree(folder, **shape)
    facts, _ = reader.read_release(extract.Source(folder, "trl"), None, True)
    return {key: value for key, value in facts.items() if key[0] == "o"}


def test_the_histories_reader_records_the_read_as_the_installed_check_judges_it(tmp_path):
    key = ("o", "trl.trainer.grpo_trainer.GRPOTrainer", "model.warnings_issued")
    assert _release_reads(tmp_path) == {key: [14, [["transformers", "PreTrainedModel"]]]}


@pytest.mark.parametrize(
    ("case", "shape"),
    [
        ("a hasattr test", {"read": 'if hasattr(model, "warnings_issued"): ' + READ}),
        ("a rebinding every model takes", {"rebind": "model = wrap(model, None)"}),
        ("a rebinding a model takes", {"rebind": "if isinstance(model, PreTrainedModel): model = wrap(model, None)"}),
        ("no annotation", {"parameter": "model"}),
        ("the release stores it", {"extra": "def prepare(model):\n    model.warnings_issued = {}\n"}),
    ],
)
def test_the_histories_reader_leaves_out_a_read_the_check_would_not_judge(tmp_path, case, shape):
    assert _release_reads(tmp_path, **shape) == {}, case
