"""API histories of every release of the GRPO stack, read from the released code (issue 39; docs/api-histories.md).

Each distribution's data, ``data/<distribution>.json.gz``, is written by ``python -m matrix.api_history`` from
PyPI's wheels and sdists (never by hand) and read here with no network and no upstream import. Facts are
stored as spans of consecutive releases, ``[first, last]`` as indices into ``releases``:

    "modules":    {module: [[i, j], ...]}
    "names":      {module: {name: [[i, j], ...]}}        module-level names, and "Class.member" for a class's
    "imports":    {module: [[imported, "a,b", guard, line, [[i, j], ...]], ...]}
    "signatures": {qualname: [[i, j, "self,/,a,b=,*args,*,c=,**kw"], ...]}
    "bases":      {qualname: [[i, j, [base, ...]], ...]}
    "fields":     {qualname: [[i, j, {field: default source}], ...]}
    "requires":   [[i, j, [Requires-Dist line, ...]], ...]
    "attributes": {qualname: {attribute: [[i, j], ...]}}  what a class's methods assign on self
    "calls":      {qualname: {method: [[i, j, [[callee, positional, [keywords], via], ...]], ...]}}
    "kernels":    {module: {name: [[i, j, {"from", "line", "imported", "needs", "uses"}], ...]}}
    "argument_reads": {qualname: {"parameter.attribute": [[i, j, [line, [[module, class], ...]]], ...]}}
    "guards":     {module: {name: [[i, j, "source of the statement binding name"], ...]}}

(the reader's module docstring says what each fact means). The file is gzipped lines of JSON: the first holds the
plain tables and, for each of the ``KEYED_TABLES``, its keys; then one line per key, that key's value, so a read
decodes the values of the keys a question asks and no others (``_decoded``).

The contract the static check and ``explain`` use is /work/coord/HISTORIES_API.md (module docstring of record:
``DISTRIBUTIONS``, ``load``, ``distribution_of_module``, ``ApiHistory``, ``Signature``, ``ModuleImport``).
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

DATA = Path(__file__).resolve().parent / "data"
# The distributions with data, in the order the generator reads them, and their top-level import names.
IMPORT_NAMES = {
    "trl": ("trl",),
    "ms-swift": ("swift",),
    "transformers": ("transformers",),
    "accelerate": ("accelerate",),
    "peft": ("peft",),
    "liger-kernel": ("liger_kernel",),
    "huggingface-hub": ("huggingface_hub",),
    "datasets": ("datasets",),
    "requests": ("requests",),
    "vllm": ("vllm",),
    "deepspeed": ("deepspeed",),
    "unsloth": ("unsloth",),
    "unsloth-zoo": ("unsloth_zoo",),
}
DISTRIBUTIONS: tuple[str, ...] = tuple(d for d in IMPORT_NAMES if (DATA / f"{d}.json.gz").exists())
_DISTRIBUTION_OF_IMPORT = {name: dist for dist, names in IMPORT_NAMES.items() for name in names}

_REQUIREMENT_NAME = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_EXTRA = re.compile(r"extra\s*==\s*['\"]([^'\"]+)['\"]")

POSITIONAL_ONLY = "POSITIONAL_ONLY"
POSITIONAL_OR_KEYWORD = "POSITIONAL_OR_KEYWORD"
VAR_POSITIONAL = "VAR_POSITIONAL"
KEYWORD_ONLY = "KEYWORD_ONLY"
VAR_KEYWORD = "VAR_KEYWORD"


def distribution_of_module(module: str) -> str | None:
    """``vllm.sampling_params`` -> ``vllm``; None for a top-level name no history covers."""
    return _DISTRIBUTION_OF_IMPORT.get(module.split(".")[0])


@dataclass(frozen=True)
class Parameter:
    name: str
    kind: str  # as inspect.Parameter.kind's name
    has_default: bool


@dataclass(frozen=True)
class Signature:
    """A function's parameters as declared (a method's ``self`` / ``cls`` included)."""

    parameters: tuple[Parameter, ...]
    text: str

    @classmethod
    def parse(cls, text: str) -> Signature:
        parameters = []
        kind = POSITIONAL_OR_KEYWORD
        parts = text.split(",") if text else []
        if "/" in parts:  # everything before the marker is positional-only
            cut = parts.index("/")
            parameters += [Parameter(p.rstrip("="), POSITIONAL_ONLY, p.endswith("=")) for p in parts[:cut]]
            parts = parts[cut + 1 :]
        for part in parts:
            if part == "*":
                kind = KEYWORD_ONLY
            elif part.startswith("**"):
                parameters.append(Parameter(part[2:], VAR_KEYWORD, False))
            elif part.startswith("*"):
                parameters.append(Parameter(part[1:], VAR_POSITIONAL, False))
                kind = KEYWORD_ONLY
            else:
                parameters.append(Parameter(part.rstrip("="), kind, part.endswith("=")))
        return cls(tuple(parameters), text)

    def __str__(self) -> str:
        return f"({self.text.replace(',', ', ')})"

    def accepts(self, positional: int, keywords: Iterable[str]) -> str | None:
        """None when a call binds (``positional`` counts ``self``), else why not, worded as Python's TypeError."""
        by_kind: dict[str, list[Parameter]] = {}
        for parameter in self.parameters:
            by_kind.setdefault(parameter.kind, []).append(parameter)
        positional_slots = by_kind.get(POSITIONAL_ONLY, []) + by_kind.get(POSITIONAL_OR_KEYWORD, [])
        if positional > len(positional_slots) and not by_kind.get(VAR_POSITIONAL):
            most = len(positional_slots)
            fewest = sum(1 for p in positional_slots if not p.has_default)
            takes = f"{most}" if most == fewest else f"from {fewest} to {most}"
            noun = "argument" if most == 1 else "arguments"
            return f"takes {takes} positional {noun} but {positional} {'was' if positional == 1 else 'were'} given"
        filled = {p.name for p in positional_slots[:positional]}
        keywords = list(keywords)
        by_name = {p.name: p for p in self.parameters if p.kind in (POSITIONAL_OR_KEYWORD, KEYWORD_ONLY)}
        positional_only = {p.name for p in by_kind.get(POSITIONAL_ONLY, [])}
        for keyword in keywords:
            if keyword in positional_only:
                if by_kind.get(VAR_KEYWORD):
                    continue  # it lands in **kwargs
                return f"positional-only argument '{keyword}' passed as a keyword"
            if keyword in filled:
                return f"got multiple values for argument '{keyword}'"
            if keyword not in by_name and not by_kind.get(VAR_KEYWORD):
                return f"no parameter '{keyword}'"
        given = filled | (set(keywords) - positional_only)
        missing = [
            p.name
            for p in self.parameters
            if p.kind in (POSITIONAL_ONLY, POSITIONAL_OR_KEYWORD, KEYWORD_ONLY)
            and not p.has_default
            and p.name not in given
        ]
        if missing:
            plural = "s" if len(missing) > 1 else ""
            return f"missing required argument{plural}: " + ", ".join(f"'{m}'" for m in missing)
        return None


