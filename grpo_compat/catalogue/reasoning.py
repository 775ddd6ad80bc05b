"""What a log shows when no catalogue record names it: reasoned from the error, the versions and upstream's code.

Each general class below is defined by the evidence a log shows, not by one thread's wording:

- ``name-missing``: ``ImportError: cannot import name``, ``ModuleNotFoundError`` of a submodule, ``AttributeError``
  of a module or trainer, ``NameError`` of a name another package's guard did not import. The release of the
  package that lacks the name, the package whose code reached for it, and (from the API histories, when they
  hold the package) which releases define it: upgrade, pin, or upgrade the importer.
- ``keyword-not-accepted``: ``X() got an unexpected keyword argument 'k'`` where ``k`` belongs to another class
  (a GRPOTrainer argument passed to GRPOConfig, a Trainer argument GRPOTrainer does not take), or a config field
  added in a later release; positional arity (``takes N positional arguments but M were given``).
- ``missing-package``: ``No module named 'x'`` for a whole distribution, or a name that only a package's
  presence would define: which package, and who needs it.
- ``machine-cannot-run``: a precision setting this machine cannot run (transformers' "Your setup doesn't
  support bf16/gpu", bf16 on MPS, fp16 without CUDA).
- ``vllm-wiring``: the trainer's vLLM path reaching something that is not there: a model loaded without
  unsloth's engine (``vllm_engine``), a server that is not ``trl vllm-serve`` (404 on its weight-sync routes),
  a server never reached.
- ``truncation`` / ``no-learning`` / ``expected-zero-loss``: from logged GRPO metrics: completions clipped at
  the length limit, zero reward spread (no advantage, no gradient), or loss ~0 with a live gradient and reward
  spread, which one iteration per generation (``num_iterations=1``) makes expected.

Imports no upstream library: installed code is read as text (``_installed_source``), never imported.
"""

from __future__ import annotations

import ast
import difflib
import importlib.util
import re
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

from grpo_compat.catalogue.environment import (
    POSIX_ONLY,
    PROVIDED_BY_A_DISTRIBUTION,
    REMOVED_FROM_STDLIB,
    WINDOWS_ONLY,
    known_distribution,
    local_build,
    native_stack,
    platform_of,
    stdlib_names,
)
from grpo_compat.catalogue.evidence import distribution_of_path, frames_before, read_evidence
from grpo_compat.core.versions import distribution_of, release

CLASSES = (
    "refused-by-grpo-compat",
    "name-missing",
    "import-failed",
    "platform",
    "native-build",
    "setting-refused",
    "upstream-check",
    "version-skew",
    "keyword-not-accepted",
    "signature-mismatch",
    "missing-package",
    "machine-cannot-run",
    "vllm-wiring",
    "truncation",
    "no-learning",
    "expected-zero-loss",
)
NOT_FAILURES = ("expected-zero-loss",)  # notes that a metric is expected: shown, never offered as the cause


@dataclass(frozen=True)
class Finding:
    cls: str  # one of CLASSES
    name: str  # the name, setting, package or metric at fault
    confident: bool  # the evidence names the cause; False: a likely cause the data cannot confirm
    cause: str
    fix: str
    evidence: str  # the log line it rests on
    package: str | None = None  # whose release lacks the name
    importer: str | None = None  # whose code reached for it
    callable: str | None = None  # what rejected a keyword
    belongs_to: str | None = None  # the class a rejected keyword belongs to
    remedy: str | None = None  # "upgrade" (package), "upgrade-importer", "pin" (package)
    data: str = ""  # what the conclusion was read from: "API histories", "the installed trl 1.16.0", "the log"
    module: str | None = None  # the module a missing name was looked up in
    version: str | None = None  # the release of ``package`` the finding states a fact about
    code: str = ""  # whose code raised, whose called it, and which release pair is in question (the frames)

    @property
    def certainty(self) -> str:
        """ "asserted" (the evidence names it) or "offered" (likely; the data cannot confirm it)."""
        return "asserted" if self.confident else "offered"

    def to_dict(self) -> dict:
        return {"certainty": self.certainty, **{k: v for k, v in vars(self).items() if v not in (None, "")}}


# --- versions a log states -----------------------------------------------------------------------------------

_ALIASES = {"pytorch": "torch", "swift": "ms-swift", "ms_swift": "ms-swift", "hf-hub": "huggingface-hub"}
_V = r"v?(\d+(?:\.\d+)+(?:[.+-]?(?:dev|rc|post|a|b)\d*)?(?:\+[\w.]+)?)"
# "- TRL version: 0.13.0", "- **TRL version:** 0.19.1", "trl = 0.15.2", "- unsloth: 2025.9.9", "trl==0.25.0",
# "trl    0.25.0" (pip list): a line that is a name and a version and nothing else.
_STATED = re.compile(
    rf"^[ \t]*(?:[-*][ \t]*)?(?:\*\*)?`?(?P<name>[A-Za-z][\w.-]*?)`?(?:[ \t]+version)?(?:\*\*)?[ \t]*"
    rf"(?:==|=|:|[ \t])(?:\*\*)?[ \t]*{_V}[ \t]*$",
    re.M | re.I,
)
# unsloth's banner: "Unsloth 2026.1.4: Fast Qwen2 patching. Transformers: 4.57.6. vLLM: 0.10.2."
_UNSLOTH_BANNER = re.compile(rf"Unsloth {_V}: Fast .*?Transformers: {_V}\.(?: vLLM: {_V}\.)?")
# transformers' require_version, which packages use for their own floors: "... is required for a normal
# functioning of this module, but found peft==0.14.0."
_BUT_FOUND = re.compile(rf"but found ([A-Za-z][\w.-]*)=={_V}")
# A pin inside a sentence: "I use trl==0.15.0, but ..."
_INLINE_PIN = re.compile(rf"(?<![\w.-])([A-Za-z][\w.-]*)=={_V}")
# pip's own lines: "Successfully installed unsloth-2025.5.8 unsloth_zoo-2025.5.10"
_PIP_INSTALLED = re.compile(r"Successfully installed ([^\n]+)")


def _distribution_name(name: str) -> str:
    name = name.lower().replace("_", "-")
    return _ALIASES.get(name, name)


STATED_SPAN = 200_000  # a log's first and last characters searched for name-version lines (env dumps, pip freeze)


class StatedVersions(dict):
    """Distribution -> version, with ``weak``: those read only from a pin inside a sentence ("pinning trl==0.19.0
    fixed it"), which may name the release that worked rather than the one that failed."""

    weak: frozenset[str] = frozenset()
    trusted: frozenset[str] = frozenset()  # given on the command line, or installed on the machine the log is from


def stated_versions(text: str, tracked: dict[str, str]) -> StatedVersions:
    """Every distribution's version a log states, first statement wins; wider than ``tracked`` (any package).

    ``tracked``: the tracked distributions' versions the caller read from the log (log_matching.versions_in, which
    reads the whole log, ~1 s for 15 MB: read once, by the caller).
    """
    found = dict(tracked)

    def note(name: str, version: str) -> None:
        found.setdefault(_distribution_name(name), version)

    ends = text if len(text) <= 2 * STATED_SPAN else text[:STATED_SPAN] + "\n" + text[-STATED_SPAN:]
    for line in _STATED.finditer(ends):
        note(line.group("name"), line.group(2))
    for banner in _UNSLOTH_BANNER.finditer(ends):
        note("unsloth", banner.group(1))
        note("transformers", banner.group(2))
        if banner.group(3):
            note("vllm", banner.group(3))
    for line in _PIP_INSTALLED.finditer(ends):
        for item in line.group(1).split():
            name, _, version = item.rpartition("-")
            if name and re.match(r"\d", version):
                note(name, version)
    for found_line in _BUT_FOUND.finditer(ends):
        note(found_line.group(1), found_line.group(2))
    strong = set(found)
    for pin in _INLINE_PIN.finditer(ends):  # last: the weakest statement
        note(pin.group(1), pin.group(2))
    stated = StatedVersions(found)
    stated.weak = frozenset(found) - strong
    return stated


# --- the data: API histories when they hold a package, else the installed release's source ------------------


def _history(distribution: str):
    """The API history of a distribution (grpo_compat.histories), or None when there is none for it."""
    from grpo_compat.histories import load

    return load(distribution)


