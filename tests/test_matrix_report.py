"""The matrix reports: markdown summary and static HTML grid from fixture cell results."""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from grpo_compat.matrix import report
from grpo_compat.matrix.cli import main as matrix_main
from matrix.repository import cells_file
from matrix.reproducers import REPRODUCERS

CELLS_ORDER = {name: cell.index for name, cell in cells_file().cells.items()}  # the runner writes it

EVIL_OUTCOME = 'RuntimeError: <lambda> | "x"'
EVIL_ERROR = 'Traceback (most recent call last):\n  File "x.py", line 1\n<script>alert("pwned")</script> & \'quoted\''


def run(name: str, status: str = "pass", **fields: Any) -> dict[str, Any]:
    kind, _, mode = name.rpartition("/")
    base = {
        "name": name,
        "kind": kind,
        "mode": mode,
        "status": status,
        "expectation": "trains",
        "outcome": "trained" if status == "pass" else status,
        "error": None,
        "loss": 0.0123,
        "kl": 0.0004,
        "weights_changed": True,
        "weights_sha256": "ab" * 32,
        "wall_time_s": 12.5,
    }
    return {**base, **fields}


def cell(name: str, status: str, runs: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    base = {
        "cell": name,
        "order": CELLS_ORDER.get(name),
        "description": f"{name} <description>",
        "device": "cpu",
        "pins": {"torch": "2.13.0", "trl": "0.16.1", "transformers": "4.51.3"},
        "versions": {"torch": "2.13.0+cpu", "trl": "0.16.1", "transformers": "4.51.3"},
        "env": {"status": "ok", "seconds": 12.3, "cached": True, "error": None},
        "status": status,
        "reason": None,
        "runs": runs,
        "started": "2026-01-01T00:00:00",
        "finished": "2026-01-01T00:02:00",
        "wall_time_s": 120.0,
    }
    return {**base, **fields}


FIXTURES = {
    "trl-1.16": cell("trl-1.16", "pass", [run("single/plain"), run("single/patched"), run("ddp/patched")]),
    "trl-0.16": cell(
        "trl-0.16",
        "pass",
        [
            run(
                "repro:KF-2/plain",
                expectation="upstream fails: GRPOSettingsError on num_generations",
                outcome="ValueError: num_generations must divide the batch",
                error="ValueError: num_generations must divide the batch",
            ),
            run("repro:KF-2/patched"),
            run("single/plain"),
        ],
    ),
    "trl-0.19": cell(
        "trl-0.19",
        "fail",
        [run("single/plain"), run("single/patched", "fail", outcome=EVIL_OUTCOME, error=EVIL_ERROR)],
    ),
    "trl-0.23": cell(
        "trl-0.23", "fail", [run("zero2/plain", "timeout", outcome="timed out after 600 s", error="killed")]
    ),
    "swift-3.5": cell(
        "swift-3.5",
        "error",
        [],
        versions=None,
        reason="env build failed",
        env={"status": "failed", "seconds": 3.0, "cached": False, "error": "uv pip install ... failed:\nno deepspeed"},
    ),
    "zz-unknown": cell("zz-unknown", "pass", [run("swift/plain", "skipped", outcome="no ms-swift")]),
}
CORRUPT = "trl-1.9"  # a known cell whose file is not JSON
RUN_NAMES = [
    "single/plain",
    "single/patched",
    "ddp/patched",
    "zero2/plain",
    "swift/plain",
    "repro:KF-2/plain",
    "repro:KF-2/patched",
]


@pytest.fixture
def results_dir(tmp_path: Path) -> Path:
    for name, data in FIXTURES.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(data))
    (tmp_path / f"{CORRUPT}.json").write_text('{"cell": "trl-1.9", "runs": [')
    return tmp_path


