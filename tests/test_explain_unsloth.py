"""`explain` on errors raised in unsloth's and unsloth_zoo's code, reasoned over their API histories: a module or
name their code imports and the run lacks (which releases of theirs stop importing it, which vllm releases have it),
and the trl release the run used against the range the unsloth release declares. Each log is built from upstream's
own messages and the facts the histories hold (checked here, so that a regenerated history that changes them fails
the test that relies on them, not silently its answer)."""

from __future__ import annotations

import pytest

from grpo_compat import histories
from grpo_compat.catalogue.log_matching import explain
from grpo_compat.catalogue.reasoning import Finding

ZOO = "/usr/local/lib/python3.11/dist-packages/unsloth_zoo"

ADAPTER_COMMONS = f"""Traceback (most recent call last):
  File "/content/train.py", line 1, in <module>
    from unsloth import FastLanguageModel
  File "/usr/local/lib/python3.11/dist-packages/unsloth/__init__.py", line 247, in <module>
    from .models import *
  File "{ZOO}/vllm_utils.py", line 60, in <module>
    from unsloth_zoo.vllm_lora_request import LoRARequest
  File "{ZOO}/vllm_lora_request.py", line 8, in <module>
    from vllm.adapter_commons.request import AdapterRequest
ModuleNotFoundError: No module named 'vllm.adapter_commons'
"""

ZOO_NAME = """Traceback (most recent call last):
  File "/content/train.py", line 1, in <module>
    from unsloth import FastLanguageModel
  File "/usr/local/lib/python3.11/dist-packages/unsloth/__init__.py", line 267, in <module>
    from unsloth_zoo.rl_environments import (
ImportError: cannot import name 'check_python_modules' from 'unsloth_zoo.rl_environments' \
(/usr/local/lib/python3.11/dist-packages/unsloth_zoo/rl_environments.py)
"""

IN_COMPILED_TRAINER = """Traceback (most recent call last):
  File "/content/train.py", line 60, in <module>
    trainer.train()
  File "/usr/local/lib/python3.11/dist-packages/transformers/trainer.py", line 2245, in train
    return inner_training_loop(
  File "/content/unsloth_compiled_cache/UnslothGRPOTrainer.py", line 1721, in _prepare_inputs
    prompt_inputs = super()._prepare_inputs(prompt_inputs)
RuntimeError: shape '[1, 4]' is invalid for input of size 8
"""


def answer_of(log: str, given: dict[str, str] | None = None) -> Finding:
    answer = explain(log, given, installed={}).answer()
    assert isinstance(answer, Finding), answer
    return answer


def test_the_facts_these_logs_rest_on_are_the_histories():
    vllm, zoo, unsloth = (histories.load(name) for name in ("vllm", "unsloth-zoo", "unsloth"))
    assert vllm.module_spans("vllm.adapter_commons") == [("0.7.0", "0.10.2")]
    guards = {
        release: {i.guard for i in zoo.imports("unsloth_zoo.vllm_lora_request", release) if "adapter" in i.module}
        for release in ("2025.9.9", "2025.9.10")
    }
    assert guards == {"2025.9.9": {None}, "2025.9.10": {"try-except ImportError"}}
    assert [str(r) for r in unsloth.declared("2025.9.8", "unsloth_zoo")] == ["unsloth_zoo>=2025.9.10"]
    assert [str(r) for r in unsloth.declared("2025.9.7", "unsloth_zoo")] == ["unsloth_zoo>=2025.9.9"]
    assert zoo.name_spans("unsloth_zoo.rl_environments", "check_python_modules") == [("2025.9.14", zoo.newest)]
    assert "<=0.15.2" in str(unsloth.declared("2025.3.19", "trl")[0].specifier)
    assert "2025.10.8" in unsloth.releases_accepting("trl", "0.16.1")
    assert "2025.10.9" not in unsloth.releases_accepting("trl", "0.16.1")


def test_a_vllm_module_unsloth_zoo_imports_names_the_zoo_release_that_stops_needing_it_and_the_vllm_that_has_it():
    finding = answer_of(ADAPTER_COMMONS)
    assert (finding.cls, finding.package, finding.importer, finding.certainty) == (
        "name-missing",
        "vllm",
        "unsloth-zoo",
        "asserted",
    )
    assert finding.fix == (
        "pip install 'vllm<=0.10.2', or pip install --upgrade 'unsloth-zoo>=2025.9.10' 'unsloth>=2025.9.8'"
    )
    assert "unsloth-zoo 2025.2.1-2025.9.9" in finding.cause and "try-except ImportError" in finding.cause
    assert finding.data == "API histories"