@cache
def _installed_root(top_module: str) -> Path | None:
    """The folder of an installed top-level package, found without importing it."""
    try:
        spec = importlib.util.find_spec(top_module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


@cache
def _installed_source(module: str) -> ast.Module | None:
    root = _installed_root(module.split(".", 1)[0])
    if root is None:
        return None
    parts = module.split(".")[1:]
    for path in (root.joinpath(*parts).with_suffix(".py"), root.joinpath(*parts, "__init__.py")):
        if path.is_file():
            try:
                return ast.parse(path.read_text(encoding="utf-8"))
            except (OSError, SyntaxError, ValueError):
                return None
    return None


def _installed_version(distribution: str) -> str | None:
    from grpo_compat.core.versions import installed_version

    return installed_version(distribution)


def _installed_parameters(module: str, qualname: str) -> set[str] | None:
    """Parameter names of ``Class.method`` (or a dataclass's fields for ``Class``) in the installed source."""
    tree = _installed_source(module)
    if tree is None:
        return None
    cls_name, _, method = qualname.partition(".")
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == cls_name:
            if not method:
                return {
                    s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                }
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == method:
                    a = item.args
                    return {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
    return None


# Where the classes a GRPO log names live: the class a keyword may belong to instead.
_GRPO_CLASSES = {
    "GRPOConfig": ("trl", "trl.trainer.grpo_config", "GRPOConfig", None),
    "GRPOTrainer": ("trl", "trl.trainer.grpo_trainer", "GRPOTrainer", "__init__"),
    "Trainer": ("transformers", "transformers.trainer", "Trainer", "__init__"),
}
# For a rejected keyword: which other class to look in. A config that rejects it -> its trainer; a trainer -> its
# base (transformers' Trainer), since a user passes Trainer's arguments expecting GRPOTrainer to take them.
_SIBLING = {"GRPOConfig": "GRPOTrainer", "GRPOTrainer": "Trainer"}


def _role(callable_name: str) -> str | None:
    """``AxolotlGRPOConfig.__init__`` -> ``GRPOConfig``: the trl class a (sub)class name stands for."""
    cls = callable_name.split(".")[-2] if callable_name.endswith("__init__") else callable_name.split(".")[-1]
    for role in ("GRPOConfig", "GRPOTrainer"):
        if cls.endswith(role):
            return role
    return "Trainer" if cls == "Trainer" else None


def _takes(role: str, keyword: str, versions: dict[str, str]) -> tuple[bool | None, str]:
    """Whether the trl / transformers class ``role`` takes ``keyword``, and the data that says so."""
    distribution, module, cls, method = _GRPO_CLASSES[role]
    version = versions.get(distribution)
    history = _history(distribution)
    qualname = f"{module}.{cls}" + (f".{method}" if method else "")
    if history is not None and version and history.nearest(version):
        at = history.nearest(version)
        if method:
            signature = history.signature(qualname, at)
            if signature is not None:
                return any(p.name == keyword for p in signature.parameters), f"{distribution} {at} (API histories)"
        else:
            return keyword in history.fields(qualname, at), f"{distribution} {at} (API histories)"
    if history is not None and not version:  # no version: every release the histories hold
        if method:
            spans = history.signature_spans(qualname)
            taken = any(p.name == keyword for _, _, signature in spans for p in signature.parameters)
        else:
            spans = history._data["fields"].get(qualname, [])
            taken = any(keyword in fields for _, _, fields in spans)
        if spans:
            every = f"{distribution} {history.releases[0]}-{history.newest}"
            return taken, f"{every}, {'some releases' if taken else 'no release'} (API histories)"
    installed = _installed_version(distribution)
    if version and installed != version:
        return None, ""  # the installed release is not the run's: its source says nothing of the run
    names = _installed_parameters(module, cls + (f".{method}" if method else ""))
    if names is None:
        return None, ""
    return keyword in names, f"the installed {distribution} {installed}"


# --- reading the error ---------------------------------------------------------------------------------------

_IMPORT_NAME = re.compile(r"cannot import name '(?P<name>[\w.]+)' from '(?P<module>[\w.]+)'(?: \((?P<path>[^)\n]*)\))?")
_NO_MODULE = re.compile(r"No module named '?(?P<module>[A-Za-z_][\w.]*)'?")
_ATTR_MODULE = re.compile(r"module '?(?P<module>[\w.]+)'? has no attribute '?(?P<name>\w+)'?")
_ATTR_OBJECT_QUOTED = re.compile(r"'(?P<owner>\w+)' (?:object )?has no attribute '(?P<name>\w+)'")
_UNEXPECTED_KEYWORD = re.compile(
    r"(?P<callable>[\w.]+)\(\) got (?:an )?unexpected keyword (?:argument )?'(?P<name>\w+)'"
)
_MISSING_ARGUMENT = re.compile(
    r"(?P<callable>[\w.]+)\(\) missing \d+ required (?:positional|keyword-only) arguments?: '(?P<name>\w+)'"
)
_ARITY = re.compile(
    r"(?P<callable>[\w.]+)\(\) takes (?P<takes>\d+) positional arguments? but (?P<given>\d+) (?:were|was) given"
)
_NAME_ERROR = re.compile(r"NameError: name '(?P<name>\w+)' is not defined")
_PRECISION = re.compile(
    r"Your setup doesn't support bf16/gpu|BFloat16 is not supported on MPS"
    r"|fp16.{0,60}can only be used on CUDA"
)
_TRL_SERVER_ROUTES = re.compile(
    r"vllm_client\.py.*?\n.*?(?:init_communicator|get_world_size)[\s\S]{0,400}?Request failed: 404"
)
_SERVER_DOWN = re.compile(r"Server is not up yet|Connection refused[\s\S]{0,200}?/health")


def _matches(pattern: re.Pattern, text: str, literal: str):
    """``pattern``'s matches on the lines holding ``literal``: a str.find per line instead of a regex per position."""
    start = text.find(literal)
    while start != -1:
        line_start = text.rfind("\n", 0, start) + 1
        line_end = text.find("\n", start)
        line_end = len(text) if line_end == -1 else line_end
        # a match may run onto the next lines (a traceback's routes): give it a few hundred characters more
        yield from pattern.finditer(text, line_start, min(len(text), line_end + 600))
        start = text.find(literal, line_end)


def _line(text: str, position: int) -> str:
    start = text.rfind("\n", 0, position) + 1
    end = text.find("\n", position)
    return text[start : end if end != -1 else len(text)].strip()[:300]


def _importer(text: str, position: int) -> str | None:
    """The package whose code raised: the innermost traceback frame before ``position``, when it is in an install
    (site-packages, unsloth's compiled cache, an editable checkout: evidence.distribution_of_path)."""
    frames = frames_before(text, position)
    return frames[-1].distribution if frames else None


def _importing_module(text: str, position: int) -> str | None:
    """The dotted module of the innermost frame before ``position`` (an installed file's), else None."""
    frames = frames_before(text, position)
    return frames[-1].module if frames else None


def _spans_text(spans: list[tuple[str, str]]) -> str:
    return ", ".join(first if first == last else f"{first}-{last}" for first, last in spans)


# Distributions released in step, whose releases each declare the other's (unsloth declares unsloth_zoo>=X): an
# upgrade of one names the release of the other that goes with it.
_RELEASED_TOGETHER = {"unsloth-zoo": "unsloth", "unsloth": "unsloth-zoo"}


def _release_spans(history, releases: list[str]) -> list[tuple[str, str]]:
    """Releases of ``history`` as (first, last) spans of consecutive ones."""
    wanted = set(releases)
    spans: list[tuple[str, str]] = []
    previous_in = False
    for each in history.releases:
        if each in wanted:
            spans[-1:] = [(spans[-1][0], each)] if previous_in else [*spans[-1:], (each, each)]
        previous_in = each in wanted
    return spans


def _partner_requiring(partner: str, distribution: str, first: str) -> str | None:
    """The first ``partner`` release from which on every release declares ``distribution>=first`` or newer (the one
    before ``first`` no longer accepted): the unsloth that goes with unsloth_zoo ``first``."""
    partner_history, history = _history(partner), _history(distribution)
    if partner_history is None or history is None or first not in history.releases:
        return None
    index = history.releases.index(first)
    if index == 0:
        return None
    accepting_older = set(partner_history.releases_accepting(distribution, history.releases[index - 1]))
    found = None
    for each in reversed(partner_history.releases):
        if each in accepting_older or not partner_history.declared(each, distribution):
            break
        found = each
    return found


def _importer_upgrade(
    importer: str | None, importing_module: str | None, missing_module: str, name: str | None
) -> tuple[str, str] | None:
    """(fix, why) when the importer's own histories say from which release on its module ``importing_module`` no
    longer imports ``missing_module`` (or ``name`` from it) unconditionally: it stops importing it, or imports it
    under a guard that catches the failure. None where the importer has no histories, or no such release is
    certain (still imported unconditionally by its newest release)."""
    history = _history(importer) if importer else None
    if history is None or not importing_module or not history.module_spans(importing_module):
        return None

    def reaches(each) -> bool:
        if name is None:
            return each.module == missing_module or each.module.startswith(missing_module + ".")
        return each.module == missing_module and name in each.names

    unguarded = []
    for each in history.releases:
        imports = [i for i in history.imports(importing_module, each) if reaches(i)]
        unguarded.append(any(i.guard is None for i in imports))
    if not any(unguarded) or unguarded[-1]:
        return None
    last = max(i for i, flag in enumerate(unguarded) if flag)
    first = history.releases[last + 1]
    guards = {i.guard for i in history.imports(importing_module, first) if reaches(i)}
    what = f"'{name}' from {missing_module}" if name else missing_module
    how = f"imports {what} only under {' / '.join(sorted(guards))}" if guards else f"no longer imports {what}"
    importing = [each for each, flag in zip(history.releases, unguarded, strict=True) if flag]
    why = (
        f"{importing_module} imports {what} unconditionally in {importer} "
        f"{_spans_text(_release_spans(history, importing))}, and from {first} on {how}"
    )
    fix = f"pip install --upgrade '{importer}>={first}'"
    partner = _RELEASED_TOGETHER.get(importer)
    if partner:
        paired = _partner_requiring(partner, importer, first)
        fix += f" '{partner}>={paired}'" if paired else f" {partner}"
        why += (
            f" ({partner} {paired} on declares {importer}>={first} or newer)"
            if paired
            else f" (upgrade {partner} with it)"
        )
    return fix, why


def _name_missing(
    name: str,
    module: str,
    evidence: str,
    importer: str | None,
    versions: dict[str, str],
    trl_vllm: dict | None,
    submodule: bool = False,
    importing_module: str | None = None,
) -> Finding:
    """``name`` missing from ``module`` (with ``submodule``, the module ``module.name`` missing), which
    ``importer``'s code (its module ``importing_module``, when the frame says) reached for."""
    package = distribution_of(module).replace("_", "-")
    version = versions.get(package)
    importer = importer if importer != package else None
    where = f"{module} of {package} {version}" if version else f"{module} ({package}, version not in the log)"
    cause = f"{where} has no '{name}'" + (f", which {importer}'s code imports" if importer else "")
    history = _history(package)
    if history is not None and history.module_spans(module):
        full = f"{module}.{name}"
        spans = (history.name_spans(module, name) or history.module_spans(full)) if submodule else None
        spans = spans if spans is not None else history.name_spans(module, name)
        moved = [] if submodule else [(m, f, last) for m, f, last in history.where(name) if m != module]
        upgrade = _importer_upgrade(
            importer, importing_module, full if submodule else module, None if submodule else name
        )
        newest = history.nearest(version) if version else None
        if newest and (history.has(full, None, version) if submodule else history.has(module, name, version)):
            if package in getattr(versions, "trusted", ()):  # given, or this machine's install: not the release
                return _name_present(name, module, package, version, importer, evidence, spans)
            # The log states a release that has the name, so the run used another (an environment dump taken at
            # another time, a pin in a sentence): what every release says, offered, never asserted.
            stated = f"the log states {package} {version}, which has '{name}' (API histories), so the run used another"
            stated += " release or install; "
            if spans:
                finding = _name_missing_in_every_release(
                    name, module, package, importer, evidence, spans, moved, history, upgrade
                )
                return replace(finding, confident=False, cause=stated + finding.cause)
            return _name_present(name, module, package, version, importer, evidence, spans)
        if version is None and (spans or moved):  # no version: what every release in the histories says
            return _name_missing_in_every_release(
                name, module, package, importer, evidence, spans, moved, history, upgrade
            )
        if spans and newest and release(spans[0][0]) > release(newest):
            return Finding(
                "name-missing",
                name,
                True,
                f"{cause}: it first appears in {package} {spans[0][0]}.",
                f"pip install '{package}>={spans[0][0]}'",
                evidence,
                package,
                importer,
                remedy="upgrade",
                data="API histories",
                module=module,
                version=version,
            )
        if spans and newest and release(spans[-1][1]) < release(newest):
            last = spans[-1][1]
            fix = f"pip install '{package}<={last}'" + (f", or {upgrade[0]}" if upgrade else "")
            fix += f", or upgrade {importer}" if importer and not upgrade else ""
            moved_text = f"; it moved to {moved[-1][0]}" if moved else ""
            return Finding(
                "name-missing",
                name,
                True,
                f"{cause}: {package} had it in {_spans_text(spans)} and removed it after {last}{moved_text}"
                + (f"; {upgrade[1]}." if upgrade else "."),
                fix,
                evidence,
                package,
                importer,
                remedy="upgrade-importer" if importer else "pin",
                data="API histories",
                module=module,
                version=version,
            )
    module_spans = history.module_spans(module) if history is not None else []
    if importer and module_spans and module_spans[0][0] == history.releases[0] and not spans:
        # The module is in every release from the histories' first one on, and none of them has the name in it:
        # the importer's code was written for an older release (or a fork), not for any release after.
        first = history.releases[0]
        single = len({m for m, _, _ in moved}) == 1  # several modules with the name: none is the one meant
        elsewhere = f"; {moved[-1][0]} has it in {moved[-1][1]}-{moved[-1][2]}" if moved and single else ""
        return Finding(
            "name-missing",
            name,
            False,
            f"{cause}: no {package} release with {module} ({_spans_text(module_spans)}) has '{name}' in it, so "
            f"{importer}'s code was written for a {package} older than {first} (or a fork){elsewhere}.",
            upgrade[0] if upgrade else f"upgrade {importer} to a release made for {package} {version or 'today'}",
            evidence,
            package,
            importer,
            remedy="upgrade-importer",
            data="API histories",
            module=module,
            version=version,
        )
    if trl_vllm and package == "vllm" and trl_vllm.get("status") == "outside" and trl_vllm.get("trl_declares"):
        declared = trl_vllm["trl_declares"]
        return Finding(
            "name-missing",
            name,
            True,
            f"{cause}; trl {trl_vllm['trl']} declares vllm{declared} (its own warning in the log), "
            f"so this vLLM is newer than the trl supports.",
            f"pip install 'vllm{declared}', or a trl that supports vLLM {version}",
            evidence,
            package,
            importer or "trl",
            remedy="pin",
            data="trl's warning in the log",
        )
    fix = (
        f"install a {package} release that has '{name}'"
        + (f", or the {importer} release made for {package} {version}" if importer and version else "")
        + (
            ""
            if history is not None and history.module_spans(module)
            else f" (grpo_compat has no API history of {module} to say which releases define it)"
        )
    )
    return Finding(
        "name-missing",
        name,
        True,
        cause + ".",
        fix,
        evidence,
        package,
        importer,
        data="the log",
        module=module,
        version=version,
    )


def _name_present(
    name: str, module: str, package: str, version: str, importer: str | None, evidence: str, spans: list
) -> Finding:
    """The histories say the release has the name: the import failed for a reason other than the release."""
    top = module.split(".")[0]
    return Finding(
        "import-failed",
        name,
        False,
        f"{package} {version} has '{name}' in {module} (in {package} {_spans_text(spans)}), so the release is not "
        f"why the import failed: the {package} the run imported is another one (a local file or folder named {top} "
        "shadowing it, another environment's install), a partial install, or an import that failed inside it "
        "(the error above this one).",
        f'run python -c "import {top}; print({top}.__file__)" in the run\'s environment: remove what shadows it, '
        f"or reinstall {package}",
        evidence,
        package,
        importer,
        data="API histories",
        module=module,
        version=version,
    )


def _name_missing_in_every_release(
    name: str,
    module: str,
    package: str,
    importer: str | None,
    evidence: str,
    spans: list,
    moved: list,
    history,
    upgrade: tuple[str, str] | None = None,
) -> Finding:
    """No version stated: the answer every release of the histories gives, asserted only where it is one answer."""
    first, newest = history.releases[0], history.newest
    who = f", which {importer}'s code imports" if importer else ""
    common = {"package": package, "importer": importer, "data": "API histories", "module": module}
    top = module.split(".")[0]
    if len(spans) == 1 and spans[0] == (first, newest):
        return Finding(
            "name-missing",
            name,
            False,
            f"every {package} release from {first} to {newest} has '{name}' in {module}{who}: the run's {package} "
            f"is older than {first}, or (when it is not) the {package} it imported is not a whole install of one "
            f"(a local file or folder named {top} shadowing it, a partial install).",
            f"pip install '{package}>={first}'; where it is already that new, "
            f'python -c "import {top}; print({top}.__file__)" shows what shadows it',
            evidence,
            remedy="upgrade",
            **common,
        )
    if len(spans) == 1 and spans[0][1] == newest:  # added later: the run's release is older
        return Finding(
            "name-missing",
            name,
            True,
            f"{module} has '{name}' from {package} {spans[0][0]} on{who}: the run's {package} (no version in the "
            "log) is older.",
            f"pip install '{package}>={spans[0][0]}'",
            evidence,
            remedy="upgrade",
            **common,
        )
    if len(spans) == 1 and spans[0][0] == first:  # removed: the run's release is newer
        last = spans[0][1]
        moved_text = f"; it moved to {moved[-1][0]}" if moved else ""
        return Finding(
            "name-missing",
            name,
            True,
            f"{module} had '{name}' in {package} {first}-{last} only{who}: the run's {package} (no version in the "
            f"log) is newer{moved_text}" + (f"; {upgrade[1]}." if upgrade else "."),
            f"pip install '{package}<={last}'"
            + (f", or {upgrade[0]}" if upgrade else f", or upgrade {importer}" if importer else ""),
            evidence,
            remedy="upgrade-importer" if importer else "pin",
            **common,
        )
    if spans:
        where = f"it is in {package} {_spans_text(spans)}"
    else:
        where = f"no {package} release from {first} to {newest} has it"
    elsewhere = f"; {moved[-1][0]} has it in {moved[-1][1]}-{moved[-1][2]}" if moved else ""
    return Finding(
        "name-missing",
        name,
        False,
        f"{module} lacks '{name}' in the run's {package} (no version in the log){who}: {where}{elsewhere}.",
        f"install the {package} release the code was written for ({_spans_text(spans)})"
        if spans
        else f"install the {package} release or fork the code was written for",
        evidence,
        **common,
    )


def _missing_module(module: str, evidence: str, importer: str | None, platform: str | None) -> Finding:
    """``No module named 'x'`` for a whole top-level module: a distribution to install, or a fact of the platform or
    the Python build that no ``pip install`` changes (the standard library, POSIX- or Windows-only modules)."""
    who = f"{importer}'s code imports it" if importer else "the run imports it"
    common = {"importer": importer, "data": "the standard library's module list"}
    if module in PROVIDED_BY_A_DISTRIBUTION:
        package = PROVIDED_BY_A_DISTRIBUTION[module]
        cause = f"{module} left Python's standard library in 3.12; {who}, and {package} provides it."
        return Finding(
            "missing-package", package, True, cause, f"pip install {package}", evidence, package=package, **common
        )
    if module in POSIX_ONLY or module in WINDOWS_ONLY:
        only, other = ("POSIX (Linux, macOS)", "Windows") if module in POSIX_ONLY else ("Windows", "Linux or macOS")
        on = f" (the log is from {platform})" if platform else ""
        return Finding(
            "platform",
            module,
            True,
            f"{module} is a {only}-only module of Python's standard library: Python on {other} has none{on}, and no "
            f"pip package provides it; {who}.",
            f"run on {'Linux (or WSL2 on Windows)' if module in POSIX_ONLY else 'Windows'}, or use a release of "
            f"{importer or 'the code'} that does without {module} on {other}",
            evidence,
            **common,
        )
    removed = next((python for python, names in REMOVED_FROM_STDLIB.items() if module in names), None)
    if removed:
        return Finding(
            "platform",
            module,
            True,
            f"{module} left Python's standard library in Python {removed}; {who}: that code predates Python {removed}.",
            f"run on a Python older than {removed}, or a release of {importer or 'the code'} made for Python {removed}",
            evidence,
            **common,
        )
    if module in stdlib_names():  # _lzma, _ctypes, _sqlite3, tkinter: a Python built without a system library
        return Finding(
            "platform",
            module,
            True,
            f"{module} is part of Python's standard library, and this Python was built without it (a source or pyenv "
            f"build that lacked its system library); {who}. No pip package provides it.",
            "install the system library it needs and rebuild Python, or use a prebuilt Python (python.org, conda, "
            "uv python install)",
            evidence,
            **common,
        )
    package = known_distribution(module)
    if package:
        return Finding(
            "missing-package",
            package,
            True,
            f"{package} is not installed"
            + (f" (it provides the module {module})" if package != module else "")
            + f"; {who}.",
            f"pip install {package}" + (f" (or check that {importer} declares it)" if importer else ""),
            evidence,
            package=package,
            importer=importer,
            data="the log",
        )
    package = distribution_of(module).replace("_", "-")
    return Finding(
        "missing-package",
        package,
        False,
        f"no module {module} is installed; {who}. Which distribution provides it is not known here.",
        f"install the distribution that provides the module {module} (most are named like it: {package}; check "
        "the project's install instructions)",
        evidence,
        package=package,
        importer=importer,
        data="the log",
    )


# vLLM classes trl and ms-swift construct with keywords a vLLM release may not know yet (or any more).
_VLLM_CLASSES = ("EngineArgs", "AsyncEngineArgs", "LLM", "SamplingParams", "LLMEngine")


def _reward_contract(callable_name: str, name: str, evidence: str, missing: bool = False) -> Finding:
    """A reward function and the keywords GRPO calls it with: prompts, completions, completion_ids, every column."""
    if missing:
        cause = (
            f"{callable_name} requires '{name}', which GRPO passes only as a dataset column of that name: the "
            "rows reaching it have no such column (absent, or dropped before the reward ran)."
        )
        fix = f"give the dataset a '{name}' column (keep it: remove_unused_columns=False), or make it optional"
    else:
        cause = (
            f"the trainer calls {callable_name} with keyword arguments (prompts, completions, completion_ids "
            f"and the dataset's columns) it does not declare, here '{name}'."
        )
        fix = f"give {callable_name} a **kwargs parameter"
    return Finding("reward-contract", name, True, cause, fix, evidence, callable=callable_name, data="the log")


def _keyword(callable_name: str, keyword: str, evidence: str, versions: dict[str, str]) -> Finding | None:
    role = _role(callable_name)
    cls = callable_name.removesuffix(".__init__").split(".")[-1]
    if role is None and cls in _VLLM_CLASSES:
        version = versions.get("vllm")
        return Finding(
            "keyword-not-accepted",
            keyword,
            True,
            f"vLLM's {cls} has no '{keyword}'"
            + (f" in vllm {version}" if version else "")
            + ": the caller was written for a vLLM release that has it.",
            "install the vLLM release the caller (trl / ms-swift) declares",
            evidence,
            package="vllm",
            callable=cls,
            data="the log",
        )
    if role is None and "reward" in cls.lower():
        return _reward_contract(cls, keyword, evidence)
    if role is None:
        return None
    sibling = _SIBLING.get(role)
    if sibling:
        takes_here, here = _takes(role, keyword, versions)
        takes_there, there = _takes(sibling, keyword, versions)
        if takes_there and not takes_here:
            # A config's keyword belongs on its trainer; a trainer's base argument GRPOTrainer does not pass on.
            fix = (
                f"pass {keyword}= to {sibling}(...), not to {role}(...)"
                if role == "GRPOConfig"
                else f"drop {keyword}= from {role}(...): it takes no such argument, though {sibling} does"
            )
            return Finding(
                "keyword-not-accepted",
                keyword,
                True,
                f"'{keyword}' is an argument of {sibling} ({there}), not of {role} ({here}): "
                f"{callable_name} rejects it.",
                fix,
                evidence,
                callable=role,
                belongs_to=sibling,
                data=there if there == here else f"{there}; {here}",
            )
        if role == "GRPOTrainer" and takes_here is False:
            return Finding(
                "keyword-not-accepted",
                keyword,
                True,
                f"GRPOTrainer.__init__ has no parameter '{keyword}' ({here}).",
                f"drop {keyword}= from GRPOTrainer(...)",
                evidence,
                callable=role,
                data=here,
            )
    if role == "GRPOConfig":
        from grpo_compat.settings.history import load

        trl = load("trl")
        version = versions.get("trl")  # never the installed one: the log may be of another machine
        spans = trl.spans(keyword)
        at = trl.nearest(version) if version else None
        if spans and at and release(spans[0][0]) > release(at):
            return Finding(
                "keyword-not-accepted",
                keyword,
                True,
                f"GRPOConfig has '{keyword}' from trl {spans[0][0]}; trl {version} does not.",
                f"pip install 'trl>={spans[0][0]}'",
                evidence,
                package="trl",
                callable=role,
                remedy="upgrade",
                data="grpo_compat's settings history of trl",
            )
        refused = _refused_setting(keyword, "trl", "python", version, evidence)
        if refused is not None:  # a GRPOConfig field of other releases: its history, with or without a version
            return replace(refused, cls="keyword-not-accepted", callable=role)
    return None


def _errors(text: str, versions: dict[str, str], trl_vllm: dict | None) -> list[tuple[int, Finding]]:
    found: list[tuple[int, Finding]] = []
    for m in _matches(_IMPORT_NAME, text, "cannot import name"):
        found.append(
            (
                m.start(),
                _name_missing(
                    m.group("name"),
                    m.group("module"),
                    _line(text, m.start()),
                    _importer(text, m.start()),
                    versions,
                    trl_vllm,
                    importing_module=_importing_module(text, m.start()),
                ),
            )
        )
    for m in _matches(_NO_MODULE, text, "No module named"):
        module = m.group("module")
        evidence = _line(text, m.start())
        if "WARNING" in evidence or "Warning:" in evidence:  # logged and carried on: not what stopped the run
            continue
        importer = _importer(text, m.start())
        if "." in module:  # a submodule missing from an installed package: the package's release lacks it
            parent, _, leaf = module.rpartition(".")
            finding = _name_missing(
                leaf, parent, evidence, importer, versions, trl_vllm, True, _importing_module(text, m.start())
            )
            found.append((m.start(), finding))
        else:
            found.append((m.start(), _missing_module(module, evidence, importer, platform_of(text))))
    for m in _matches(_ATTR_MODULE, text, "has no attribute"):
        finding = _name_missing(
            m.group("name"), m.group("module"), _line(text, m.start()), _importer(text, m.start()), versions, trl_vllm
        )
        quoted = text[m.end() - 1] == "'" or text[m.end() : m.end() + 1] == "'"
        # without quotes (lost in pasting) the name's end is a guess: offered, not asserted
        found.append((m.start(), finding if quoted else replace(finding, confident=False)))
    for m in _matches(_ATTR_OBJECT_QUOTED, text, "has no attribute"):
        finding = _object_attribute(m.group("owner"), m.group("name"), text, m.start(), versions)
        if finding is not None:
            found.append((m.start(), finding))
    for m in _matches(_UNEXPECTED_KEYWORD, text, "unexpected keyword"):
        finding = _keyword(m.group("callable"), m.group("name"), _line(text, m.start()), versions)
        if finding is None:
            finding = _call_over_releases(m.group("callable"), "keyword", m.group("name"), text, m.start(), versions)
        if finding is not None:
            found.append((m.start(), finding))
    for m in _matches(_ARITY, text, "positional argument"):
        finding = _arity(m, text, versions) or _call_over_releases(
            m.group("callable"), "positional", m.group("given"), text, m.start(), versions
        )
        if finding is not None:
            found.append((m.start(), finding))
    for m in _matches(_MISSING_ARGUMENT, text, "required positional argument"):
        if "reward" in m.group("callable").lower():
            found.append(
                (
                    m.start(),
                    _reward_contract(m.group("callable"), m.group("name"), _line(text, m.start()), missing=True),
                )
            )
        else:
            finding = _call_over_releases(m.group("callable"), "missing", m.group("name"), text, m.start(), versions)
            if finding is not None:
                found.append((m.start(), finding))
    for m in _matches(_NAME_ERROR, text, "is not defined"):
        finding = _name_error(m.group("name"), _line(text, m.start()), text, m.start(), versions)
        if finding is not None:
            found.append((m.start(), finding))
    for m in (m for literal in ("bf16", "BFloat16", "fp16", "FP16") for m in _matches(_PRECISION, text, literal)):
        setting = "fp16" if "fp16" in m.group().lower() else "bf16"
        found.append(
            (
                m.start(),
                Finding(
                    "machine-cannot-run",
                    setting,
                    True,
                    f"{setting} is set, and this machine cannot run it (no GPU with {setting} support: CPU-only, "
                    "an older GPU, "
                    "or Apple MPS).",
                    f"set {setting} false here (fp32 on CPU), or run on a GPU that supports {setting}",
                    _line(text, m.start()),
                    data="the log",
                ),
            )
        )
    for m in _matches(_TRL_SERVER_ROUTES, text, "vllm_client.py"):
        found.append(
            (
                m.start(),
                Finding(
                    "vllm-wiring",
                    "trl vllm-serve",
                    True,
                    "vllm_mode='server' reached a server without trl's weight-sync routes (/get_world_size/, "
                    "/init_communicator/): a plain `vllm serve`, not `trl vllm-serve`.",
                    "start the server with `trl vllm-serve --model ...`",
                    _line(text, m.end() - 1),
                    data="the log",
                ),
            )
        )
    return found


_SHARED_LIBRARY_MISSING = re.compile(r"(?P<library>lib[\w+-]+\.so(?:\.\d+)*): cannot open shared object file")
_UNDEFINED_SYMBOL = re.compile(r"(?P<extension>[^\s:'\"]+\.(?:so|pyd))[^\n]*?: undefined symbol: (?P<symbol>\S+)")
_TORCH_SYMBOL = re.compile(r"^_ZN(?:K?\d*)(?:3c10|2at|5torch|3c1010)|c10::|at::|torch::")
_NO_CUDA = re.compile(r"Torch not compiled with CUDA enabled|Found no NVIDIA driver on your system")


def _native_findings(text: str, versions: dict[str, str]) -> list[tuple[int, Finding]]:
    """Errors of compiled code: a CUDA / ROCm / Ascend runtime library the build needs and the machine lacks, an
    extension built against another torch (``undefined symbol``), torch without the accelerator the run asks for."""
    found: list[tuple[int, Finding]] = []
    torch = versions.get("torch")
    torch_build = local_build(torch)
    for m in _matches(_SHARED_LIBRARY_MISSING, text, "cannot open shared object file"):
        library = m.group("library")
        stack = native_stack(library)
        if stack is None:
            continue
        name, major = stack
        frames = frames_before(text, m.start())
        loader = next((f.distribution for f in reversed(frames) if f.distribution), None)
        needs = f"{name} {major}" if major else name
        on_torch = (
            f"torch {torch} is built for {torch_build}" if torch_build else "the installed torch is another build"
        )
        found.append(
            (
                m.start(),
                Finding(
                    "native-build",
                    library,
                    True,
                    f"{loader or 'a compiled package'}'s compiled code needs {library} ({needs}), which this machine "
                    f"does not have: its wheel was built for {needs}, and {on_torch} (or no {name} runtime is "
                    "installed at all).",
                    f"install the {loader or 'package'} wheel built for the {name} your torch uses, or the torch build "
                    f"{loader or 'it'} was made for ({needs}); keep one {name} major across torch, vLLM and their "
                    "extensions",
                    _line(text, m.start()),
                    package=loader,
                    importer=loader,
                    data="the log",
                ),
            )
        )
    for m in _matches(_UNDEFINED_SYMBOL, text, "undefined symbol"):
        extension = m.group("extension")
        distribution, _ = distribution_of_path(extension)
        if distribution is None:
            distribution = known_distribution(extension.replace("\\", "/").rsplit("/", 1)[-1].split(".", 1)[0])
        if distribution is None or distribution == "torch":
            continue
        against = "torch" if _TORCH_SYMBOL.search(m.group("symbol")) else "another release of a library it links"
        installed = f" {torch}" if torch and against == "torch" else ""
        found.append(
            (
                m.start(),
                Finding(
                    "native-build",
                    distribution,
                    True,
                    f"{distribution}'s compiled extension ({extension.rsplit('/', 1)[-1]}) was built against "
                    f"{against} other than the one installed{' (torch' + installed + ')' if installed else ''}: "
                    f"a symbol it links ({m.group('symbol')[:60]}) is not there.",
                    f"rebuild {distribution} against the installed torch: pip install --no-build-isolation "
                    f"--no-cache-dir --force-reinstall {distribution} (a source build compiles against the torch it "
                    "finds), or install the torch release its wheel was built for",
                    _line(text, m.start()),
                    package=distribution,
                    data="the log",
                ),
            )
        )
    for m in (m for literal in ("Torch not compiled", "no NVIDIA driver") for m in _matches(_NO_CUDA, text, literal)):
        build = f" (torch {torch}: {torch_build})" if torch_build else ""
        npu = "torch_npu" in text or "Ascend" in text
        found.append(
            (
                m.start(),
                Finding(
                    "native-build",
                    "cuda",
                    True,
                    f"the run asks for CUDA, and this torch cannot use it{build}: a CPU-only torch wheel, or no NVIDIA "
                    "driver"
                    + (
                        "; on an Ascend NPU, code that hard-codes cuda does not run (torch_npu is the device)"
                        if npu
                        else ""
                    )
                    + ".",
                    "install the torch wheel built for this machine's CUDA (pip's index of pytorch.org), or set the "
                    "device to what the machine has" + (" (npu, with torch_npu)" if npu else ""),
                    _line(text, m.start()),
                    package="torch",
                    data="the log",
                ),
            )
        )
    return found


# The histories a call's callee is looked up in: the GRPO stack's, cheapest first (each loads in well under 1 s).
_CALLEE_HISTORIES = ("trl", "transformers", "accelerate", "peft", "vllm", "ms-swift")


def _definitions(callable_name: str) -> list[tuple[str, str, str]]:
    """(distribution, qualname, the name found) of every function or method the histories define under
    ``callable_name``; a subclass's name from another project (``UnslothGRPOTrainer.create_model_card``) reads as the
    class it ends with."""
    parts = callable_name.removesuffix(".__init__").split(".")
    tail = ".".join(parts[-2:]) if len(parts) > 1 else parts[0]
    cls, _, method = tail.rpartition(".")
    tails = [tail]
    if cls:  # UnslothGRPOTrainer -> GRPOTrainer, Trainer: the upstream classes a subclass's name ends with
        tails += [f"{cls[i:]}.{method}" for i in range(1, len(cls)) if cls[i].isupper()]
    if callable_name.endswith(".__init__"):
        tails = [f"{t}.__init__" for t in tails]
    for candidate in tails:
        found = []
        for distribution in _CALLEE_HISTORIES:
            history = _history(distribution)
            if history is None:
                continue
            lookup = candidate.removesuffix(".__init__")
            for module, _, _ in history.where(lookup):
                qualname = f"{module}.{candidate}"
                if history.signature_spans(qualname) and (distribution, qualname, candidate) not in found:
                    found.append((distribution, qualname, candidate))
        if found:
            return found
    return []


def _binds(signature, kind: str, detail: str, positional: int | None) -> bool:
    if kind == "keyword":
        return any(p.name == detail or p.kind == "VAR_KEYWORD" for p in signature.parameters)
    return signature.accepts(positional, ()) is None


def _call_over_releases(
    callable_name: str, kind: str, detail: str, text: str, position: int, versions: dict[str, str]
) -> Finding | None:
    """A call that does not bind (an unexpected keyword, too many positional arguments, missing ones) to an upstream
    function or method the histories hold: the releases whose signature takes the call, the caller's distribution
    (the frame that made the call), and from those which release the caller was written for."""
    definitions = _definitions(callable_name)
    frames = frames_before(text, position)
    running = {frame.distribution for frame in frames_before(text, position, chained=True)}
    if running & set(_COPIES_UPSTREAM):  # unsloth's compiled trainers are copies of trl's: they call into trl
        running |= set(_COPIED_UPSTREAM)
    in_traceback = [d for d in definitions if d[0] in running]
    definitions = in_traceback or definitions  # the distributions whose code the traceback runs, where one is
    if len({distribution for distribution, _, _ in definitions}) == 1:
        definitions = definitions[:1]  # one distribution: its definition and re-exports share one signature history
    if len(definitions) != 1:
        return None  # not an upstream function of the histories, or defined in several places: no one answer
    ((distribution, qualname, name),) = definitions
    history = _history(distribution)
    spans = history.signature_spans(qualname)
    positional = None
    if kind == "positional":
        positional = int(detail)
    elif kind == "missing":  # the call filled the parameters before the first one reported missing
        names = [p.name for p in spans[-1][2].parameters]
        if detail not in names:
            return None
        positional = names.index(detail)
    fits = _joined(history, [(a, b) for a, b, signature in spans if _binds(signature, kind, detail, positional)])
    caller = frames[-1].distribution if frames else None
    caller_text = f"{caller}'s code" if caller else "the calling script"
    function = name.rsplit(".", 1)[-1]
    if frames and frames[-1].source and function not in frames[-1].source:  # called back under another name
        caller_text = f"the code that handed {function} over as a callback (called by {caller or 'the script'})"
        caller = None
    evidence = _line(text, position)
    common = {"package": distribution, "importer": caller, "callable": name, "data": "API histories"}
    version = versions.get(distribution)
    what = {"keyword": f"the keyword '{detail}'", "positional": f"{detail} positional arguments"}.get(
        kind, f"a call without '{detail}'"
    )

    def mismatch(confident: bool, cause: str, fix: str, **known) -> Finding:
        return Finding("signature-mismatch", name, confident, cause, fix, evidence, **known, **common)

    def written_for_older(last: str, cause: str, **known) -> Finding:
        # The caller was written for releases up to ``last``: pin below, or move the caller on.
        fix = f"pip install '{distribution}<={last}'" + (f", or upgrade {caller}" if caller else "")
        return mismatch(True, cause, fix, remedy="upgrade-importer" if caller else "pin", **known)

    if not fits:
        return mismatch(
            False,
            f"no {distribution} release from {spans[0][0]} to {spans[-1][1]} defines {name} to take {what}: "
            f"{caller_text} was written for another {distribution} (or another function of that name).",
            f"check which {distribution} {caller or 'the script'} was written for",
        )
    takes = f"{name} takes {what} in {distribution} {_spans_text(fits)} only"
    newest, oldest = history.newest, history.releases[0]
    at = history.nearest(version) if version else None
    if at:
        later = [(first, last) for first, last in fits if release(first) > release(at)]
        earlier = [last for _, last in fits if release(last) < release(at)]
        if later and not earlier:
            narrowed, declared = _narrowed_to_declared(history, distribution, later[0], caller, versions)
            declared = f" ({declared})" if declared else ""
            if narrowed is None:
                return _copy_of_another_release(f"{takes}{declared}", distribution, version, evidence, caller, name)
            return mismatch(
                True,
                f"{takes}: {distribution} {version} is older than {caller_text} expects{declared}.",
                f"pip install {_in_span(history, distribution, narrowed).removeprefix('--upgrade ')}",
                remedy="upgrade",
                version=version,
            )
        if earlier and not later:
            return written_for_older(
                earlier[-1],
                f"{takes}: {caller_text} was written for those, and {distribution} {version} is newer.",
                version=version,
            )
    if len(fits) == 1 and fits[0][1] == newest and fits[0][0] != oldest:
        return mismatch(
            True,
            f"{takes}: the run's {distribution} (no version in the log) is older than {caller_text} expects.",
            f"pip install '{distribution}>={fits[0][0]}'",
            remedy="upgrade",
        )
    if len(fits) == 1 and fits[0][0] == oldest and fits[0][1] != newest:
        return written_for_older(
            fits[0][1],
            f"{takes}: {caller_text} was written for those; the run's {distribution} (no version in the log) is newer.",
        )
    return mismatch(
        False,
        f"{takes}: {caller_text} was written for one of those.",
        f"install the {distribution} release {caller or 'the script'} was written for ({_spans_text(fits)})",
    )


# --- raise sites: an upstream check that failed, and the settings its condition reads ------------------------

_CHECKED_BY = ("trl", "ms-swift", "transformers", "accelerate", "peft")
_RAISE_TYPES = ("ValueError", "AssertionError", "TypeError", "NotImplementedError", "RuntimeError")
_OPERATION_ON_A_VALUE = re.compile(r"NoneType|unsupported operand|not supported between|not iterable|not subscriptable")
_NOT_SETTINGS = frozenset({"self", "args", "len", "isinstance", "int", "float", "str", "None", "kwargs", "config"})


def _known_settings() -> frozenset[str]:
    from grpo_compat.settings.history import load

    return frozenset(load("trl").settings) | frozenset(load("ms-swift").settings) | _training_arguments_ever()


def _condition_of_raise(module: str, function: str, error_type: str, message: str) -> str | None:
    """The condition under which ``function`` of the installed ``module`` raises this error with this message: the
    test of the ``if`` around the matching ``raise``, or the ``assert``'s own test. None when the source is not here
    or no raise there produces the message."""
    tree = _installed_source(module)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name != function:
            continue
        parents = {child: parent for parent in ast.walk(node) for child in ast.iter_child_nodes(parent)}
        for statement in ast.walk(node):
            if isinstance(statement, ast.Assert) and error_type == "AssertionError":
                constants = (
                    [c.value for c in ast.walk(statement.msg) if isinstance(c, ast.Constant)] if statement.msg else []
                )
                if all(str(c).strip() in message for c in constants if str(c).strip()):
                    return ast.unparse(statement.test)
            if isinstance(statement, ast.Raise) and statement.exc is not None:
                raised = statement.exc.func if isinstance(statement.exc, ast.Call) else statement.exc
                if not (isinstance(raised, ast.Name) and raised.id == error_type):
                    continue
                constants = [
                    str(c.value).strip()
                    for c in ast.walk(statement.exc)
                    if isinstance(c, ast.Constant) and isinstance(c.value, str) and len(str(c.value).strip()) > 3
                ]
                if not constants or not all(c in message for c in constants):
                    continue
                parent = parents.get(statement)
                while parent is not None and not isinstance(parent, ast.If):
                    parent = parents.get(parent)
                if parent is not None:
                    return ast.unparse(parent.test)
    return None


def _condition_in_source_line(source: str, error_type: str) -> str | None:
    """The condition a traceback's printed line shows: an ``assert``'s test, an ``if``'s, or (a TypeError of an
    operation on None) the expression itself."""
    line = source.strip().rstrip(":")
    for keyword in ("assert ", "if ", "elif ", "while "):
        if line.startswith(keyword):
            line = line[len(keyword) :]
            break
    else:
        if error_type != "TypeError":
            return None
    try:
        tree = ast.parse(line, mode="exec")
    except SyntaxError:
        return None
    body = tree.body[0] if tree.body else None
    if isinstance(body, ast.Expr):
        test = body.value
        if isinstance(test, ast.Tuple) and test.elts:  # assert test, message
            test = test.elts[0]
        return ast.unparse(test)
    if isinstance(body, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and body.value is not None:
        return ast.unparse(body.value)
    return None


def _raise_site_findings(text: str, versions: dict[str, str], evidence) -> list[tuple[int, Finding]]:
    """For a check upstream code raised (trl, ms-swift, transformers, accelerate, peft): the condition it tested,
    read from the installed release's function or from the line the traceback prints, and the settings that
    condition reads, with the values the log shows for them."""
    shown = evidence.settings_shown()
    settings = _known_settings()
    found: list[tuple[int, Finding]] = []
    for error in evidence.errors[-3:]:  # the errors that ended the run
        frame = error.frames[-1] if error.frames else None
        if error.type not in _RAISE_TYPES or frame is None or frame.distribution not in _CHECKED_BY:
            continue
        if error.type == "TypeError" and not _OPERATION_ON_A_VALUE.search(error.message):
            continue  # a call that does not bind: the signature reasoners' class, not a check
        condition, data = None, "the line the traceback prints"
        if frame.module and frame.function:
            condition = _condition_of_raise(frame.module, frame.function, error.type, error.message)
            installed = _installed_version(frame.distribution)
            data = f"the installed {frame.distribution} {installed}'s {frame.function}" if condition else data
        if condition is None and frame.source:
            condition = _condition_in_source_line(frame.source, error.type)
        if condition is None:
            continue
        try:
            names = [
                n.attr if isinstance(n, ast.Attribute) else n.id
                for n in ast.walk(ast.parse(condition))
                if isinstance(n, (ast.Attribute, ast.Name))
            ]
        except SyntaxError:
            continue
        read = [n for n in dict.fromkeys(names) if n not in _NOT_SETTINGS]
        read = [n for n in read if n in settings or n in shown]
        if not read:
            continue
        values = ", ".join(f"{n}={shown[n]}" for n in read if n in shown)
        where = f"{frame.distribution}'s {frame.function or 'code'}"
        found.append(
            (
                error.position,
                Finding(
                    "upstream-check",
                    read[0],
                    bool(values),
                    f"{where} raised {error.type} "
                    + (
                        f"as its assertion `{condition}` failed"
                        if error.type == "AssertionError"
                        else f"on `{condition}`"
                        if frame.source and condition == _condition_in_source_line(frame.source, error.type)
                        else f"because `{condition}` held"
                    )
                    + f": the settings it reads are {', '.join(read)}"
                    + (f"; the log shows {values}." if values else " (the log shows none of their values)."),
                    f"set {', '.join(read)} so that the check passes (the message says what it expects)",
                    error.line,
                    package=frame.distribution,
                    callable=frame.function,
                    data=data,
                ),
            )
        )
    return found


# --- whose code raised: a package that patches or copies another's code ------------------------------------------

# Packages that run their own copies or patches of trl's / transformers' / vLLM's code (unsloth compiles a copy of
# trl's trainers into unsloth_compiled_cache/), released in step with each other and with the releases they copy.
_COPIES_UPSTREAM = {"unsloth": ("unsloth", "unsloth_zoo"), "unsloth-zoo": ("unsloth", "unsloth_zoo")}


def _raised_in_a_copy(versions: dict[str, str], evidence) -> list[tuple[int, Finding]]:
    """An error raised inside a package that runs its own copy of upstream code, which grpo_compat has no histories
    of: offered as a skew between that package's releases and the upstream ones it copies."""
    error = evidence.errors[-1] if evidence.errors else None
    if error is None or error.raised_by not in _COPIES_UPSTREAM:
        return []
    together = _COPIES_UPSTREAM[error.raised_by]
    upstream = sorted(
        {f.distribution for f in error.frames if f.distribution in ("trl", "transformers", "vllm", "peft")}
    )
    stated = ", ".join(f"{name} {versions[name]}" for name in (*together, *upstream) if name in versions)
    frame = error.frames[-1]
    where = _place(frame)
    copied = ", ".join(upstream) or "trl, transformers and vLLM"
    return [
        (
            error.position,
            Finding(
                "version-skew",
                error.raised_by,
                False,
                f"the error is raised inside {error.raised_by}'s code ({where}), which runs its own copies and patches "
                f"of {copied}: a {' / '.join(together)} release that does not match the installed upstream releases "
                "(or each other) is the usual cause" + (f" ({stated})." if stated else "."),
                f"pip install --upgrade {' '.join(together)} (together: they are released in step), and clear "
                "unsloth_compiled_cache/; or install the trl / vLLM releases that unsloth release supports",
                error.line,
                package=error.raised_by,
                importer=error.called_by,
                data="the traceback's frames",
            ),
        )
    ]


# The upstream distributions whose releases a copying package declares (unsloth declares trl's range).
_COPIED_UPSTREAM = ("trl",)


def _specifier_text(requirements: list) -> str:
    return ",".join(str(r.specifier) for r in requirements)


def _joined(history, spans: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Spans of ``history``'s releases with the adjacent ones joined (signature spans that each take a call)."""
    index = {each: i for i, each in enumerate(history.releases)}
    inside = [each for each in history.releases if any(index[a] <= index[each] <= index[b] for a, b in spans)]
    return _release_spans(history, inside)


def _place(frame) -> str:
    """A frame as the answer names it: "UnslothGRPOTrainer.py, _prepare_inputs"."""
    return frame.path.replace("\\", "/").rsplit("/", 1)[-1] + (f", {frame.function}" if frame.function else "")


def _in_span(history, distribution: str, span: tuple[str, str]) -> str:
    """A pip requirement for a release in ``span``: ``'unsloth>=A,<=B'`` (``--upgrade`` where B is the newest)."""
    first, last = span
    if last == history.newest:
        return f"--upgrade '{distribution}>={first}'"
    return f"'{distribution}=={first}'" if first == last else f"'{distribution}>={first},<={last}'"


def _declared_by_copier(copier: str | None, upstream: str, versions: dict[str, str]) -> list:
    """The requirements on ``upstream`` that the run's unsloth release declares, when ``copier`` (the code that made
    the call) is unsloth's and the log states its release; [] otherwise."""
    stated = versions.get("unsloth")
    history = _history("unsloth")
    if copier not in _COPIES_UPSTREAM or upstream not in _COPIED_UPSTREAM or not stated or history is None:
        return []
    return history.declared(stated, upstream) if history.nearest(stated) == stated else []


def _narrowed_to_declared(
    history, upstream: str, span: tuple[str, str], caller: str | None, versions: dict[str, str]
) -> tuple[tuple[str, str] | None, str]:
    """The first run of ``upstream`` releases in ``span`` that the run's unsloth release also declares, when
    ``caller`` is unsloth's code (its compiled copy of trl's trainer); None when none is, and the note that says
    what unsloth declares ("" when the caller is not unsloth's, or the log states no unsloth release)."""
    declared = _declared_by_copier(caller, upstream, versions)
    if not declared:
        return span, ""
    first, last = span
    inside = [
        each
        for each in history.releases
        if release(first) <= release(each) <= release(last)
        and all(r.specifier.contains(each, prereleases=True) for r in declared)
    ]
    note = f"unsloth {versions['unsloth']} declares {upstream}{_specifier_text(declared)}"
    return (_release_spans(history, inside)[0] if inside else None), note


def _copy_of_another_release(
    cause: str, upstream: str, version: str | None, evidence: str, caller: str | None, callable_name: str
) -> Finding:
    """No ``upstream`` release both takes the call unsloth's code makes and is one the unsloth release declares: the
    compiled copy and the unsloth release do not match (offered: a stale cache is likely, not shown)."""
    return Finding(
        "version-skew",
        "unsloth",
        False,
        cause + ", which none of those is: the compiled trainer and the unsloth release do not match (a stale "
        "unsloth_compiled_cache/ of another unsloth, likely).",
        "delete unsloth_compiled_cache/ and rerun (unsloth regenerates it for its own release), or install the "
        f"unsloth release made for {upstream}" + (f" {version}" if version else ""),
        evidence,
        package="unsloth",
        importer=caller,
        callable=callable_name,
        data="API histories",
    )


def _declared_pair(versions: dict[str, str], evidence) -> list[tuple[int, Finding]]:
    """An error raised inside unsloth's / unsloth_zoo's code, and the upstream release (trl) the run used against the
    range the unsloth release declares (its Requires-Dist in the histories). Asserted where the log states both
    releases and the upstream one is outside the declared range; with no unsloth release in the log, the unsloth
    releases that accept the upstream one, offered."""
    error = evidence.errors[-1] if evidence.errors else None
    if error is None or not any(f.distribution in _COPIES_UPSTREAM for f in error.frames):
        return []
    copier = _history("unsloth")
    found = []
    for upstream in _COPIED_UPSTREAM:
        upstream_version = versions.get(upstream)
        if copier is None or not upstream_version or not re.match(r"\d+(\.\d+)*$", upstream_version):
            continue
        frame = next(f for f in reversed(error.frames) if f.distribution in _COPIES_UPSTREAM)
        where = _place(frame)
        common = {"package": upstream, "importer": "unsloth", "data": "API histories (unsloth's declared requirements)"}
        stated = versions.get("unsloth")
        at = copier.nearest(stated) if stated else None
        if at and at == stated:
            declared = copier.declared(at, upstream)
            if not declared or all(r.specifier.contains(upstream_version, prereleases=True) for r in declared):
                continue  # the pair is one unsloth declares: not this reasoner's to blame
            accepting = _release_spans(copier, copier.releases_accepting(upstream, upstream_version))
            other = (
                f", or an unsloth release that accepts {upstream} {upstream_version} ({_spans_text(accepting[-2:])}): "
                f"pip install {_in_span(copier, 'unsloth', accepting[-1])} unsloth_zoo"
                if accepting
                else ""
            )
            found.append(
                (
                    error.position,
                    Finding(
                        "version-skew",
                        upstream,
                        True,
                        f"unsloth {stated} declares {upstream}{_specifier_text(declared)}, and the run's {upstream} is "
                        f"{upstream_version}: outside it. The error is raised in unsloth's code ({where}), which "
                        f"copies and patches {upstream}'s trainers for the {upstream} releases it declares.",
                        f"pip install '{upstream}{_specifier_text(declared)}'{other}",
                        error.line,
                        version=upstream_version,
                        remedy="pin",
                        **common,
                    ),
                )
            )
        elif not stated:
            accepting = _release_spans(copier, copier.releases_accepting(upstream, upstream_version))
            if not accepting:
                continue
            fix = f"pip install {_in_span(copier, 'unsloth', accepting[-1])} unsloth_zoo"
            found.append(
                (
                    error.position,
                    Finding(
                        "version-skew",
                        upstream,
                        False,
                        f"the error is raised in unsloth's code ({where}), and the log states {upstream} "
                        f"{upstream_version} but no unsloth release: the unsloth releases that declare {upstream} "
                        f"{upstream_version} acceptable are {_spans_text(accepting)}; an unsloth outside those was "
                        f"made for other {upstream} releases.",
                        fix,
                        error.line,
                        version=upstream_version,
                        **common,
                    ),
                )
            )
    return found


# The messages a refused setting gives, the package that gave it and how it was passed (see settings.installed).
REFUSED_SETTING = (
    (re.compile(r"RLHFArguments\.__init__\(\) got an unexpected keyword argument '(\w+)'"), "ms-swift", "python"),
    # \b: a leading \w* alone is retried from every character of a long line (quadratic).
    (re.compile(r"\b\w*Config\.__init__\(\) got an unexpected keyword argument '(\w+)'"), "trl", "python"),
    (re.compile(r"(?:unrecognized arguments|Unknown arguments(?: from config file)?): ([^\n]*)"), "trl", "config"),
    (re.compile(r"remaining_argv: (\[[^\n]*)"), "ms-swift", "cli"),
)
_OTHER_PACKAGE = {"trl": "ms-swift", "ms-swift": "trl"}


def _merged(releases: list[str], spans: list[list]) -> list[list]:
    """Spans of consecutive releases joined where a setting only changed its type or default between them."""
    index = {version: i for i, version in enumerate(releases)}
    merged: list[list] = []
    for first, last, entry in spans:
        if merged and index[first] == index[merged[-1][1]] + 1:
            merged[-1] = [merged[-1][0], last, entry]
        else:
            merged.append([first, last, entry])
    return merged


def _setting_spans_text(spans: list[list]) -> str:
    return _spans_text([(first, last) for first, last, _ in spans])


def _refused_setting(key: str, package: str, context: str, version: str | None, evidence: str) -> Finding | None:
    """A setting the run's trl / ms-swift refused, reasoned over every release of grpo_compat's settings history:
    never a setting of that package, new in a later release, or removed (and what replaced it); the run's version
    adds which release, and decides where the releases alone do not."""
    from grpo_compat.settings.drift import problems
    from grpo_compat.settings.history import load
    from grpo_compat.settings.installed import refused_names

    if key in _training_arguments_ever():
        return None  # a field trl and ms-swift inherit from transformers: which transformers lacks it is not here
    history = load(package)
    spans = _merged(history.releases, history.spans(key))
    first, newest = history.releases[0], history.releases[-1]
    other = _OTHER_PACKAGE[package]
    other_spans = load(other).spans(key)
    elsewhere = f"; it is a setting of {other} ({other} {_setting_spans_text(other_spans)})" if other_spans else ""
    common = {"package": package, "data": f"grpo_compat's settings history of {package}", "version": version}
    run = f"{package} {version}" if version else f"the run's {package} (no version in the log)"
    if not spans:
        if version and history.nearest(version) and not refused_names([key], package, version, context):
            return None  # the release takes it after all: not the cause
        names = sorted({name for name, _ in history.settings.items()})
        close = difflib.get_close_matches(key, names, n=3, cutoff=0.6)
        return Finding(
            "setting-refused",
            key,
            True,
            f"no {package} release from {first} to {newest} takes `{key}`{elsewhere}: {run} refused it.",
            f"remove `{key}`" + (f" (the nearest {package} settings by name: {', '.join(close)})" if close else ""),
            evidence,
            **common,
        )
    if version and history.nearest(version) and key in history.at(version):
        # The stated release takes it, so the run used another: what every release says, offered.
        every = _refused_setting(key, package, context, None, evidence)
        stated = f"the log states {package} {version}, which takes `{key}` (settings history): the run used another "
        return every and replace(every, confident=False, cause=stated + "release; " + every.cause)
    if version and history.nearest(version):
        (problem,) = problems([key], package, version, set()) or (None,)
        if problem is None or problem.kind == "unknown":
            return None
        fix = (
            f"set `{problem.replacement}` instead"
            if problem.replacement
            else f"upgrade {package} to {problem.release}"
            if problem.kind == "newer"
            else f"remove `{key}`, or pip install '{package}<{problem.release}'"
        )
        return Finding("setting-refused", key, True, problem.message + elsewhere[1:], fix, evidence, **common)
    if len(spans) == 1 and spans[0][1] == newest:
        return Finding(
            "setting-refused",
            key,
            True,
            f"`{key}` is a {package} setting from {spans[0][0]} on: {run} is older.",
            f"pip install '{package}>={spans[0][0]}', or remove `{key}`",
            evidence,
            remedy="upgrade",
            **common,
        )
    if len(spans) == 1 and spans[0][0] == first:
        (problem,) = problems([key], package, newest, set())
        return Finding(
            "setting-refused",
            key,
            True,
            f"{package} took `{key}` in {first}-{spans[0][1]} only: {run} is newer. {problem.message}",
            f"set `{problem.replacement}` instead" if problem.replacement else f"remove `{key}`",
            evidence,
            remedy="pin",
            **common,
        )
    return Finding(
        "setting-refused",
        key,
        False,
        f"{package} takes `{key}` in {_setting_spans_text(spans)} only{elsewhere}: {run} is another release.",
        f"install a {package} release that takes `{key}`, or remove it",
        evidence,
        **common,
    )


@cache
def _training_arguments_ever() -> frozenset[str]:
    """Every field transformers' Seq2SeqTrainingArguments had in any release (trl's configs and ms-swift's arguments
    inherit them; grpo_compat's settings histories hold only trl's and ms-swift's own)."""
    history = _history("transformers")
    if history is None:
        return frozenset()
    spans = history._data["fields"].get("transformers.training_args_seq2seq.Seq2SeqTrainingArguments", [])
    return frozenset(name for _, _, fields in spans for name in fields)


def _settings_findings(text: str, versions: dict[str, str]) -> list[tuple[int, Finding]]:
    found: list[tuple[int, Finding]] = []
    for pattern, package, context in REFUSED_SETTING:
        if context == "python" and package == "trl":
            continue  # GRPOConfig's keywords: _keyword reasons over the config and its trainer
        literal = {"python": "unexpected keyword", "config": "rguments", "cli": "remaining_argv"}[context]
        for m in _matches(pattern, text, literal):
            names = re.findall(r"--([A-Za-z_][\w-]*)", m.group(1)) or [m.group(1)]
            for key in dict.fromkeys(name.replace("-", "_") for name in names):
                finding = _refused_setting(key, package, context, versions.get(package), _line(text, m.start()))
                if finding is not None:
                    found.append((m.start(), finding))
    return found


def _arity(m: re.Match, text: str, versions: dict[str, str]) -> Finding | None:
    """``Owner.method() takes N positional arguments but M were given``: an override and its caller from releases
    that do not match (trl's GRPOTrainer._get_train_sampler and transformers 4.52's Trainer, the census's row 15)."""
    owner, _, method = m.group("callable").rpartition(".")
    if not owner or not method:
        return None
    role = _role(owner)
    callee = _GRPO_CLASSES[role][0] if role else None
    caller = _importer(text, m.start())
    if callee is None or caller is None or caller == callee:
        return None
    takes, given = int(m.group("takes")), int(m.group("given"))
    evidence = _line(text, m.start())
    cause = (
        f"{callee}'s {owner}.{method} takes {takes} positional argument{'s' if takes != 1 else ''}; {caller}"
        + (f" {versions[caller]}" if caller in versions else "")
        + f" calls it with {given}: the override and its caller come from releases that do not match."
    )
    history = _history(callee)
    if history is not None:
        qualname = f"{_GRPO_CLASSES[role][1]}.{_GRPO_CLASSES[role][2]}.{method}"
        fits = _joined(
            history,
            [
                (first, last)
                for first, last, signature in history.signature_spans(qualname)
                if signature.accepts(given, ()) is None  # Python's count and accepts() both count self
            ],
        )
        version = versions.get(callee)
        later = [(first, last) for first, last in fits if version and release(first) > release(version)]
        if later:
            first, last = later[0]
            takes_it = f" {callee} {first}" + ("" if first == last else f"-{last}") + f" takes {given}"
            narrowed, declared = _narrowed_to_declared(history, callee, later[0], caller, versions)
            takes_it += f"; {declared}" if declared else ""
            if narrowed is None:  # no trl both binds the call and is one that unsloth declares: its release is off
                return _copy_of_another_release(cause + takes_it, callee, version, evidence, caller, owner)
            first, last = narrowed
            return Finding(
                "signature-mismatch",
                method,
                True,
                cause + takes_it + ".",
                f"pip install {_in_span(history, callee, (first, last)).removeprefix('--upgrade ')}",
                evidence,
                package=callee,
                importer=caller,
                callable=owner,
                remedy="upgrade",
                data="API histories",
            )
    return Finding(
        "signature-mismatch",
        method,
        True,
        cause,
        f"install the {caller} release range your {callee} declares, or a {callee} made for this {caller}",
        evidence,
        package=callee,
        importer=caller,
        callable=owner,
        data="the log",
    )


def _object_attribute(owner: str, name: str, text: str, position: int, versions: dict[str, str]) -> Finding | None:
    """``'Owner' object has no attribute 'name'``, for the owners a GRPO run has: trl's configs and trainers (and
    their subclasses in other projects), transformers' models, value-head wrappers, unsloth's vLLM engine."""
    evidence = _line(text, position)
    importer = _importer(text, position)
    if name == "vllm_engine":  # unsloth's model attribute, set only when it loaded vLLM
        return Finding(
            "vllm-wiring",
            name,
            True,
            f"the trainer uses vLLM (use_vllm=True) but the model ({owner}) was loaded without unsloth's vLLM engine, "
            "so it has no vllm_engine.",
            "load it with FastLanguageModel.from_pretrained(..., fast_inference=True) where unsloth supports vLLM for "
            "the model, else set use_vllm=False",
            evidence,
            data="the log",
        )
    if owner.endswith("WithValueHead"):  # trl's PPO wrapper: GRPO trains the causal LM itself
        return Finding(
            "wrong-model-class",
            owner,
            True,
            f"GRPO was given {owner}, a value-head wrapper for PPO; GRPOTrainer expects a plain causal LM, so the "
            f"attributes it sets on a model ('{name}') are not there.",
            "pass AutoModelForCausalLM.from_pretrained(...) (or the model id) to GRPOTrainer",
            evidence,
            data="the log",
        )
    if owner.endswith("GRPOConfig"):
        return _config_field(name, evidence, importer, versions)
    if owner.endswith("Trainer") and "GRPO" in owner:
        if owner == "GRPOTrainer" and importer in (None, "trl"):
            # trl's own trainer reading an attribute its base (transformers' Trainer) sets in some releases
            version = versions.get("transformers")
            return Finding(
                "name-missing",
                name,
                False,
                f"trl's GRPOTrainer reads '{name}', which transformers' Trainer"
                + (f" {version}" if version else "")
                + " does not set: trl and transformers releases that do not "
                "match.",
                "install the transformers release range your trl declares",
                evidence,
                package="transformers",
                importer="trl",
                data="the log",
            )
        return Finding(
            "name-missing",
            name,
            True,
            f"{owner} (a subclass of trl's GRPOTrainer) uses '{name}', which the installed trl's GRPOTrainer no "
            "longer (or not yet) has: the subclass was written for another trl release.",
            f"install the trl release {importer or 'the project'} was written for, or update {importer or 'it'}",
            evidence,
            package="trl",
            importer=importer,
            data="the log",
        )
    if owner.endswith(("ForCausalLM", "ForConditionalGeneration", "PreTrainedModel")) and importer == "trl":
        version = versions.get("transformers")
        return Finding(
            "name-missing",
            name,
            True,
            f"trl sets or reads '{name}' on a transformers model ({owner}), which transformers"
            + (f" {version}" if version else "")
            + " does not have: trl and transformers releases that do not match.",
            "install the transformers range your trl declares, or a trl made for this transformers",
            evidence,
            package="transformers",
            importer="trl",
            data="the log",
        )
    return None


def _config_field(name: str, evidence: str, importer: str | None, versions: dict[str, str]) -> Finding:
    """A GRPOConfig field the code reads: from grpo_compat's settings history of every trl release since 0.14."""
    from grpo_compat.settings.history import load

    trl = load("trl")
    version = versions.get("trl")
    at = trl.nearest(version) if version else None
    spans = trl.spans(name)
    who = importer or "the code"
    if spans and at and release(spans[0][0]) > release(at):
        return Finding(
            "name-missing",
            name,
            True,
            f"GRPOConfig has '{name}' from trl {spans[0][0]}; trl {version} does not, and {who} reads it.",
            f"pip install 'trl>={spans[0][0]}'",
            evidence,
            package="trl",
            importer=importer,
            remedy="upgrade",
            data="grpo_compat's settings history of trl",
        )
    removed = trl.removed_after(name, version) if version and spans else None
    if removed:
        last, first_without = removed
        return Finding(
            "name-missing",
            name,
            True,
            f"GRPOConfig had '{name}' until trl {last} and dropped it in {first_without}; {who} still reads it.",
            f"pip install 'trl<={last}'" + (f", or update {importer}" if importer else ""),
            evidence,
            package="trl",
            importer=importer,
            remedy="upgrade-importer" if importer else "pin",
            data="grpo_compat's settings history of trl",
        )
    return Finding(
        "name-missing",
        name,
        True,
        "GRPOConfig" + (f" of trl {version}" if version else "") + f" has no '{name}', which {who} reads: "
        "the code and the trl release do not match.",
        "install the trl release the code was written for",
        evidence,
        package="trl",
        importer=importer,
        data="the log",
    )


# Names some package defines only when another is installed (trl's and ms-swift's guarded imports).
def _name_error(name: str, evidence: str, text: str, position: int, versions: dict[str, str]) -> Finding | None:
    importer = _importer(text, position)
    for distribution in sorted(set(versions) | {"transformers", "trl", "peft", "vllm"}):
        history = _history(distribution)
        modules = [m for m, _, _ in history.where(name)] if history is not None else []
        if not modules:
            root = _installed_root(distribution.replace("-", "_"))
            init = root / "__init__.py" if root else None
            if (
                init is None
                or not init.is_file()
                or f'"{name}"' not in init.read_text(encoding="utf-8", errors="ignore")
            ):
                continue
            source = f"the installed {distribution} {_installed_version(distribution)}"
        else:
            source = "API histories"
        if distribution == importer:
            continue
        installed = versions.get(distribution) or _installed_version(distribution)
        if installed is None:
            return Finding(
                "missing-package",
                distribution,
                True,
                f"'{name}' comes from {distribution}, which is not installed; {importer or 'the code'} "
                "uses it without the import having run.",
                f"pip install {distribution}",
                evidence,
                package=distribution,
                importer=importer,
                data=source,
            )
        return Finding(
            "name-missing",
            name,
            False,
            f"'{name}' is {distribution}'s ({source}); {importer or 'the code'} imports it only under a "
            f"guard that did not hold for {distribution} {installed}: {importer or 'the code'} predates "
            f"that {distribution}.",
            f"upgrade {importer}" if importer else f"check {distribution}'s version",
            evidence,
            package=distribution,
            importer=importer,
            remedy="upgrade-importer" if importer else None,
            data=source,
        )
    return None


# --- metrics -------------------------------------------------------------------------------------------------

_METRIC_NAMES = (
    "loss",
    "grad_norm",
    "reward_std",
    "frac_reward_zero_std",
    "completions/clipped_ratio",
    "clipped_ratio",
    "completions/mean_terminated_length",
    "mean_terminated_length",
    "reward",
)
_NUMBER = r"(-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan)"
# The key first (a pattern that opens with a lookbehind is tried at every position: 5x slower on metric lines);
# what precedes it is checked in metrics_in, so that "train_loss" is not "loss" nor "rewards/x/reward" "reward".
_METRIC = re.compile(
    r"(?P<key>"
    + "|".join(re.escape(n) for n in sorted(_METRIC_NAMES, key=len, reverse=True))
    + r")['\"`]?\s*(?:[:=]|\|)\s*[`'\"*]*"
    + _NUMBER
)


def metrics_in(text: str) -> dict[str, list[float]]:
    """Every value the log shows for the GRPO metrics above: dict / JSON lines, ``key: value``, table rows."""
    values: dict[str, list[float]] = {}
    for m in _METRIC.finditer(text):
        before = text[m.start() - 1 : m.start()]
        if before.isalnum() or before in ("_", "/"):  # the end of a longer name
            continue
        key = m.group("key").split("/")[-1]
        values.setdefault(key, []).append(float(m.group(2)))
    return values


METRICS_TAIL = 200_000  # characters of a log's end whose metric lines are read: the latest ~2,000 steps


def learning_metrics(text: str) -> bool:
    """The log's latest metric lines show a run that learns: a gradient that is finite and mostly non-zero, and
    rewards that differ within groups (reward_std > 0 or frac_reward_zero_std < 1) where the log shows them."""
    values = metrics_in(text[-METRICS_TAIL:])
    gradient = values.get("grad_norm", [])
    if not gradient or any(v != v for vs in values.values() for v in vs):  # no gradient logged, or a nan
        return False
    spread = values.get("reward_std") or [1 - v for v in values.get("frac_reward_zero_std", [])]
    return sum(v > 0 for v in gradient) >= 0.8 * len(gradient) and (not spread or max(spread) > 0)


def _metric_findings(text: str) -> list[tuple[int, Finding]]:
    text = text[-METRICS_TAIL:]
    values = metrics_in(text)
    if not values:
        return []
    evidence = next((_line(text, m.start()) for m in _METRIC.finditer(text)), "")

    def mostly(key: str, test) -> bool:
        seen = values.get(key, [])
        return bool(seen) and sum(map(test, seen)) >= max(1, 0.8 * len(seen))

    clipped = mostly("clipped_ratio", lambda v: v >= 0.9) or mostly("mean_terminated_length", lambda v: v == 0)
    no_spread = mostly("reward_std", lambda v: v == 0) or mostly("frac_reward_zero_std", lambda v: v >= 0.99)
    spread = mostly("reward_std", lambda v: v > 0) or mostly("frac_reward_zero_std", lambda v: v < 0.99)
    if clipped:
        # Offered, never asserted: cut completions that still get different rewards train, and alike rewards on cut
        # completions may come from the reward itself (a constant or broadcast reward looks the same in metrics).
        return [
            (
                0,
                Finding(
                    "truncation",
                    "max_completion_length",
                    False,
                    "completions are cut at the length limit (clipped_ratio ~1, no completion ends with EOS)"
                    + (
                        ": every reward is alike, so no advantage and no gradient."
                        if no_spread
                        else "; the rewards still differ, so it trains, on cut completions."
                        if spread
                        else "."
                    ),
                    "raise max_completion_length until most completions end on their own",
                    evidence,
                    data="the log's metrics",
                ),
            )
        ]
    if no_spread and mostly("grad_norm", lambda v: v == 0):
        return [
            (
                0,
                Finding(
                    "no-learning",
                    "reward_std",
                    True,
                    "each group's completions get the same reward (reward_std 0): the advantage is 0, "
                    "so is the gradient.",
                    "make rewards differ within a group: a graded reward, more generations, a higher temperature",
                    evidence,
                    data="the log's metrics",
                ),
            )
        ]
    if (
        mostly("loss", lambda v: abs(v) < 1e-3)
        and mostly("grad_norm", lambda v: v > 0)
        and (mostly("reward_std", lambda v: v > 0) or mostly("frac_reward_zero_std", lambda v: v < 1))
    ):
        return [
            (
                0,
                Finding(
                    "expected-zero-loss",
                    "loss",
                    True,
                    "the loss itself is expected: with one iteration per generation (num_iterations=1) the ratio is "
                    "1 and the "
                    "advantages "
                    "sum to zero in each group, so the logged loss is ~0 while its gradient is not (grad_norm > 0).",
                    "the loss needs no change; judge learning by reward, not loss (beta > 0 adds a visible KL term)",
                    evidence,
                    data="the log's metrics",
                ),
            )
        ]
    return []


@dataclass
class Reasoning:
    findings: list[Finding] = field(default_factory=list)

    @property
    def answer(self) -> Finding | None:
        return self.findings[0] if self.findings else None


# grpo_compat's own errors, as a traceback prints them ("grpo_compat.core.errors.GRPOSettingsError: ...", after a
# rank prefix or not), and `grpo-compat run`'s one-line refusals.
_OWN_ERROR = re.compile(
    r"^(?:[^\n]*?[\s:\]])?grpo_compat\.core\.errors\.(?P<name>\w+): (?P<message>[^\n]+)$"
    r"|^grpo-compat run: (?P<run>[^\n]+)$",
    re.M,
)


def _own_refusals(text: str) -> list[tuple[int, Finding]]:
    """A run grpo_compat stopped on purpose: its message already says what to change, so that is the answer."""
    import grpo_compat.core.errors as errors

    own = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, errors.GRPOCompatError)
    }
    found = []
    for m in _OWN_ERROR.finditer(text):
        name, message = (m["name"], m["message"]) if m["name"] else ("grpo-compat run", m["run"])
        if m["name"] and name not in own:
            continue
        found.append(
            (
                m.start() + 10**9,  # grpo_compat's refusal ends the run: it comes before any error it prevented
                Finding(
                    "refused-by-grpo-compat",
                    name,
                    True,
                    "grpo_compat stopped the run on purpose, before the failure these settings or versions lead to.",
                    f"what its message says: {message.strip()}",
                    m.group(0).strip(),
                    data="grpo_compat's own refusal",
                ),
            )
        )
    return found


def reason(text: str, versions: dict[str, str], trl_vllm: dict | None = None, evidence=None) -> Reasoning:
    """The general classes ``text`` shows, the last error first (the one that ended the run), confident ones first."""
    found = _errors(text, versions, trl_vllm) + _native_findings(text, versions) + _settings_findings(text, versions)
    found += _own_refusals(text)
    evidence = evidence if evidence is not None else read_evidence(text)
    found += _raise_site_findings(text, versions, evidence)
    found += _declared_pair(versions, evidence)
    if not found:  # the weakest reading of an error, only where nothing else explains it
        found += _raised_in_a_copy(versions, evidence)
    found += _metric_findings(text)
    found.sort(key=lambda item: -item[0])
    ordered: list[Finding] = []
    for _, finding in found:
        if all((f.cls, f.name) != (finding.cls, finding.name) for f in ordered):
            ordered.append(finding)
    ordered.sort(key=lambda f: not f.confident)
    return Reasoning(ordered)
