"""`grpo-compat doctor --prove` (grpo_compat.tools.prove): the run's verdict on real installed sets, and how a
failing run's fixes are chosen."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_compat.tools.prove import newest_release_as_of, proposed_changes, raiser_as_of, requirement_options

ROOT = Path(__file__).resolve().parents[1]


def _doctor(python: str, *arguments: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([python, "-m", "grpo_compat", "doctor", *arguments], capture_output=True, text=True,
                          timeout=1800, env=environment)  # fmt: skip


def test_a_fix_in_words_proposes_nothing_to_run_and_pins_then_a_newer_trainer_are_tried_before_installs():
    assert requirement_options("pip install 'vllm<0.12.0' or 'trl>=0.27.0'") == [["vllm<0.12.0"], ["trl>=0.27.0"]]
    assert requirement_options("install a transformers release that has X, or a trl release that ...") == []
    # the catalogue's wording: each option its own pip install, a remark in parentheses (no package "install")
    catalogue = 'pip install "trl>=0.29" (ms-swift 4.x takes it), or pip install "transformers<5.3"'
    assert requirement_options(catalogue) == [["trl>=0.29"], ["transformers<5.3"]]
    assert requirement_options('pip install "trl>=0.16", or call model.enable_input_require_grads()') == [["trl>=0.16"]]
    assert requirement_options('pip install "trl>=1.0" (or trl 0.27.2); grpo_compat renders the prompts') == [
        ["trl>=1.0"]
    ]
    assert requirement_options('pip install "deepspeed>=0.19.3" (DeepSpeed#8148), or use_reentrant=True') == [
        ["deepspeed>=0.19.3"]
    ]  # fmt: skip
    findings = [
        {"kind": "missing-module", "message": "No module named 'vllm'", "fix": "pip install vllm"},
        {"kind": "missing-name", "message": "...", "fix": "pip install 'transformers<5.3.0' or 'trl>=0.27.0'"},
    ]
    assert proposed_changes([], findings, "trl>0.21.0") == [
        ["transformers<5.3.0"], ["trl>=0.27.0"], ["trl>0.21.0"], ["vllm"]
    ]  # fmt: skip
    # the package that raised, as of the trainer's release: one package moved, before a newer trainer
    assert proposed_changes([], [], "ms-swift>3.2.2", "pyarrow==19.0.1") == [["pyarrow==19.0.1"], ["ms-swift>3.2.2"]]


def test_the_package_that_raised_is_taken_at_its_newest_release_from_before_the_trainer_release():
    # pyarrow's releases and first uploads as PyPI lists them; ms-swift 3.2.2 was uploaded on 2025-03-03
    dates = {"18.1.0": "2024-11-26T10:00:00Z", "19.0.0": "2025-01-16T10:00:00Z", "19.0.1": "2025-02-17T10:00:00Z",
             "20.0.0": "2025-04-27T10:00:00Z", "26.0.1": "2026-09-30T10:00:00Z"}  # fmt: skip
    assert newest_release_as_of(dates, "2025-03-03T08:00:00Z", below="26.0.1") == "19.0.1"
    assert newest_release_as_of(dates, "2025-03-03T08:00:00Z", below="19.0.0") == "18.1.0"  # older than installed
    assert newest_release_as_of(dates, "2024-01-01T00:00:00Z", below="26.0.1") is None
    # nothing to move: the trainer's own error, a missing module (its own finding), an error with no place
    assert raiser_as_of({"error": {"type": "TypeError", "message": "", "where": "trl.trainer.utils:10"}}, "trl") is None
    assert raiser_as_of({"error": {"type": "ModuleNotFoundError", "message": "", "where": "yaml:1"}}, "trl") is None
    assert raiser_as_of({"error": {"type": "ValueError", "message": "", "where": ""}}, "trl") is None


def test_plain_doctor_says_its_answer_is_a_reading():
    done = _doctor(sys.executable)
    assert "All of this is read from the installed code, not run; `grpo-compat doctor --prove` runs it." in done.stdout


@pytest.mark.slow
def test_doctor_prove_exits_0_where_the_set_trains():
    done = _doctor(sys.executable, "--prove")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Run: trains" in done.stdout


@pytest.mark.slow
@pytest.mark.cells("swift-4.6")
def test_doctor_prove_trains_one_step_of_ms_swifts_grpo_trainer_through_its_own_pipeline():
    from tests.helpers import cell_python

    done = _doctor(cell_python("swift-4.6"), "--prove", "--json", "--prove-fixes", "0")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    probe = json.loads(done.stdout)["probe"]
    assert (probe["stack"], probe["trainer"]) == ("ms-swift", "swift.rlhf_trainers.grpo_trainer.GRPOTrainer")
    assert (probe["trains"], probe["phase"], probe["steps"], probe["missing"]) == (True, "trained", 1, [])


@pytest.mark.slow
def test_doctor_prove_exits_non_zero_naming_every_missing_module_and_proves_the_readings_fix_beside_the_run():
    from grpo_compat.tools.prove import build_env

    # trl 0.24's GRPO trainer on transformers 5.23: several modules it imports unguarded are not installed
    python, resolved = build_env(["trl==0.24.0", "transformers==5.23.0", "torch==2.13.0+cpu", "datasets", "PyYAML"])
    assert resolved["trl"] == "0.24.0"
    done = _doctor(str(python), "--prove", "--json", "--prove-fixes", "1")
    assert done.returncode == 1, done.stderr[-2000:]
    proof = json.loads(done.stdout)
    # the reading's first fix (a newer trl), built and run while the installed set's probe ran, trains
    [fix] = proof["fixes_tried"]
    assert (fix["trains"], fix["beside_the_run"], fix["probe"]["phase"]) == (True, True, "trained"), fix
    assert fix["command"].startswith("pip install 'trl==") and "trl" in fix["moved"]
    missing = [item["name"] for item in proof["probe"]["missing"] if item["kind"] == "missing-module"]
    assert len(missing) >= 2, proof["probe"]  # all of them, not the first only
    assert len(set(missing)) == len(missing)
    absent = subprocess.run(
        [str(python), "-c", f"import importlib.util; print([importlib.util.find_spec(m) for m in {missing!r}])"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert absent.stdout.strip() == repr([None] * len(missing))  # each one named is truly not installed
    text = _doctor(str(python), "--prove", "--prove-fixes", "0")
    assert text.returncode == 1
    assert all(f"No module named '{name}'" in text.stdout for name in missing), text.stdout


def test_a_failure_of_the_run_is_joined_with_the_reading_that_names_the_same_module_name_or_method():
    from grpo_compat.tools.prove import failures

    findings = [
        {"kind": "missing-module", "message": "trl 0.24.0 imports weave ...: No module named 'weave'", "fix": ""},
        {
            "kind": "override",
            "message": "transformers 4.52.4 calls GRPOTrainer._get_train_sampler with 1 ...",
            "fix": "",
        },
    ]
    probe = {
        "missing": [
            {"kind": "missing-module", "name": "weave", "where": "trl.trainer.callbacks:40"},
            {"kind": "missing-module", "name": "mergekit", "where": "trl.mergekit_utils:20"},
        ],
        "error": {
            "type": "TypeError",
            "message": "GRPOTrainer._get_train_sampler() takes 1 positional argument but 2 were given",
            "where": "transformers.trainer:1031",
        },
        "phase": "step",
    }
    joined = [item["finding"] for item in failures(probe, findings)]
    assert joined == [findings[0], None, findings[1]]  # mergekit: the reading has nothing on it, and says so


def test_a_change_that_gets_further_is_tried_again_with_the_readings_fix_of_what_it_still_meets():
    from grpo_compat.tools.prove import _with_remaining_fixes

    findings = [{"kind": "missing-module", "message": "No module named 'msgspec'", "fix": "pip install msgspec"}]
    still = {"missing": [{"kind": "missing-module", "name": "msgspec", "where": "swift.trainers.utils:16"}]}
    assert _with_remaining_fixes(["trl>=0.17.0"], still, findings) == ["trl>=0.17.0", "msgspec"]
    assert _with_remaining_fixes(["trl>=0.17.0"], {"missing": [], "error": None}, findings) == []


def test_the_next_try_keeps_what_the_change_that_got_furthest_fixed_where_it_names_other_packages():
    from grpo_compat.tools.prove import on_top_of, progress_of

    # ms-swift 3.10.3 with trl 0.15.2: the import fails; trl>=0.17.0,<0.25 and msgspec get it to the step
    assert progress_of({"phase": "step"}) > progress_of({"phase": "import"}) > progress_of({})
    passed_the_import = ["trl>=0.17.0,<0.25", "msgspec"]
    assert on_top_of(["peft<0.18"], passed_the_import, "ms-swift") == ["peft<0.18", "trl>=0.17.0,<0.25", "msgspec"]
    assert on_top_of(["trl==0.24.0"], passed_the_import, "ms-swift") == ["trl==0.24.0", "msgspec"]  # its trl wins
    # a newer ms-swift: trl's upper bound came from ms-swift 3.10's declaration (ms-swift 4.5.3 wants trl>=0.26)
    newer = on_top_of(["ms-swift>3.10.3"], passed_the_import, "ms-swift")
    assert newer == ["ms-swift>3.10.3", "trl>=0.17.0", "msgspec"]
    assert on_top_of(["ms-swift>3.10.3"], [], "ms-swift") == ["ms-swift>3.10.3"]


def test_the_env_cache_key_is_the_resolved_pins_alone_not_the_scratch_folder_uv_names():
    from grpo_compat.tools.prove import pins_only

    def compiled(scratch: str) -> str:
        return f"trl==0.14.0\n    # via -r /tmp/{scratch}/requirements.in\ntorch==2.13.0+cpu\n    # via\n    #   trl\n"

    assert pins_only(compiled("resolve-a")) == pins_only(compiled("resolve-b")) == "trl==0.14.0\ntorch==2.13.0+cpu\n"


def test_a_known_failure_that_stops_the_import_joins_the_runs_error_and_its_fix_is_tried_first():
    from grpo_compat.tools.prove import failures, known_import_failures

    # ms-swift 3.2.2 resolved by uv: numpy 1.26.4 (ms-swift declares numpy<2) beside pyarrow 26.0.1
    known = known_import_failures({"pyarrow": "26.0.1", "numpy": "1.26.4", "ms-swift": "3.2.2"})
    assert [finding["where"] for finding in known] == ["pyarrow-26-numpy-1"]
    assert known_import_failures({"pyarrow": "25.0.1", "numpy": "1.26.4", "ms-swift": "3.2.2"}) == []
    probe = {"missing": [], "phase": "import", "error": {"type": "ImportError", "where": "pyarrow.lib:42",
             "message": "pyarrow requires NumPy 2.0 or newer, found 1.26.4"}}  # fmt: skip
    failed = failures(probe, known)
    assert failed[0]["finding"] == known[0]
    assert proposed_changes(failed, known, "ms-swift>3.2.2", "pyarrow==19.0.1")[0] == ["pyarrow<26"]


def test_the_speculated_tries_are_taken_by_the_search_in_its_order_and_the_rest_is_ended(monkeypatch):
    import threading

    import grpo_compat.tools.prove as prove

    started, released = [], threading.Event()

    def trying(python, stack, change, settings, progress=None, complete=False, stop=None):
        started.append(change)
        if change == ["c"]:  # a long try, under way when the search asks for another change
            while not stop.is_set():
                released.wait(0.01)
            raise prove.Stopped
        built = change != ["a"]  # "a": uv cannot build it, so the next is tried too
        return {"change": change, "trains": change == ["b"], **({"probe": {}} if built else {"error": "uv"})}

    monkeypatch.setattr(prove, "prove_change", trying)
    speculation = prove.Speculation([["a"], ["b"], ["x"]], "trl", {}, None)
    assert speculation.outcome(["a"])["error"] == "uv"
    assert speculation.outcome(["b"]) == {"change": ["b"], "trains": True, "probe": {}, "beside_the_run": True}
    assert speculation.outcome(["x"]) is None  # not tried: "b" built and ran, the rest waits for the run's order
    assert started == [["a"], ["b"]] and not speculation.thread.is_alive()

    speculation = prove.Speculation([["c"]], "trl", {}, None)
    while not started[2:]:
        released.wait(0.01)
    assert speculation.outcome(["d"]) is None  # another change is needed: the try under way is ended
    assert not speculation.thread.is_alive() and speculation.outcomes == {}


@pytest.mark.slow
def test_what_the_reading_says_a_resolved_set_lacks_is_added_before_building():
    from grpo_compat.tools.prove import _pinned, lacking_in, resolved_pins

    # ms-swift 4.5.3 imports msgspec when its GRPO trainer loads and does not declare it: uv's resolution lacks it
    swift = _pinned(resolved_pins(["ms-swift==4.5.3", "torch==2.13.0+cpu"]))
    assert "msgspec" not in swift
    assert lacking_in(swift) == ["msgspec"]
    assert lacking_in(_pinned(resolved_pins(["ms-swift==4.6.0", "msgspec", "torch==2.13.0+cpu"]))) == []
    assert lacking_in(_pinned(resolved_pins(["trl==1.16.0", "torch==2.13.0+cpu"]))) == []


def test_a_proven_fix_names_what_the_reading_added_and_a_failed_try_what_it_still_met():
    from grpo_compat.tools.prove import format_proof

    missing = [{"kind": "missing-module", "name": "msgspec", "where": "swift.rlhf_trainers.utils:16"}]
    probe = {"trains": False, "phase": "import", "wall_s": 37.1, "missing": missing}
    refused = {"change": ["ms-swift>4.6.0"], "command": "pip install 'ms-swift>4.6.0'", "trains": False,
               "error": "uv cannot build it: only ms-swift<=4.6.0 is available", "seconds": 6.7}  # fmt: skip
    proven = {"change": ["ms-swift==4.5.3"], "command": "pip install 'ms-swift==4.5.3' 'msgspec==0.23.0'",
              "trains": True, "moved": {"ms-swift": "4.1.3 -> 4.5.3", "msgspec": "none -> 0.23.0"},
              "lacking": ["msgspec"], "seconds": 51.7, "probe": {"trains": True}}  # fmt: skip
    proof = {"stack": "ms-swift", "probe": probe, "fixes_tried": [refused, proven],
             "failures": [{"error": "No module named 'msgspec'", "where": "swift.rlhf_trainers.utils:16"}]}  # fmt: skip
    text = format_proof(proof)
    assert "Tried pip install 'ms-swift>4.6.0' (the installed set plus it, resolved by uv): still fails: uv" in text
    assert "Proven fix: pip install 'ms-swift==4.5.3' 'msgspec==0.23.0'" in text
    said = "with msgspec: the reading of the resolved set said its GRPO trainer imports it and nothing in it provides"
    assert said in text