def test_a_stated_vllm_that_has_the_module_is_not_said_to_lack_it():
    # vllm 0.10.2 has vllm.adapter_commons: the run imported another vllm (never "vllm 0.10.2 has no ...")
    explanation = explain(ADAPTER_COMMONS, {"vllm": "0.10.2"}, installed={})
    assert all("0.10.2 has no" not in finding.cause for finding in explanation.reasoned)


def test_a_name_unsloth_imports_from_an_older_unsloth_zoo_is_an_unsloth_zoo_upgrade():
    finding = answer_of(ZOO_NAME)
    assert (finding.cls, finding.package, finding.importer, finding.fix, finding.certainty) == (
        "name-missing",
        "unsloth-zoo",
        "unsloth",
        "pip install 'unsloth-zoo>=2025.9.14'",
        "asserted",
    )


def test_a_trl_outside_the_range_the_unsloth_release_declares_is_asserted_with_the_range():
    log = "Unsloth 2025.3.19: Fast Qwen2 patching. Transformers: 4.51.3. vLLM: 0.8.4.\n- trl: 0.16.1\n"
    finding = answer_of(log + IN_COMPILED_TRAINER)
    assert (finding.cls, finding.name, finding.certainty) == ("version-skew", "trl", "asserted")
    assert "unsloth 2025.3.19 declares trl" in finding.cause and "<=0.15.2" in finding.cause
    assert "the run's trl is 0.16.1: outside it" in finding.cause
    assert finding.fix.startswith("pip install 'trl") and "'unsloth>=2025.5.8,<=2025.10.8' unsloth_zoo" in finding.fix


def test_a_trl_inside_the_declared_range_is_not_called_a_skew_of_declarations():
    log = "Unsloth 2025.3.19: Fast Qwen2 patching. Transformers: 4.51.3. vLLM: 0.8.4.\n- trl: 0.15.2\n"
    finding = answer_of(log + IN_COMPILED_TRAINER)
    assert (finding.cls, finding.name, finding.certainty) == ("version-skew", "unsloth", "offered")


def test_with_no_unsloth_release_in_the_log_the_releases_accepting_its_trl_are_offered():
    finding = answer_of("- trl: 0.16.1\n" + IN_COMPILED_TRAINER)
    assert (finding.cls, finding.name, finding.certainty) == ("version-skew", "trl", "offered")
    assert "2025.5.8-2025.10.8" in finding.cause
    assert finding.fix == "pip install 'unsloth>=2025.5.8,<=2025.10.8' unsloth_zoo"


ARITY_FROM_COMPILED_TRAINER = """Traceback (most recent call last):
  File "/content/train.py", line 60, in <module>
    trainer.train()
  File "/content/unsloth_compiled_cache/UnslothGRPOTrainer.py", line 1460, in compute_loss
    per_token_logps = super()._get_per_token_logps(model, input_ids, attention_mask, logits_to_keep, batch_size)
TypeError: GRPOTrainer._get_per_token_logps() takes 5 positional arguments but 6 were given
"""


def test_the_trl_signature_spans_an_arity_error_rests_on():
    trl = histories.load("trl")
    qualname = "trl.trainer.grpo_trainer.GRPOTrainer._get_per_token_logps"
    takes_batch_size = [(first, last) for first, last, s in trl.signature_spans(qualname) if s.accepts(6, ()) is None]
    assert takes_batch_size == [("0.17.0", "0.19.1")]


def test_a_call_from_unsloths_compiled_trainer_gets_the_bounded_trl_range_that_takes_it():
    # trl 0.20.0 on has no _get_per_token_logps at all: never an unbounded 'trl>=0.17.0'
    finding = answer_of("- trl: 0.16.1\n" + ARITY_FROM_COMPILED_TRAINER)
    assert (finding.cls, finding.importer, finding.fix, finding.certainty) == (
        "signature-mismatch",
        "unsloth",
        "pip install 'trl>=0.17.0,<=0.19.1'",
        "asserted",
    )


