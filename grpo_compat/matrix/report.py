"""Summaries of a matrix run: a markdown table (GitHub step summary) and one static HTML page.

The runner writes one JSON result per cell into a folder; this reads them all and writes
``summary.md`` and ``report.html`` next to them.

    grpo-compat matrix report --results results/
"""

from __future__ import annotations

import html
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from grpo_compat.core.versions import TRACKED_DISTRIBUTIONS

KIND_ORDER = ("single", "ddp", "zero2", "zero3", "swift")
MODE_ORDER = ("plain", "patched")
REPRO_PREFIX = "repro:"
KNOWN_FAILURE = "upstream fails"

# Display status of a run -> (label, short label for a grid square, background, text colour). Text, not
# emoji: a headless browser without an emoji font draws those as empty boxes.
STYLES: dict[str, tuple[str, str, str, str]] = {
    "pass": ("pass", "pass", "#2e7d32", "#ffffff"),
    "reproduced": ("reproduced", "repro", "#ffc107", "#000000"),
    "fail": ("fail", "FAIL", "#d32f2f", "#ffffff"),
    "timeout": ("timeout", "time", "#e65100", "#ffffff"),
    "error": ("error", "error", "#8b0000", "#ffffff"),
    "skipped": ("skipped", "skip", "#9e9e9e", "#000000"),
    "unknown": ("unknown", "?", "#616161", "#ffffff"),
    "absent": ("not run", "-", "#f5f5f5", "#757575"),
}
LEGEND = {
    "pass": "passed its expectation",
    "reproduced": "a known upstream failure, reproduced unpatched as expected",
    "fail": "did not meet its expectation",
    "timeout": "ran out of time",
    "error": "could not run (env build, runner crash)",
    "skipped": "skipped",
    "absent": "not part of this cell",
}


# ---------------------------------------------------------------- loading


def _error_cell(name: str, reason: str) -> dict[str, Any]:
    return {"cell": name, "status": "error", "reason": reason, "runs": [], "env": {}, "pins": {}, "versions": None}


def _normalize(data: Any, path: Path) -> dict[str, Any]:
    """A cell result with every field the renderers read, whatever the file held."""
    if not isinstance(data, dict):
        return _error_cell(path.stem, f"{path.name}: expected a JSON object, got {type(data).__name__}")
    cell = dict(data)
    cell["cell"] = str(cell.get("cell") or path.stem)
    runs = cell.get("runs") if isinstance(cell.get("runs"), list) else []
    cell["runs"] = [{**run, "name": str(run["name"])} for run in runs if isinstance(run, dict) and run.get("name")]
    cell["env"] = cell.get("env") if isinstance(cell.get("env"), dict) else {}
    cell.setdefault("reason", None)
    if not cell.get("status"):
        cell["status"] = _status_from_runs(cell["runs"])
        cell["reason"] = cell["reason"] or ("the result has no status" if cell["status"] == "error" else None)
    return cell


def _status_from_runs(runs: list[dict[str, Any]]) -> str:
    if not runs:
        return "error"
    return "pass" if all(run.get("status") in ("pass", "skipped") for run in runs) else "fail"


