"""What grpo_compat prints: one line on a patched run where nothing is wrong, the table only on request, and
messages above a running progress bar, never on its line."""

from __future__ import annotations

import re
import sys

import pytest

from grpo_compat.core.report import ONE_LINE_MARK
from tests.helpers import run_python, run_script

TABLE_ROW = re.compile(r"^  (?P<id>[a-z0-9]+\.[a-z0-9.-]+)\s+(?P<status>applied|pending)\s", re.MULTILINE)


def test_a_message_during_a_progress_bar_starts_on_a_line_of_its_own():
    result = run_python(
        """
        from tqdm.auto import tqdm
        from grpo_compat.core.logs import log
        bar = tqdm(total=4, desc="train")
        bar.update(1)
        log("warning", "GRPO is not learning")
        bar.update(1)
        bar.close()
        """
    )
    assert result.returncode == 0, result.stderr
    before, _, _ = result.stderr.partition("[grpo_compat] WARNING GRPO is not learning\n")
    assert before, result.stderr
    assert before.rpartition("\n")[2].rpartition("\r")[2] == "", repr(before)  # nothing of the bar before it


def test_a_patch_says_a_thing_of_one_trainer_once_and_of_another_trainer_again():
    result = run_python(
        """
        from types import SimpleNamespace
        from grpo_compat.core.logs import log_once
        first, second = SimpleNamespace(), SimpleNamespace()
        for trainer in (first, first, second):
            log_once(trainer, "warning", "resumed at step %d", "trl.some-patch", 3)
        log_once(first, "warning", "another patch's word", "trl.other-patch")
        """
    )
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("[grpo_compat]")]
    assert lines == [
        "[grpo_compat] WARNING trl.some-patch: resumed at step 3",
        "[grpo_compat] WARNING trl.some-patch: resumed at step 3",
        "[grpo_compat] WARNING trl.other-patch: another patch's word",
    ]


def test_logging_imports_no_progress_bar_library_itself():
    result = run_python(
        """
        import sys
        from grpo_compat.core.logs import log
        log("warning", "a message")
        print("tqdm" in sys.modules)
        """
    )
    assert result.stdout.strip() == "False" and "[grpo_compat] WARNING a message" in result.stderr


def smoke_run(tmp_path, monkeypatch, log_level: str = "INFO"):
    monkeypatch.setenv("GRPO_COMPAT_LOG_LEVEL", log_level)
    output = tmp_path / f"smoke-{log_level}.json"
    arguments = ["--mode", "patched", "--steps", "2", "--output", str(output), "--print-report"]
    return run_script(sys.executable, "matrix/smoke_grpo.py", *arguments)


@pytest.mark.slow
def test_a_patched_run_with_nothing_wrong_logs_one_line_and_debug_shows_no_patch_pending_that_applies(
    tmp_path, monkeypatch
):
    quiet = smoke_run(tmp_path, monkeypatch)
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    ours = [line for line in quiet.stderr.splitlines() if line.startswith("[grpo_compat]")]
    assert len(ours) <= 3 and ONE_LINE_MARK in ours[0], ours
    assert re.match(r"\[grpo_compat\] INFO grpo_compat \S+: \d+ patches active for trl ", ours[0]), ours[0]

    debug = smoke_run(tmp_path, monkeypatch, "DEBUG")
    assert debug.returncode == 0, debug.stderr[-3000:]
    logged = {row["id"]: row["status"] for row in TABLE_ROW.finditer(debug.stderr)}
    final = {row["id"]: row["status"] for row in TABLE_ROW.finditer(debug.stdout)}  # --print-report, at the end
    assert logged and final, (debug.stderr[-3000:], debug.stdout[-3000:])
    applied_later = [patch for patch, status in logged.items() if status == "pending" and final[patch] == "applied"]
    assert applied_later == []