@dataclass(frozen=True)
class ModuleImport:
    """A module-level import: ``from module import names`` or ``import module`` (names=())."""

    module: str
    names: tuple[str, ...]
    guard: str | None  # None at module level, "try-except ImportError", "TYPE_CHECKING", or the condition's text
    line: int


@dataclass(frozen=True)
class SelfCall:
    """A call a class's method makes of a method of its chain: ``self.callee(...)`` (via ""), ``super().callee(...)``
    (via "super"), or ``self.callee`` handed to the chain's method ``via``, which calls it so."""

    callee: str
    positional: int  # not counting self
    keywords: tuple[str, ...]
    via: str


@dataclass(frozen=True)
class ArgumentRead:
    """The GRPO trainer's ``__init__`` (of the class ``qualname`` of its chain) reads ``parameter.attribute`` on
    line ``line`` on every build, ``parameter`` being annotated with ``classes``: (module as the release imports it
    from, class name), each another distribution's class that reaches the read as passed."""

    qualname: str
    parameter: str
    attribute: str
    line: int
    classes: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Kernel:
    """``try: from <source> import <imported> as <name> except ImportError: <name> = None`` in ``module``, where
    importing ``source`` needs the other distributions' modules ``needs``; ``uses``: (function, line, the modules
    whose classes call that function unconditionally) for each function that calls ``name`` untested."""

    module: str
    name: str
    source: str
    line: int
    imported: str
    needs: tuple[str, ...]
    uses: tuple[tuple[str, int, tuple[str, ...]], ...]


