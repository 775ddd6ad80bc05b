"""matrix/census.py: the census coverage figures, counted per thread, strictly by reference or by whole row."""

from __future__ import annotations

from types import SimpleNamespace

from matrix.census import coverage, read_census, threads_of

CENSUS = """
| # | where | symptom |
|---|---|---|
| 1 | trl #2858, #3061; open-r1 #249 | batch divisibility |
| 15 | Tina #4, rl-swarm #304/#305, CPPO PR #7 | sampler arity |
| 20 | ms-swift #3470, #9261 | skew |

| # | where | symptom |
|---|---|---|
| N11 | trl PRs #5986, #6001 | unknown environment |
"""


def record(handling, references=(), census=(), confirmed=True):
    return SimpleNamespace(handling=handling, references=references, census=census, confirmed=confirmed)


def test_each_thread_keeps_the_project_named_before_it():
    assert threads_of("trl #2858, #3061; open-r1 #249") == (("trl", 2858), ("trl", 3061), ("open-r1", 249))
    assert threads_of("Tina #4, rl-swarm #304/#305, CPPO PR #7") == (
        ("tina", 4),
        ("rl-swarm", 304),
        ("rl-swarm", 305),
        ("cppo", 7),
    )
    assert threads_of("trl PRs #5986, #6001") == (("trl", 5986), ("trl", 6001))
    assert threads_of("trl #3566 (transformers #38733)") == (("trl", 3566), ("transformers", 38733))


def test_a_thread_counts_strictly_only_when_a_record_references_it():
    rows = read_census(CENSUS)
    assert [row.id for row in rows] == ["1", "15", "20", "N11"]
    failures = [
        record("refused", ("modelscope/ms-swift#9261",), census=(20,)),  # one thread of row 20, claiming the row
        record("explained", ("huggingface/trl#2858",)),
        record("fixed", ("huggingface/trl#6001",)),
        record("fixed", ("huggingface/trl#3061",), census=(1,), confirmed=False),  # did not reproduce: never counts
    ]
    counts = coverage(rows, failures)
    assert counts["all"] == {"threads": 9, "handled": 1, "named": 2, "handled_by_row": 2, "named_by_row": 3}
    assert counts["2026"] == {"threads": 2, "handled": 1, "named": 1, "handled_by_row": 1, "named_by_row": 1}
