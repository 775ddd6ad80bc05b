"""The matrix reports: markdown summary and static HTML grid from fixture cell results."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from matrix import report

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
    """Rows of the report table's body: (row header text, [(td attrs, td text)])."""

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
            text = "".join(self._th).strip()
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


def test_load_results_orders_by_cells_toml_and_keeps_corrupt_files(results_dir: Path) -> None:
    results = report.load_results(results_dir)
    names = [cell["cell"] for cell in results]
    assert names == ["trl-0.16", "trl-0.19", "trl-0.23", "trl-1.9", "trl-1.16", "swift-3.5", "zz-unknown"]
    corrupt = results[names.index(CORRUPT)]
    assert corrupt["status"] == "error"
    assert "JSONDecodeError" in corrupt["reason"] and f"{CORRUPT}.json" in corrupt["reason"]


def test_run_columns_have_a_stable_order(results_dir: Path) -> None:
    assert report.run_names(report.load_results(results_dir)) == RUN_NAMES
    shuffled = ["repro:KF-10/plain", "zero3/patched", "repro:KF-2/patched", "ddp/plain", "repro:KF-2/plain"]
    assert sorted(shuffled, key=report.run_sort_key) == [
        "ddp/plain",
        "zero3/patched",
        "repro:KF-2/plain",
        "repro:KF-2/patched",
        "repro:KF-10/plain",
    ]


def test_markdown_summary(results_dir: Path) -> None:
    text = report.render_markdown(report.load_results(results_dir))
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("| Cell"))
    for name in RUN_NAMES:
        assert f" {name} |" in header
    rows = [line for line in lines if line.startswith("| **")]
    assert len(rows) == len(FIXTURES) + 1
    width = header.count("|")
    assert all(row.count("|") - row.count("\\|") == width for row in rows)
    row = {line.split("**")[1]: line for line in rows}
    assert "🐛 reproduced: ValueError" in row["trl-0.16"] and "✅ trained" in row["trl-0.16"]
    assert '❌ RuntimeError: &lt;lambda&gt; \\| "x"' in row["trl-0.19"]
    assert "⏱️ timed out" in row["trl-0.23"]
    assert "💥 error: env build failed" in row["swift-3.5"]
    assert "💥 error: cannot read trl-1.9.json" in row[CORRUPT]
    assert "Totals:" in text and "Legend:" in text and "7 cells" in text
    fenced = f"```text\n{EVIL_ERROR}\n```"  # the error excerpt, in a code block: shown, not run
    assert fenced in text and "<script>" not in text.replace(fenced, "")


def test_html_grid(results_dir: Path) -> None:
    page = report.render_html(report.load_results(results_dir))
    grid = parse(page)
    assert grid.scripts == 0 and "<script>" not in page
    assert "http://" not in page and "https://" not in page  # no external assets
    assert grid.columns == ["Cell", "Status", *RUN_NAMES]
    assert len(grid.rows) == len(FIXTURES) + 1
    rows = {header.split()[0]: cells for header, cells in grid.rows}
    assert set(rows) == {*FIXTURES, CORRUPT}
    for name, cells in rows.items():
        spans = sum(int(attrs.get("colspan", "1")) for attrs, _ in cells)
        assert spans == 1 + len(RUN_NAMES), name

    def run_cell(cell_name: str, run_name: str) -> tuple[dict[str, str], str]:
        return rows[cell_name][1 + RUN_NAMES.index(run_name)]

    attrs, text = run_cell("trl-0.19", "single/patched")
    assert "st-fail" in attrs["class"]
    assert attrs["title"].endswith(EVIL_ERROR)  # the parser unescapes: the full excerpt is in the title
    assert EVIL_ERROR in text  # and in the <details> panel
    assert "&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt; &amp; &#x27;quoted&#x27;" in page
    assert "st-reproduced" in run_cell("trl-0.16", "repro:KF-2/plain")[0]["class"]
    assert "st-pass" in run_cell("trl-0.16", "repro:KF-2/patched")[0]["class"]
    assert "st-timeout" in run_cell("trl-0.23", "zero2/plain")[0]["class"]
    assert "st-skipped" in run_cell("zz-unknown", "swift/plain")[0]["class"]
    assert "st-absent" in run_cell("trl-1.16", "swift/plain")[0]["class"]
    for name, why in (("swift-3.5", "no deepspeed"), (CORRUPT, "JSONDecodeError")):
        (status, _), (attrs, text) = rows[name]
        assert "st-error" in status["class"] and "st-error" in attrs["class"]
        assert attrs["colspan"] == str(len(RUN_NAMES)) and why in attrs["title"] and why in text
    for key, (_, _, colour, _) in report.STYLES.items():
        assert f".st-{key} {{ background: {colour};" in page


def test_write_reports_and_cli(results_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert report.main([str(results_dir)]) == 0
    md_path, html_path = results_dir / "summary.md", results_dir / "report.html"
    assert capsys.readouterr().out.split() == [str(md_path), str(html_path)]
    assert md_path.read_text(encoding="utf-8").startswith("## GRPO compatibility matrix")
    assert len(parse(html_path.read_text(encoding="utf-8")).rows) == len(FIXTURES) + 1


def test_empty_folder(tmp_path: Path) -> None:
    assert "No cell results" in report.render_markdown(report.load_results(tmp_path))
    assert parse(report.render_html([])).rows == []