Span = tuple[str, str]


class ApiHistory:
    """One distribution's API, release by release."""

    def __init__(self, data: dict) -> None:
        self.distribution: str = data["distribution"]
        self.releases: list[str] = data["releases"]
        self.reads: str = data.get("reads", "")
        self.scope: list[str] | None = data.get("scope")
        self.yanked: dict[str, str] = data.get("yanked", {})  # release -> PyPI's reason (still read: a pin installs it)
        self._data = data
        self._index = {version: i for i, version in enumerate(self.releases)}
        self._ordered = [Version(v) for v in self.releases]
        self._where: dict[str, list[str]] | None = None
        self._imports_at: dict[tuple[str, int], list[ModuleImport]] = {}
        self._methods: dict[str, list[str]] | None = None  # class qualname -> its methods in any release

    # -- releases
    @property
    def newest(self) -> str:
        return self.releases[-1]

    def knows(self, version: str) -> bool:
        return version in self._index

    def nearest(self, version: str) -> str | None:
        """That release, else the newest release before it in PEP 440 order; None before the first or for no version.

        A dev or pre-release comes before its release (``0.12.0.dev3`` reads as 0.11.2's code, the newest it can
        be sure of); a local build (``2.13.0+cpu``) and a post release the data lacks read as their release.
        """
        if version in self._index:
            return version
        try:
            key = Version(version)
        except InvalidVersion:
            return None
        older = [v for v, parsed in zip(self.releases, self._ordered, strict=True) if parsed <= key]
        return older[-1] if older else None

    def _at(self, version: str) -> int | None:
        nearest = self.nearest(version)
        return None if nearest is None else self._index[nearest]

    def _spans(self, pairs: list) -> list[Span]:
        return [(self.releases[first], self.releases[last]) for first, last in pairs]

    @staticmethod
    def _holds(pairs: list, i: int) -> bool:
        for first, last in pairs:  # a loop, not any() over a generator: called for every row of a module's imports
            if first <= i <= last:
                return True
        return False

    # -- modules and names
    def module_spans(self, module: str) -> list[Span]:
        return self._spans(self._data["modules"].get(module, []))

    def name_spans(self, module: str, name: str) -> list[Span]:
        """Releases where ``name`` is defined or importable in ``module`` (``"Class.member"`` for a class's)."""
        return self._spans(self._data["names"].get(module, {}).get(name, []))

    def has(self, module: str, name: str | None, version: str) -> bool:
        i = self._at(version)
        if i is None:
            return False
        if name is None:
            return self._holds(self._data["modules"].get(module, []), i)
        return self._holds(self._data["names"].get(module, {}).get(name, []), i)

    def names(self, module: str, version: str) -> list[str]:
        """Every name of a module in a release (module-level names and ``Class.member`` ones)."""
        i = self._at(version)
        found = self._data["names"].get(module, {})
        return sorted(name for name, pairs in found.items() if i is not None and self._holds(pairs, i))

    def modules(self, version: str) -> list[str]:
        i = self._at(version)
        return sorted(m for m, pairs in self._data["modules"].items() if i is not None and self._holds(pairs, i))

    def where(self, name: str) -> list[tuple[str, str, str]]:
        """Every module that ever had this public name, with each span: ``[(module, first, last), ...]``."""
        if self._where is None:
            self._where = {}
            for module, names in self._data["names"].items():
                for each in names:
                    self._where.setdefault(each, []).append(module)
        found = []
        for module in self._where.get(name, []):
            found += [(module, first, last) for first, last in self.name_spans(module, name)]
        return sorted(found, key=lambda item: (self._index[item[1]], item[0]))

    # -- signatures, classes, dataclass fields
    def _valued(self, table: str, qualname: str, version: str):
        return self._valued_in(self._data[table], qualname, version)

    def signature(self, qualname: str, version: str) -> Signature | None:
        """``trl.trainer.grpo_trainer.GRPOTrainer._get_train_sampler`` as that release defines it (not inherited)."""
        text = self._valued("signatures", qualname, version)
        return None if text is None else Signature.parse(text)

    def signature_spans(self, qualname: str) -> list[tuple[str, str, Signature]]:
        return [
            (self.releases[first], self.releases[last], Signature.parse(text))
            for first, last, text in self._data["signatures"].get(qualname, [])
        ]

    def methods(self, qualname: str, version: str) -> dict[str, Signature]:
        """A class's own methods (not its properties, not what it inherits) and their signatures in a release."""
        if self._methods is None:
            self._methods = {}
            for name in self._data["signatures"]:
                owner, _, method = name.rpartition(".")
                self._methods.setdefault(owner, []).append(method)
        found = {}
        for method in self._methods.get(qualname, ()):
            signature = self.signature(f"{qualname}.{method}", version)
            if signature is not None:
                found[method] = signature
        return found

    def bases(self, qualname: str, version: str) -> list[str] | None:
        """A class's bases as its source writes them (``["Trainer"]``); None when the release has no such class."""
        return self._valued("bases", qualname, version)

    def fields(self, qualname: str, version: str) -> dict[str, str]:
        """A dataclass's fields (its same-package bases' included) -> the default's source text (``<required>``)."""
        return dict(self._valued("fields", qualname, version) or {})

    def assigned_attributes(self, qualname: str, version: str) -> list[str]:
        """The attributes a class's own methods assign on self (``self.X = ...``, in ``__init__`` or elsewhere; not
        its bases'), as that release defines the class; [] for a class it does not have."""
        i = self._at(version)
        found = self._data.get("attributes", {}).get(qualname, {})
        return sorted(name for name, pairs in found.items() if i is not None and self._holds(pairs, i))

    def self_calls(self, qualname: str, version: str) -> dict[str, list[SelfCall]]:
        """How a class's own methods call the methods of its class chain, as that release has them: method ->
        its calls (``self.m(...)``, ``super().m(...)``, ``self.m`` handed to a method that calls it)."""
        found = {}
        for method in self._data.get("calls", {}).get(qualname, {}):
            made = self._valued_in(self._data["calls"][qualname], method, version)
            if made:
                found[method] = [SelfCall(c, p, tuple(k), via) for c, p, k, via in made]
        return found

    def kernels(self, version: str) -> list[Kernel]:
        """The optional compiled kernels of a release: a name set to None when the kernel's import fails, and
        called untested on a path a class's method runs unconditionally."""
        found = []
        for module, names in self._data.get("kernels", {}).items():
            for name in names:
                value = self._valued_in(names, name, version)
                if value:
                    uses = tuple((function, line, tuple(callers)) for function, line, callers in value["uses"])
                    needs = tuple(value["needs"])
                    found.append(Kernel(module, name, value["from"], value["line"], value["imported"], needs, uses))
        return found

    def argument_reads(self, version: str) -> list[ArgumentRead]:
        """What the release's GRPO trainer reads on its annotated arguments when it is built (reader's "o" facts)."""
        found = []
        for qualname, reads in self._data.get("argument_reads", {}).items():
            for key in reads:
                value = self._valued_in(reads, key, version)
                if value:
                    parameter, _, attribute = key.partition(".")
                    classes = tuple((module, cls) for module, cls in value[1])
                    found.append(ArgumentRead(qualname, parameter, attribute, value[0], classes))
        return found

    def guard_statements(self, module: str, version: str) -> list[str] | None:
        """The module-level statements of a module that the guards' evaluator reads, as that release has them (what
        its guards test, its availability checks and probes, and the names those read; the reader's ``"g"`` facts);
        None where the data holds no such facts (read before they were recorded)."""
        table = self._data.get("guards")
        if not table:
            return None
        found = table.get(module, {})
        return [text for name in found if (text := self._valued_in(found, name, version)) is not None]

    def _valued_in(self, table: dict, key: str, version: str):
        i = self._at(version)
        for first, last, value in table.get(key, []):
            if i is not None and first <= i <= last:
                return value
        return None

    # -- imports and requirements
    def imports(self, module: str, version: str) -> list[ModuleImport]:
        i = self._at(version)
        if i is None:
            return []
        if (module, i) not in self._imports_at:  # the what-if asks again for each guard it follows through a module
            found = []
            for imported, names, guard, line, pairs in self._data["imports"].get(module, []):
                if self._holds(pairs, i):
                    found.append(ModuleImport(imported, tuple(names.split(",")) if names else (), guard or None, line))
            self._imports_at[(module, i)] = sorted(found, key=lambda item: item.line)
        return list(self._imports_at[(module, i)])

    def requires(self, version: str) -> list[str]:
        i = self._at(version)
        for first, last, lines in self._data["requires"]:
            if i is not None and first <= i <= last:
                return list(lines)
        return []

    def declared(self, version: str, distribution: str, extra: str | None = None) -> list[Requirement]:
        """What a release requires of ``distribution`` (unsloth 2025.5.1: ``trl<=0.15.2,...``): the requirements a
        plain install pulls, and with ``extra`` those of that extra too. Other markers (platform, Python) stay on
        each Requirement for the caller to judge; [] when it declares none, or its requirements are unknown."""
        return _requirements_on(self.requires(version), distribution, extra)

    def releases_accepting(self, distribution: str, version: str) -> list[str]:
        """The releases whose plain-install requirements on ``distribution`` all accept it at ``version`` (whatever
        their other markers), oldest first; a release declaring none accepts any, one with unknown requirements is
        left out (``requires()`` is [] for it)."""
        target = Version(version)
        accepting = []
        for first, last, lines in self._data["requires"]:  # one span of releases declaring the same lines
            requirements = _requirements_on(lines, distribution, None)
            if lines and all(r.specifier.contains(target, prereleases=True) for r in requirements):
                accepting += self.releases[first : last + 1]
        return sorted(accepting, key=self._index.__getitem__)