def load_cell(path: Path) -> dict[str, Any]:
    """One cell result; an unreadable or unparsable file becomes an error cell saying why."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        return _error_cell(path.stem, f"cannot read {path.name}: {type(error).__name__}: {error}")
    return _normalize(data, path)


def load_results(results_dir: str | Path) -> list[dict[str, Any]]:
    """Every ``*.json`` cell result in the folder, in cells-file order (the runner's "order"), unknown last."""
    results = [load_cell(path) for path in sorted(Path(results_dir).glob("*.json"))]

    def place(cell: dict[str, Any]) -> tuple[int, str]:
        order = cell.get("order")
        return (order if isinstance(order, int) else 1_000_000, cell["cell"])

    return sorted(results, key=place)


# ---------------------------------------------------------------- classification


def _natural(text: str) -> tuple[Any, ...]:
    # "KF-10" after "KF-2"; str and int parts alternate, so keys always compare.
    return tuple(int(part) if index % 2 else part for index, part in enumerate(re.split(r"(\d+)", text)))


def run_sort_key(name: str) -> tuple[Any, ...]:
    """single, ddp, zero2, zero3, swift (plain before patched), other kinds, then reproducers."""
    group, _, mode = name.rpartition("/")
    if not group:
        group, mode = name, ""
    mode_key = (MODE_ORDER.index(mode) if mode in MODE_ORDER else len(MODE_ORDER), mode)
    if group in KIND_ORDER:
        return (0, KIND_ORDER.index(group), (), mode_key)
    if group.startswith(REPRO_PREFIX):
        return (2, 0, _natural(group[len(REPRO_PREFIX) :]), mode_key)
    return (1, 0, _natural(group), mode_key)


def run_names(results: list[dict[str, Any]]) -> list[str]:
    """The union of run names over all cells, in a stable order."""
    names = {run["name"] for cell in results for run in cell["runs"]}
    return sorted(names, key=run_sort_key)


def run_display(run: dict[str, Any] | None) -> str:
    """The display status of a run: a STYLES key."""
    if run is None:
        return "absent"
    status = str(run.get("status") or "unknown")
    if status == "pass" and str(run.get("expectation") or "").startswith(KNOWN_FAILURE):
        return "reproduced"
    return status if status in STYLES else "unknown"


def run_text(run: dict[str, Any]) -> str:
    """The short outcome shown in a grid cell."""
    outcome = str(run.get("outcome") or run.get("status") or "").strip()
    if run_display(run) == "reproduced":
        return f"reproduced: {outcome}" if outcome else "reproduced"
    return outcome


def cell_display(cell: dict[str, Any]) -> str:
    status = str(cell.get("status") or "unknown")
    return status if status in STYLES else "unknown"


def cell_why(cell: dict[str, Any]) -> str:
    """Why a cell errored: its reason, else its env build error."""
    env_error = cell["env"].get("error")
    parts = [str(text).strip() for text in (cell.get("reason"), env_error) if text]
    return "\n".join(dict.fromkeys(parts))


def cell_versions(cell: dict[str, Any]) -> list[str]:
    """["torch 2.13.0+cpu", "trl 0.16.1", ...]: the installed versions, else the pins."""
    versions = cell.get("versions") if isinstance(cell.get("versions"), dict) else None
    source = versions or (cell.get("pins") if isinstance(cell.get("pins"), dict) else {}) or {}
    return [f"{key} {source[key]}" for key in TRACKED_DISTRIBUTIONS if source.get(key)]


def versions_text(cell: dict[str, Any]) -> str:
    return ", ".join(cell_versions(cell))


def totals(results: list[dict[str, Any]]) -> tuple[Counter[str], Counter[str]]:
    """Counts of cell statuses and of run display statuses."""
    cells = Counter(cell_display(cell) for cell in results)
    runs = Counter(run_display(run) for cell in results for run in cell["runs"])
    return cells, runs


def _count_line(counts: Counter[str]) -> str:
    return ", ".join(f"{counts[key]} {STYLES[key][0]}" for key in STYLES if counts[key]) or "none"


def totals_line(results: list[dict[str, Any]]) -> str:
    cells, runs = totals(results)
    return f"{len(results)} cells: {_count_line(cells)} · {sum(runs.values())} runs: {_count_line(runs)}"


def _runs_by_name(cell: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {run["name"]: run for run in cell["runs"]}


def _one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _metrics(run: dict[str, Any]) -> str:
    parts = []
    for key, label in (("loss", "loss"), ("kl", "kl")):
        if isinstance(run.get(key), (int, float)):
            parts.append(f"{label} {run[key]:.4g}")
    if run.get("weights_changed") is not None:
        parts.append("weights changed" if run["weights_changed"] else "weights unchanged")
    if isinstance(run.get("wall_time_s"), (int, float)):
        parts.append(f"{run['wall_time_s']:.1f} s")
    return ", ".join(parts)


def run_details(run: dict[str, Any]) -> str:
    """Everything about a run as plain text: for tooltips."""
    lines = [
        f"{run['name']}: {run.get('status')}",
        f"expected: {run.get('expectation') or '-'}",
        f"outcome: {run.get('outcome') or '-'}",
    ]
    if _metrics(run):
        lines.append(_metrics(run))
    if run.get("error"):
        lines += ["", _tail(str(run["error"]), 4000)]
    return "\n".join(lines)


def _tail(text: str, limit: int) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]


# ---------------------------------------------------------------- markdown


def _md(text: str) -> str:
    """Text safe inside a markdown table cell (GitHub renders inline HTML, so escape it too)."""
    return html.escape(text, quote=False).replace("|", "\\|").replace("\n", " ")


def _fence(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


# ---------------------------------------------------------------- the grid: run kinds down, cells across

TRAINING = "Training runs"


def _kind_of(name: str) -> str:
    kind, _, mode = name.rpartition("/")
    return kind if kind and mode in MODE_ORDER else name


def grid_groups(results: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    """(title, run kinds) in display order: the training runs, then the reproducers grouped by failure."""
    group_of = {_kind_of(run["name"]): run.get("group") for cell in results for run in cell["runs"]}
    groups: dict[str, list[str]] = {TRAINING: []}
    for kind in dict.fromkeys(_kind_of(name) for name in run_names(results)):
        if kind.startswith(REPRO_PREFIX):
            title = f"Reproducers: {group_of.get(kind) or 'other'}"
        else:
            title = group_of.get(kind) or TRAINING
        groups.setdefault(title, []).append(kind)
    return [(title, kinds) for title, kinds in groups.items() if kinds]


def pair(cell: dict[str, Any], kind: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """A cell's plain and patched run of a kind (a run of another mode stands in the plain place)."""
    runs = _runs_by_name(cell)
    return runs.get(f"{kind}/plain", runs.get(kind)), runs.get(f"{kind}/patched")


def kind_label(kind: str) -> str:
    return kind[len(REPRO_PREFIX) :] if kind.startswith(REPRO_PREFIX) else kind


def _pair_text(plain: dict[str, Any] | None, patched: dict[str, Any] | None) -> str:
    return " / ".join(STYLES[run_display(run)][1] for run in (plain, patched))


def _cell_status_text(cell: dict[str, Any]) -> str:
    label = STYLES[cell_display(cell)][0]
    why = str(cell.get("reason") or cell_why(cell))
    return f"{label}: {_one_line(why, 80)}" if cell_display(cell) == "error" and why else label


def _md_failures(results: list[dict[str, Any]]) -> list[str]:
    """Collapsible error excerpts of every cell error and every run that did not pass."""
    lines: list[str] = []
    for cell in results:
        items = [(f"{cell['cell']}: {cell_display(cell)}", cell_why(cell))] if cell_display(cell) == "error" else []
        for run in cell["runs"]:
            if run_display(run) in ("fail", "timeout", "error", "unknown"):
                items.append((f"{cell['cell']} · {run['name']}: {run_text(run)}", str(run.get("error") or "")))
        for summary, excerpt in items:
            excerpt = _tail(excerpt.strip(), 3000) or "(no error excerpt)"
            fence = _fence(excerpt)
            lines += ["<details>", f"<summary>{html.escape(_one_line(summary, 160))}</summary>", ""]
            lines += [fence + "text", excerpt, fence, "</details>", ""]
    return lines


def _legend_items() -> list[tuple[str, str, str]]:
    return [(key, STYLES[key][1], text) for key, text in LEGEND.items()]


def render_markdown(results: list[dict[str, Any]]) -> str:
    """The grid as a table: a row per run kind (plain / patched in each square), a column per cell."""
    lines = ["## GRPO compatibility matrix", ""]
    if not results:
        return "\n".join([*lines, "No cell results found.", ""])
    row = lambda cells: "| " + " | ".join(cells) + " |"  # noqa: E731 - a one-line table row
    lines += [row(["Run (plain / patched)", *(f"**{_md(cell['cell'])}**" for cell in results)])]
    lines += ["|" + "---|" * (len(results) + 1)]
    lines += [row(["versions", *(_md(_one_line(versions_text(cell), 120)) for cell in results)])]
    lines += [row(["cell", *(_md(_cell_status_text(cell)) for cell in results)])]
    for title, kinds in grid_groups(results):
        lines += [row([f"**{_md(title)}**", *([""] * len(results))])]
        lines += [row([_md(kind_label(kind)), *(_pair_text(*pair(cell, kind)) for cell in results)]) for kind in kinds]
    lines += ["", f"**Totals:** {totals_line(results)}", ""]
    legend = " · ".join(f"`{short}` {STYLES[key][0]}: {text}" for key, short, text in _legend_items())
    lines += [f"**Legend:** {legend}", ""]
    failures = _md_failures(results)
    if failures:
        lines += ["### Failures", "", *failures]
    return "\n".join(lines)


# ---------------------------------------------------------------- HTML

CSS = """
body { font: 13px/1.35 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1em; color: #212121; }
h1 { font-size: 1.4em; margin: 0 0 .3em; }
.totals { margin: .3em 0 .6em; }
table.grid { border-collapse: collapse; table-layout: fixed; width: 100%; }
table.grid col.kind { width: 15em; }
th, td { border: 1px solid #bdbdbd; padding: .25em .3em; vertical-align: top; text-align: left; }
th, td { overflow-wrap: anywhere; }
thead th { background: #eceff1; position: sticky; top: 0; }
th.cell .name { font-weight: bold; }
.small { font-size: .8em; color: #555; font-weight: normal; }
tr.group th { background: #fafafa; font-weight: bold; padding-top: .6em; }
tbody th { font-weight: normal; }
td.pair { position: relative; padding: 0; }
td.pair summary { list-style: none; cursor: pointer; display: flex; }
td.pair summary::-webkit-details-marker { display: none; }
.half { flex: 1 1 50%; text-align: center; padding: .25em 0; }
.half + .half { border-left: 1px solid #fff; }
td.pair pre { position: absolute; z-index: 2; left: 0; top: 100%; width: 42em; max-height: 24em; }
td.absent { text-align: center; }
summary { cursor: pointer; }
pre { white-space: pre-wrap; word-break: break-word; overflow: auto; background: #fff; color: #212121;
      border: 1px solid #9e9e9e; padding: .4em; margin: 0; font-size: .85em; }
.legend span.swatch { display: inline-block; padding: .1em .5em; margin: .15em .3em .15em 0; border-radius: 3px; }
"""


def _css() -> str:
    rules = [f".st-{key} {{ background: {bg}; color: {fg}; }}" for key, (_, _, bg, fg) in STYLES.items()]
    return CSS + "\n".join(rules) + "\n"


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _panel(summary: str, excerpt: str) -> str:
    """Text that opens on click to show an excerpt."""
    if not excerpt:
        return _e(summary)
    return f"<details><summary>{_e(summary)}</summary><pre>{_e(excerpt)}</pre></details>"


def _html_pair(plain: dict[str, Any] | None, patched: dict[str, Any] | None) -> str:
    """One square: plain | patched, each coloured and labelled; both runs' details on click."""
    if plain is None and patched is None:
        return f'<td class="pair absent st-absent" title="not run">{STYLES["absent"][1]}</td>'
    keys = [run_display(run) for run in (plain, patched)]
    halves = "".join(f'<span class="half st-{key}">{_e(STYLES[key][1])}</span>' for key in keys)
    details = "\n\n".join(run_details(run) for run in (plain, patched) if run is not None)
    panel = f"<details><summary>{halves}</summary><pre>{_e(details)}</pre></details>"
    return f'<td class="pair" title="{_e(details)}">{panel}</td>'


def _html_cell_header(cell: dict[str, Any]) -> str:
    env = cell["env"]
    lines = cell_versions(cell)
    if env.get("status"):
        cached = " (cached)" if env.get("cached") else ""
        seconds = f", {env['seconds']:.0f} s" if isinstance(env.get("seconds"), (int, float)) else ""
        lines.append(f"env {env['status']}{seconds}{cached}")
    device = f" [{cell['device']}]" if cell.get("device") else ""
    small = "<br>".join(_e(line) for line in lines if line)
    title = _e(str(cell.get("description") or cell["cell"]))
    name = f'<span class="name">{_e(cell["cell"])}</span>'
    header = f'{name}<span class="small">{_e(device)}</span><div class="small">{small}</div>'
    return f'<th scope="col" class="cell" title="{title}">{header}</th>'


def _html_status(cell: dict[str, Any]) -> str:
    key = cell_display(cell)
    label = STYLES[key][0]
    why = cell_why(cell)
    wall = cell.get("wall_time_s")
    title = "\n".join(filter(None, [label, f"{wall:.0f} s" if isinstance(wall, (int, float)) else "", why]))
    return f'<td class="status st-{key}" title="{_e(title)}">{_panel(_cell_status_text(cell), why)}</td>'


def _html_legend() -> str:
    items = [
        f'<span class="swatch st-{key}">{_e(short)}</span>{_e(STYLES[key][0])}: {_e(text)}'
        for key, short, text in _legend_items()
    ]
    return '<p class="legend">' + " &nbsp; ".join(items) + "</p>"


def render_html(results: list[dict[str, Any]]) -> str:
    """One self-contained page: run kinds down, cells across, each square plain | patched; details on click."""
    columns = len(results)
    head = "".join(_html_cell_header(cell) for cell in results)
    rows = ['<tr class="status"><th scope="row">cell</th>' + "".join(map(_html_status, results)) + "</tr>"]
    for title, kinds in grid_groups(results):
        rows.append(f'<tr class="group"><th scope="rowgroup" colspan="{columns + 1}">{_e(title)}</th></tr>')
        for kind in kinds:
            squares = "".join(_html_pair(*pair(cell, kind)) for cell in results)
            rows.append(f'<tr><th scope="row" title="{_e(kind)}">{_e(kind_label(kind))}</th>{squares}</tr>')
    body = "\n".join(rows)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>GRPO compatibility matrix</title>
<style>{_css()}</style>
</head>
<body>
<h1>GRPO compatibility matrix</h1>
<p class="totals">{_e(totals_line(results))}</p>
{_html_legend()}
<p class="small">Each square: plain | patched. Hover for the details, click to open them.</p>
<table class="grid">
<colgroup><col class="kind">{"<col>" * columns}</colgroup>
<thead><tr><th scope="col">Run (plain | patched)</th>{head}</tr></thead>
<tbody>
{body}
</tbody>
</table>
</body>
</html>
"""


# ---------------------------------------------------------------- files and CLI


def render_junit(results: list[dict[str, Any]]) -> str:
    """JUnit XML: a test suite per cell, a test case per run (CI systems show failures natively)."""
    from xml.etree import ElementTree

    suites = ElementTree.Element("testsuites", name="GRPO compatibility matrix")
    for cell in results:
        runs = cell["runs"]
        statuses = Counter(run_display(run) for run in runs)
        suite = ElementTree.SubElement(suites, "testsuite", name=cell["cell"], tests=str(max(1, len(runs))))
        suite.set("failures", str(statuses["fail"] + statuses["unknown"]))
        suite.set("errors", str(statuses["error"] + statuses["timeout"] + (not runs and cell_display(cell) == "error")))
        suite.set("skipped", str(statuses["skipped"]))
        ElementTree.SubElement(
            ElementTree.SubElement(suite, "properties"), "property", name="versions", value=versions_text(cell)
        )
        if not runs and cell_display(cell) == "error":
            case = ElementTree.SubElement(suite, "testcase", classname=cell["cell"], name="cell")
            why = cell_why(cell)
            ElementTree.SubElement(case, "error", message=_one_line(why or "no runs", 200)).text = why
        for run in runs:
            case = ElementTree.SubElement(suite, "testcase", classname=cell["cell"], name=run["name"])
            if isinstance(run.get("wall_time_s"), (int, float)):
                case.set("time", f"{run['wall_time_s']:.1f}")
            key = run_display(run)
            tag = {"fail": "failure", "unknown": "failure", "error": "error", "timeout": "error", "skipped": "skipped"}
            if key in tag:
                element = ElementTree.SubElement(case, tag[key], message=_one_line(run_text(run) or key, 200))
                element.text = run_details(run)
            else:
                ElementTree.SubElement(case, "system-out").text = run_details(run)
    ElementTree.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ElementTree.tostring(suites, encoding="unicode") + "\n"


def write_reports(results_dir: str | Path, junit: Path | None = None) -> tuple[Path, Path]:
    """Write summary.md and report.html into the results folder (and JUnit XML to ``junit``); their paths."""
    folder = Path(results_dir)
    results = load_results(folder)
    md_path, html_path = folder / "summary.md", folder / "report.html"
    md_path.write_text(render_markdown(results), encoding="utf-8")
    html_path.write_text(render_html(results), encoding="utf-8")
    if junit is not None:
        junit.parent.mkdir(parents=True, exist_ok=True)
        junit.write_text(render_junit(results), encoding="utf-8")
    return md_path, html_path