def test_a_call_no_trl_the_unsloth_release_declares_can_take_is_offered_as_an_unsloth_mismatch():
    # unsloth 2025.3.19 declares trl<=0.15.2; only trl 0.17.0-0.19.1 takes the call: no trl fixes it
    explanation = explain("- trl: 0.16.1\n- unsloth: 2025.3.19\n" + ARITY_FROM_COMPILED_TRAINER, installed={})
    mismatch = next(f for f in explanation.reasoned if f.cls == "version-skew" and f.name == "unsloth")
    assert mismatch.certainty == "offered" and "declares trl" in mismatch.cause
    assert all("pip install 'trl>=0.17.0" not in f.fix for f in explanation.reasoned)


KEYWORD_FROM_COMPILED_TRAINER = """Traceback (most recent call last):
  File "/content/train.py", line 60, in <module>
    trainer.train()
  File "/content/unsloth_compiled_cache/UnslothGRPOTrainer.py", line 1460, in _generate_and_score_completions
    logps, _ = self._get_per_token_logps_and_entropies(model, ids, mask, keep, batch_size, num_images=num_images)
TypeError: GRPOTrainer._get_per_token_logps_and_entropies() got an unexpected keyword argument 'num_images'
"""


def test_the_trl_keyword_spans_and_unsloth_ranges_a_keyword_error_rests_on():
    trl, unsloth = histories.load("trl"), histories.load("unsloth")
    qualname = "trl.trainer.grpo_trainer.GRPOTrainer._get_per_token_logps_and_entropies"
    spans = trl.signature_spans(qualname)
    assert spans[0][:2] == ("0.20.0", "0.23.1") and spans[0][2].accepts(6, ["num_images"]) is not None
    assert all(s.accepts(6, ["num_images"]) is None for _, _, s in spans[1:]) and spans[1][0] == "0.24.0"
    assert str(unsloth.declared("2026.1.4", "trl")[0].specifier) == "!=0.19.0,<=0.24.0,>=0.18.2"
    assert "<=0.23.0" in str(unsloth.declared("2025.10.1", "trl")[0].specifier)


@pytest.mark.parametrize(
    ("unsloth", "cls", "certainty", "fix"),
    [
        (None, "signature-mismatch", "asserted", "pip install 'trl>=0.24.0'"),
        # unsloth 2026.1.4 declares trl<=0.24.0: of the trl releases taking the keyword, only 0.24.0
        ("2026.1.4", "signature-mismatch", "asserted", "pip install 'trl==0.24.0'"),
        # unsloth 2025.10.1 declares trl<=0.23.0: no trl it declares takes the call its compiled trainer makes
        ("2025.10.1", "version-skew", "offered", "delete unsloth_compiled_cache/ and rerun"),
    ],
)
def test_a_keyword_from_unsloths_compiled_trainer_is_answered_within_the_trl_range_unsloth_declares(
    unsloth, cls, certainty, fix
):
    stated = "- trl: 0.23.0\n" + (f"- unsloth: {unsloth}\n" if unsloth else "")
    finding = answer_of(stated + KEYWORD_FROM_COMPILED_TRAINER)
    assert (finding.cls, finding.certainty, finding.importer) == (cls, certainty, "unsloth")
    assert finding.fix.startswith(fix)


def test_a_name_no_release_of_the_module_ever_had_is_the_importers_code_being_older_offered():
    trl = histories.load("trl")
    assert trl.module_spans("trl.trainer.alignprop_trainer") == [("0.14.0", "0.23.1")] == [(trl.releases[0], "0.23.1")]
    assert trl.name_spans("trl.trainer.alignprop_trainer", "BaseTrainer") == []
    log = """- trl: 0.15.2
Traceback (most recent call last):
  File "/content/unsloth_compiled_cache/UnslothAlignPropTrainer.py", line 5, in <module>
    from trl.trainer.alignprop_trainer import (Accelerator, AlignPropConfig, AlignPropTrainer, Any, BaseTrainer)
ImportError: cannot import name 'BaseTrainer' from 'trl.trainer.alignprop_trainer'
"""
    finding = answer_of(log)
    assert (finding.cls, finding.package, finding.importer, finding.remedy, finding.certainty) == (
        "name-missing",
        "trl",
        "unsloth",
        "upgrade-importer",
        "offered",
    )
    assert "written for a trl older than 0.14.0" in finding.cause and finding.fix.startswith("upgrade unsloth")
