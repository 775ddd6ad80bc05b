"""`explain` on real public GRPO failure reports it was not written from (issue 39, items 3, 4, 6).

tests/fixtures/explain_reports/ holds the reports (their README says how they were collected and split). Each
report's log goes through `explain` as a user would paste it, with no installed versions (the log's own only),
and explain's answer (`Explanation.answer()`) is compared with the cause the thread established. The figures
asserted here are the measured ones quoted in docs/explain-held-out.md: a change that makes explain name
fewer causes, or name one wrongly with confidence, fails here.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from grpo_compat.catalogue.log_matching import Match, explain
from grpo_compat.catalogue.reasoning import Finding, metrics_in, reason

REPORTS = Path(__file__).parent / "fixtures" / "explain_reports"
METRIC_LOGS = Path(__file__).parent / "fixtures" / "explain_metrics"  # metric lines real threads posted
CAUSE_KEYS = ("class", "name", "package", "importer", "callable", "belongs_to")  # what "the cause" is


def _reports() -> dict[str, dict]:
    return {path.stem: json.loads(path.read_text()) for path in sorted(REPORTS.glob("*.json")) if path.stem != "split"}


def _judge(report: dict) -> tuple[str, bool]:
    """("right" | "wrong-confident" | "wrong-hedged" | "silent", whether the fix direction is right too)."""
    answer = explain(report["log"], installed={}).answer()
    expected = report["expected"]
    if answer is None:
        return "silent", False
    if isinstance(answer, Match):  # no report is a catalogue record: a record offered as the answer is wrong
        return ("wrong-confident" if answer.certain and answer.expected_here else "wrong-hedged"), False
    found = {
        "class": answer.cls,
        "name": answer.name,
        "package": answer.package,
        "importer": answer.importer,
        "callable": answer.callable,
        "belongs_to": answer.belongs_to,
    }
    right = all(str(found[key]).lower() == str(expected[key]).lower() for key in CAUSE_KEYS if key in expected)
    if not right:
        return ("wrong-confident" if answer.confident else "wrong-hedged"), False
    return "right", "remedy" not in expected or answer.remedy == expected["remedy"]


def _measure(part: str) -> dict[str, int]:
    reports = _reports()
    names = json.loads((REPORTS / "split.json").read_text())[part]
    tally = {
        "reports": len(names),
        "right": 0,
        "right-with-fix": 0,
        "wrong-confident": 0,
        "wrong-hedged": 0,
        "silent": 0,
    }
    for name in names:
        verdict, fix_right = _judge(reports[name])
        tally[verdict] += 1
        tally["right-with-fix"] += verdict == "right" and fix_right
    return tally


def test_the_split_is_the_hash_of_each_url_and_was_not_edited():
    reports = _reports()
    split = {"build": [], "held-out": []}
    for name, report in reports.items():
        odd = int(hashlib.sha256(report["url"].encode()).hexdigest()[0], 16) % 2
        split["held-out" if odd else "build"].append(name)
    assert split == json.loads((REPORTS / "split.json").read_text())
    assert all(report["log"].strip() and report["cause"] and report["expected"]["class"] for report in reports.values())


@pytest.mark.parametrize(
    ("part", "measured"),
    [
        # Measured 2026-11-28 on this branch, without API histories (grpo_compat.histories had no data yet):
        # see docs/explain-held-out.md for each report.
        (
            "build",
            {"reports": 6, "right": 5, "right-with-fix": 3, "wrong-confident": 0, "wrong-hedged": 0, "silent": 1},
        ),
        (
            "held-out",
            {"reports": 10, "right": 7, "right-with-fix": 6, "wrong-confident": 0, "wrong-hedged": 1, "silent": 2},
        ),
    ],
)
def test_explain_names_the_cause_of_real_reports_and_nothing_wrong_with_confidence(part, measured):
    tally = _measure(part)
    print(part, tally)
    assert tally == measured
    assert tally["wrong-confident"] == 0


# --- the metric classes, on logs that real threads posted (trl#3452, trl#3857: reports the census holds) ----

TRL_3452 = (METRIC_LOGS / "trl-3452.log").read_text()
TRL_3857 = (METRIC_LOGS / "trl-3857.log").read_text()


def test_loss_zero_with_a_live_gradient_and_reward_spread_is_called_expected_not_a_failure():
    assert metrics_in(TRL_3452)["grad_norm"] == [0.08656957000494003, 0.09666649252176285]
    (finding,) = reason(TRL_3452, {}).findings
    assert (finding.cls, finding.confident) == ("expected-zero-loss", True)


def test_zero_reward_spread_with_no_gradient_is_no_learning_not_truncation():
    (finding,) = reason(TRL_3857, {}).findings
    assert finding.cls == "no-learning"


def test_completions_clipped_at_the_limit_are_named_truncation_before_no_learning():
    clipped = TRL_3857.replace("'completions/clipped_ratio': 0.0", "'completions/clipped_ratio': 1.0")
    (finding,) = reason(clipped, {}).findings
    assert finding.cls == "truncation"


def test_a_record_whose_versions_do_not_match_is_not_the_answer_when_reasoning_explains_the_error():
    # trl 0.25 + vLLM 0.12 (trl#4617's log): the catalogue's records match words of it on other versions only.
    log = json.loads((REPORTS / "trl-4617.json").read_text())["log"]
    explanation = explain(log, installed={})
    assert isinstance(explanation.answer(), Finding)
    assert all(match.superseded for match in explanation.matches if not match.expected_here)
