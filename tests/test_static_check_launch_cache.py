"""apply()'s lookup of the static check: named by the import folders' times, so it costs a few stat() calls."""

from __future__ import annotations

import os

import grpo_compat.static_check as static_check
from grpo_compat.static_check import stamp


def test_installing_a_distribution_changes_the_stamp(tmp_path):
    site = tmp_path / "site-packages"
    site.mkdir()
    before = stamp.installed_stamp([str(site)])
    os.utime(site, ns=(1, 1))  # a fixed time, then the install below must move it
    fixed = stamp.installed_stamp([str(site)])
    (site / "trl-1.16.0.dist-info").mkdir()
    assert stamp.installed_stamp([str(site)]) != fixed
    assert before.startswith(f"check {static_check.CHECK_VERSION}|")


def test_saved_lines_are_read_back_only_under_their_own_stamp(tmp_path):
    stamp.save_lines(str(tmp_path), "set A", ["trl imports vllm, which is not installed (x.py:1). Fix: ..."])
    assert stamp.read_lines(str(tmp_path), "set A") == ["trl imports vllm, which is not installed (x.py:1). Fix: ..."]
    assert stamp.read_lines(str(tmp_path), "set B") is None
    stamp.save_lines(str(tmp_path), "set C", [])
    assert stamp.read_lines(str(tmp_path), "set C") == []


def test_a_launch_saves_what_the_check_found_and_the_next_launch_reads_it(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv(static_check.REPORTED_ENV, raising=False)
    static_check.log_findings_once()
    installed = stamp.installed_stamp()
    saved = stamp.read_lines(static_check.cache_folder(), installed)
    assert saved == [finding.line() for finding in static_check.check()]
    monkeypatch.setattr(static_check, "check", lambda *a, **k: (_ for _ in ()).throw(AssertionError("checked again")))
    monkeypatch.delenv(static_check.REPORTED_ENV, raising=False)
    static_check.log_findings_once()  # the saved lines, without running the check