class Grid(HTMLParser):
    """The report table: column headers, and body rows as (row header text, [(td attrs, td text)])."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[str, list[tuple[dict[str, str], str]]]] = []
        self.columns: list[str] = []
        self.scripts = 0
        self._in_body = self._in_head = False
        self._th: list[str] | None = None
        self._td: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.scripts += tag == "script"
        if tag in ("thead", "tbody"):
            self._in_head, self._in_body = tag == "thead", tag == "tbody"
        elif tag == "tr" and self._in_body:
            self.rows.append(("", []))
        elif tag == "th":
            self._th = []
        elif tag == "td" and self._in_body:
            self._td = []
            self.rows[-1][1].append(({key: value or "" for key, value in attrs}, ""))

    def handle_endtag(self, tag: str) -> None:
        if tag == "th" and self._th is not None:
            text = " ".join("".join(self._th).split())
            if self._in_head:
                self.columns.append(text)
            elif self._in_body and not self.rows[-1][0]:
                self.rows[-1] = (text, self.rows[-1][1])
            self._th = None
        elif tag == "td" and self._td is not None:
            attrs, _ = self.rows[-1][1][-1]
            self.rows[-1][1][-1] = (attrs, "".join(self._td))
            self._td = None
        elif tag in ("thead", "tbody"):
            self._in_head = self._in_body = False

    def handle_data(self, data: str) -> None:
        for buffer in (self._th, self._td):
            if buffer is not None:
                buffer.append(data)


def parse(page: str) -> Grid:
    grid = Grid()
    grid.feed(page)
    grid.close()
    return grid


# In cells-file order (the "order" the runner writes); a corrupt file and an unknown cell go last, by name.
CELL_ORDER = ["trl-0.16", "trl-0.19", "trl-0.23", "trl-1.16", "swift-3.5", "trl-1.9", "zz-unknown"]
KIND_ROWS = ["single", "ddp", "zero2", "swift", "KF-2"]


def test_load_results_orders_by_the_cells_file_and_keeps_corrupt_files_last(results_dir: Path) -> None:
    results = report.load_results(results_dir)
    names = [cell["cell"] for cell in results]
    assert names == CELL_ORDER
    corrupt = results[names.index(CORRUPT)]
    assert corrupt["status"] == "error"
    assert "JSONDecodeError" in corrupt["reason"] and f"{CORRUPT}.json" in corrupt["reason"]


def test_run_kinds_have_a_stable_order_training_runs_first_then_reproducers_by_failure(results_dir: Path) -> None:
    assert report.run_names(report.load_results(results_dir)) == RUN_NAMES
    shuffled = ["repro:KF-10/plain", "zero3/patched", "repro:KF-2/patched", "ddp/plain", "repro:KF-2/plain"]
    assert sorted(shuffled, key=report.run_sort_key) == [
        "ddp/plain",
        "zero3/patched",
        "repro:KF-2/plain",
        "repro:KF-2/patched",
        "repro:KF-10/plain",
    ]
    results = report.load_results(results_dir)
    failure = "liger-loss-type-missing"  # the runner writes a reproducer's catalogue record as its group
    results[0]["runs"].append(run("repro:liger-loss-type/plain", group=failure))
    assert report.grid_groups(results) == [
        ("Training runs", ["single", "ddp", "zero2", "swift"]),
        ("Reproducers: other", ["repro:KF-2"]),
        ("Reproducers: liger-loss-type-missing", ["repro:liger-loss-type"]),
    ]


def test_markdown_summary_has_a_row_per_run_kind_and_a_column_per_cell(results_dir: Path) -> None:
    text = report.render_markdown(report.load_results(results_dir))
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("| Run"))
    assert header == "| Run (plain / patched) | " + " | ".join(f"**{name}**" for name in CELL_ORDER) + " |"
    width = header.count("|")
    table = [line for line in lines if line.startswith("| ")]
    assert all(line.count("|") - line.count("\\|") == width for line in table)
    rows = {line.split(" | ")[0].removeprefix("| "): line.split(" | ")[1:] for line in table}
    column = {name: index for index, name in enumerate(CELL_ORDER)}
    assert rows["KF-2"][column["trl-0.16"]] == "repro / pass"
    assert rows["single"][column["trl-0.19"]] == "pass / FAIL"
    assert rows["zero2"][column["trl-0.23"]] == "time / -"
    assert rows["swift"][column["zz-unknown"]].startswith("skip / -")
    assert rows["cell"][column["swift-3.5"]] == "error: env build failed"
    assert rows["cell"][column[CORRUPT]].startswith("error: cannot read trl-1.9.json")
    assert "**Training runs**" in text and "Totals:" in text and "Legend:" in text and "7 cells" in text
    fenced = f"```text\n{EVIL_ERROR}\n```"  # the error excerpt, in a code block: shown, not run
    assert fenced in text and "<script>" not in text.replace(fenced, "")


def test_html_grid_has_cells_as_columns_and_each_square_shows_plain_and_patched(results_dir: Path) -> None:
    page = report.render_html(report.load_results(results_dir))
    grid = parse(page)
    assert grid.scripts == 0 and "<script>" not in page
    assert "http://" not in page and "https://" not in page  # no external assets
    assert [column.split()[0] for column in grid.columns[1:]] == CELL_ORDER
    rows = {header: cells for header, cells in grid.rows if cells}
    assert list(rows) == ["cell", *KIND_ROWS]
    assert all(len(cells) == len(CELL_ORDER) for cells in rows.values())
    groups = [header for header, cells in grid.rows if not cells]
    assert groups == ["Training runs", "Reproducers: other"]

    def square(kind: str, cell_name: str) -> tuple[dict[str, str], str]:
        return rows[kind][CELL_ORDER.index(cell_name)]

    attrs, text = square("single", "trl-0.19")
    assert text.startswith("passFAIL")  # the two halves' labels, then the details panel
    assert attrs["title"].endswith(EVIL_ERROR)  # the parser unescapes: the full excerpt is in the title
    assert EVIL_ERROR in text  # and in the panel that opens on click
    assert "&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt; &amp; &#x27;quoted&#x27;" in page
    assert '<span class="half st-reproduced">repro</span><span class="half st-pass">pass</span>' in page
    assert square("zero2", "trl-0.23")[1].startswith("time-")
    assert "st-absent" in square("swift", "trl-1.16")[0]["class"]
    for name, why in (("swift-3.5", "no deepspeed"), (CORRUPT, "JSONDecodeError")):
        attrs, text = rows["cell"][CELL_ORDER.index(name)]
        assert "st-error" in attrs["class"] and why in attrs["title"] and why in text
    for key, (_, _, colour, _) in report.STYLES.items():
        assert f".st-{key} {{ background: {colour};" in page
    emoji = [char for char in page if 0x2600 <= ord(char) <= 0x27BF or ord(char) >= 0x1F000]
    assert emoji == []  # a browser without an emoji font draws them as empty boxes


def twelve_cells(folder: Path) -> Path:
    """12 cells with this project's longest version lists and every run kind of a full matrix run."""
    kinds = ["single", "ddp", "zero2", "zero3", "zero2-ga8", "zero3-ga8", "swift", "swift-cli", "swift-cli-2proc"]
    kinds += [f"repro:{reproducer.id}" for reproducer in REPRODUCERS][:40]
    groups = {f"repro:{reproducer.id}": reproducer.failure for reproducer in REPRODUCERS}
    versions = {
        "torch": "2.13.0+cpu",
        "transformers": "4.52.4",
        "trl": "0.20.0",
        "accelerate": "1.10.1",
        "deepspeed": "0.16.9",
        "peft": "0.15.2",
        "ms-swift": "3.12.6",
        "liger-kernel": "0.8.0",
    }
    for index in range(12):
        runs = [
            run(f"{kind}/{mode}", ("pass", "fail", "timeout")[(index + n) % 3], group=groups.get(kind))
            for n, kind in enumerate(kinds)
            for mode in ("plain", "patched")
        ]
        name = f"swift-3.5-trl0.20-{index:02d}"
        data = cell(name, "fail", runs, versions=versions, description="a long description " * 10)
        (folder / f"{name}.json").write_text(json.dumps(data))
    return folder