def _requirements_on(lines: list[str], distribution: str, extra: str | None) -> list[Requirement]:
    """The Requires-Dist lines naming ``distribution`` that a plain install (or one with ``extra``) pulls."""
    wanted = canonicalize_name(distribution)
    found = []
    for line in lines:
        name = _REQUIREMENT_NAME.match(line)
        if name is None or canonicalize_name(name.group(1)) != wanted:
            continue
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue  # a line packaging cannot read is not judged
        extras = {canonicalize_name(e) for e in _EXTRA.findall(str(requirement.marker or ""))}
        if not extras or (extra is not None and canonicalize_name(extra) in extras):
            found.append(requirement)
    return found


@cache
def load(distribution: str) -> ApiHistory | None:
    """A distribution's history (read once), or None when there is no data for it."""
    path = DATA / f"{distribution}.json.gz"
    if not path.exists():
        return None
    return ApiHistory(_decoded(path))


# The tables keyed by module or qualified name (or a module's kernels): a question reads a few hundred of their tens
# of thousands of keys, so each key's value is its own line of JSON in the data, decoded when first read.
KEYED_TABLES = (
    "modules", "names", "imports", "signatures", "bases", "fields", "attributes", "calls", "kernels", "guards"
)  # fmt: skip


class _LazyTable(Mapping):
    """A keyed table whose values are decoded on first read (each key's JSON text, as the data file holds it)."""

    __slots__ = ("_decoded", "_encoded")

    def __init__(self, encoded: dict[str, bytes]) -> None:
        self._encoded = encoded
        self._decoded: dict = {}

    def __getitem__(self, key: str):
        try:
            return self._decoded[key]
        except KeyError:
            value = self._decoded[key] = json.loads(self._encoded[key])
            return value

    def get(self, key: str, default=None):
        return self[key] if key in self._encoded else default

    def __contains__(self, key: object) -> bool:
        return key in self._encoded

    def __iter__(self):
        return iter(self._encoded)

    def __len__(self) -> int:
        return len(self._encoded)


def _decoded(path: Path) -> dict:
    """The data of ``path`` as ``matrix.api_history.encode`` writes it: a first line of JSON with the plain tables
    and, for each keyed table, its keys in order; then each of those keys' value as one line of JSON, in the same
    order. Only that first line is decoded here (decoding every value was most of a cold ``doctor``'s time)."""
    lines = iter(gzip.decompress(path.read_bytes()).split(b"\n"))
    data = json.loads(next(lines))
    for table, keys in data.items():
        if table in KEYED_TABLES:
            data[table] = _LazyTable(dict(zip(keys, lines, strict=False)))  # the next len(keys) lines
    if list(lines) != [b""]:  # the last value's line break, and nothing after it
        raise ValueError(f"{path}: not the layout matrix.api_history writes (its keys and values do not pair up)")
    return data
