"""`explain` on a held-out set sampled by date, not selected (issue 45, item 7).

tests/fixtures/explain_held_out_2026_11/ holds public GRPO threads taken newest first by fixed criteria
(CRITERIA.md, committed before collection; REJECTED.md lists every thread looked at and why it was not kept).
Each log goes through `explain` as a user would paste it, with no installed versions, and the answer is judged
against the cause the thread established (the judge of tests/test_explain_reports.py). Two counts are asserted:
how many causes explain names (it may only grow) and which answers break a harm rule (the goal is none; the
baseline's harms are recorded by name as an expected failure, and any other harm fails).
docs/explain-held-out.md ("sampled by date") gives the figures and the class mix.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from grpo_compat.catalogue.log_matching import Explanation, explain
from grpo_compat.catalogue.reasoning import NOT_FAILURES, Finding, _history
from tests.test_explain_reports import _judge

SAMPLED = Path(__file__).parent / "fixtures" / "explain_held_out_2026_11"
CRITERIA_KEYS = ("url", "tracker", "title", "date", "log", "versions", "cause", "fix", "expected")
# An error that ended a run: a traceback's head or an exception line (`Name: message` where Name ends so).
_RAISED = re.compile(r"Traceback \(most recent call last\)|^\W*(?:\w+\.)*\w*(?:Error|Exception)\b.*:", re.M)
_PIP_INSTALL = re.compile(r"pip install ['\"]?([A-Za-z_][\w.-]*)")
_FROM_MODULE = re.compile(r"from '([\w.]+)'")


def _reports() -> dict[str, dict]:
    order = json.loads((SAMPLED / "order.json").read_text())
    return {name: json.loads((SAMPLED / f"{name}.json").read_text()) for part in order.values() for name in part}


def _harms(log: str, explanation: Explanation) -> list[str]:
    """The harm rules (issue 45: harm rules before coverage) an explanation of ``log`` breaks, one line each;
    an asserted cause that the thread contradicts is the judge's "wrong-confident", counted apart."""
    harms = []
    raised = bool(_RAISED.search(log))
    for finding in explanation.reasoned:
        if raised and finding.cls in NOT_FAILURES:
            harms.append(f"{finding.cls}: 'nothing to fix' on a log that holds an error")
        for package in _PIP_INSTALL.findall(finding.fix):
            if package.split(".")[0] in sys.stdlib_module_names:
                harms.append(f"pip install {package}: a standard-library module, not a distribution")
        module = _FROM_MODULE.search(finding.evidence)
        history = _history(finding.package) if finding.package and finding.cls == "name-missing" else None
        version = explanation.versions.get(finding.package or "")
        if finding.confident and module and history and version and history.has(module[1], finding.name, version):
            harms.append(f"{finding.package} {version} has {module[1]}.{finding.name} by its own histories")
    return harms


def test_the_sample_is_the_committed_list_and_every_report_has_the_fields_the_criteria_fix():
    reports = _reports()
    on_disk = {p.stem for p in SAMPLED.glob("*.json")} - {"order"}
    assert set(reports) == on_disk
    excluded = set((SAMPLED / "excluded-before-collection.txt").read_text().split())
    for report in reports.values():
        assert all(report.get(key) is not None for key in CRITERIA_KEYS), report["url"]
        assert report["log"].strip() and report["expected"]["class"]
        repository, number = re.search(r"github\.com/[^/]+/([^/]+)/(?:issues|pull)/(\d+)", report["url"]).groups()
        assert f"{repository.lower()}#{number}" not in excluded  # C4: no thread the project already knew
    kept = re.findall(r"^- (\S+) \|[^|]*\|[^|]*\| \*\*KEEP\*\*", (SAMPLED / "REJECTED.md").read_text(), re.M)
    assert sorted(kept) == sorted(report["url"] for report in reports.values())


# The harms the baseline measured (explain as on main, before issue 45's rule changes), named so that none is hidden:
# the log holds two errors (seed_worker's arity under transformers >= 4.52, then, after the reporter downgraded
# transformers, an import the project's monkey patch needs from a newer one); explain asserts the second as the cause
# and tells the user to install a transformers that has the name, which leads back to the first error. The thread's
# cause is trl 0.17 calling seed_worker without its new parameters; its fix, trl 0.23.1.
HARMS_MEASURED = {"qwen-vl-series-finetune-197": ["an asserted cause the thread contradicts"]}


def _sampled_verdicts_and_harms() -> tuple[dict[str, str], dict[str, list[str]]]:
    reports = _reports()
    verdicts = {name: _judge(report)[0] for name, report in reports.items()}
    harms = {}
    for name, report in reports.items():
        found = _harms(report["log"], explain(report["log"], installed={}))
        if verdicts[name] == "wrong-confident":
            found.append("an asserted cause the thread contradicts")
        if found:
            harms[name] = found
    named = sorted(name for name, verdict in verdicts.items() if verdict == "right")
    print(f"sampled: {len(reports)} reports, named {len(named)} {named}, verdicts {verdicts}, harms {harms}")
    return verdicts, harms


def test_explain_names_at_least_as_many_sampled_causes_as_measured_and_no_harm_beyond_the_recorded_ones():
    verdicts, harms = _sampled_verdicts_and_harms()
    # Measured 2026-11-29 on main's code (baseline before issue 45's rule changes), 6 reports: 1 right
    # (unsloth-2426), 1 partial (unsloth-11169), 1 wrong with confidence (qwen-vl-series-finetune-197), 3 silent.
    assert sum(verdict == "right" for verdict in verdicts.values()) >= 1
    for name, found in harms.items():  # a harm the baseline did not have fails at once
        assert name in HARMS_MEASURED and set(found) <= set(HARMS_MEASURED[name]), (name, found)


@pytest.mark.xfail(strict=True, reason=f"baseline harms, not yet removed: {HARMS_MEASURED}")
def test_explain_harms_none_of_the_sampled_reports():
    assert _sampled_verdicts_and_harms()[1] == {}


def test_the_harm_rules_catch_the_harms_issue_45_reported():
    # The three harms a first sample met, as findings (not explain's answers today: those may change).
    traceback = 'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n'
    stdlib = Finding("missing-package", "resource", True, "", "pip install resource", "No module named 'resource'")
    note = Finding("expected-zero-loss", "loss", True, "", "nothing to fix; watch reward", "{'loss': 0.0}")
    falsehood = Finding(
        "name-missing", "GRPOConfig", True, "", "", "cannot import name 'GRPOConfig' from 'trl'", package="trl"
    )
    explanation = Explanation(versions={"trl": "1.16.0"}, version_sources={"trl": "log"})
    explanation.reasoned = [stdlib, note, falsehood]
    assert len(_harms(traceback + "ModuleNotFoundError: No module named 'resource'", explanation)) == 3
    explanation.reasoned = [note]
    assert _harms("{'loss': 0.0, 'grad_norm': 0.1}", explanation) == []  # a metrics-only log: the note is right