def test_twelve_cells_fit_a_1600_px_page_in_a_real_browser(tmp_path: Path) -> None:
    import shutil
    import subprocess

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("no chromium here (.ci/run installs Debian's)")
    page = report.render_html(report.load_results(twelve_cells(tmp_path)))
    # Measured in the page: its width, and every header or square whose text does not fit its box.
    measure = (
        "<script>const over = [...document.querySelectorAll('th, .half')]"
        ".filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent.slice(0, 30));"
        "document.body.dataset.width = document.documentElement.scrollWidth;"
        "document.body.dataset.over = JSON.stringify(over);</script>"
    )
    (tmp_path / "probe.html").write_text(page.replace("</body>", measure + "</body>"), encoding="utf-8")
    dom = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1600,1200",
            "--dump-dom",
            (tmp_path / "probe.html").as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    width, over = (html.unescape(re.search(rf'data-{key}="([^"]*)"', dom).group(1)) for key in ("width", "over"))
    assert int(width) <= 1600
    assert json.loads(over) == []


def test_junit_has_a_suite_per_cell_and_a_case_per_run_with_failures_ci_systems_show(results_dir: Path) -> None:
    from xml.etree import ElementTree

    root = ElementTree.fromstring(report.render_junit(report.load_results(results_dir)))
    suites = {suite.get("name"): suite for suite in root.iter("testsuite")}
    assert list(suites) == CELL_ORDER
    cases = {(case.get("classname"), case.get("name")): case for case in root.iter("testcase")}
    failed = cases[("trl-0.19", "single/patched")].find("failure")
    assert failed.get("message") == EVIL_OUTCOME and failed.text.endswith(EVIL_ERROR)  # escaped, then read back
    assert cases[("trl-0.23", "zero2/plain")].find("error") is not None  # a timeout
    assert cases[("zz-unknown", "swift/plain")].find("skipped") is not None
    assert cases[("trl-0.16", "repro:KF-2/plain")].find("failure") is None  # reproduced as expected: a pass
    assert "no deepspeed" in cases[("swift-3.5", "cell")].find("error").text  # a cell that could not run
    assert (suites["trl-0.19"].get("failures"), suites["trl-0.23"].get("errors")) == ("1", "1")
    assert suites["trl-0.16"].find("properties/property").get("value").startswith("torch 2.13.0+cpu")


def test_write_reports_and_cli(results_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert matrix_main(["report", "--results", str(results_dir)]) == 0
    md_path, html_path = results_dir / "summary.md", results_dir / "report.html"
    assert capsys.readouterr().out.split() == [str(md_path), str(html_path)]
    junit = results_dir / "ci" / "matrix.xml"
    assert matrix_main(["report", "--results", str(results_dir), "--junit", str(junit)]) == 0
    assert capsys.readouterr().out.split()[-1] == str(junit) and junit.read_text().startswith("<?xml")
    assert md_path.read_text(encoding="utf-8").startswith("## GRPO compatibility matrix")
    assert [header for header, _ in parse(html_path.read_text(encoding="utf-8")).rows][:2] == ["cell", "Training runs"]


def test_empty_folder(tmp_path: Path) -> None:
    assert "No cell results" in report.render_markdown(report.load_results(tmp_path))
    assert [header for header, _ in parse(report.render_html([])).rows] == ["cell"]
