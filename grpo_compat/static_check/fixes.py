"""The fix of a static-check finding (grpo_compat.static_check): a pin range read from the API histories
(grpo_compat.histories) where they hold both packages, else what to look for in words."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from grpo_compat.static_check.files import Install


def _history(distribution: str):
    try:
        import grpo_compat.histories as histories  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        return histories.load(distribution)
    except Exception:  # noqa: BLE001 - no data for it is no pin range, never a failed check
        return None


def _key(version: str):
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version)
    except InvalidVersion:
        return Version("0")


def _newer(history, installed: str | None) -> list[str]:
    return [r for r in history.releases if installed is None or _key(r) > _key(installed)]


def _inside(version: str | None, spans: list[tuple[str, str]]) -> bool:
    return version is not None and any(_key(first) <= _key(version) <= _key(last) for first, last in spans)


def _pin_into(history, distribution: str, installed: str | None, spans: list[tuple[str, str]]) -> str | None:
    """The range of ``distribution`` nearest the installed release that lies inside ``spans``."""
    if not spans or installed is None or _inside(installed, spans):
        return None
    before = [last for _, last in spans if _key(last) < _key(installed)]
    after = [first for first, _ in spans if _key(first) > _key(installed)]
    if before:
        last = max(before, key=_key)
        following = [r for r in history.releases if _key(r) > _key(last)]
        return f"'{distribution}<{following[0]}'" if following else f"'{distribution}<={last}'"
    if after:
        return f"'{distribution}>={min(after, key=_key)}'"
    return None


def _join(options: list[str | None], fallback: str) -> str:
    found = [option for option in options if option]
    return "pip install " + " or ".join(found) if found else fallback


def for_missing(install: Install, distribution: str, importer: str, owner: str, target: str, name: str | None) -> str:
    """``from target import name`` (or ``import target``) by ``importer`` of ``distribution`` fails on ``owner``."""
    theirs, ours = _history(owner), _history(distribution)
    owner_pin = mine_pin = None
    if theirs is not None:
        spans = theirs.name_spans(target, name) if name else theirs.module_spans(target)
        owner_pin = _pin_into(theirs, owner, install.version(owner), spans)
    if ours is not None:
        for release in _newer(ours, install.version(distribution)):
            imports = ours.imports(importer, release) or []
            # an import under a version test (trl 0.27: `... and Version(vllm.__version__) <= Version('0.10.2')`)
            # no longer runs with the release that lacks the name
            if not any(
                i.module == target and (name is None or name in i.names) and "version" not in (i.guard or "").lower()
                for i in imports
            ):
                mine_pin = f"'{distribution}>={release}'"
                break
    what = f"{target}.{name}" if name else target
    return _join(
        [owner_pin, mine_pin],
        f"install a {owner} release that has {what}, or a {distribution} release that no longer imports it",
    )


def leaf_install(install: Install, owner: str) -> str:
    """``pip install owner``, unless its newest release (the histories' requirements) pins torch exactly while the
    installed torch is a CPU build: a package that pins torch is compiled against PyPI's build of it, a CUDA one (a
    GPU engine such as vLLM), and cannot work beside this torch, so it is not proposed."""
    from packaging.requirements import InvalidRequirement, Requirement

    from grpo_compat.core.versions import is_cuda_torch

    history, torch = _history(owner), install.version("torch")
    if history is None or not history.releases or torch is None:
        return f"pip install {owner}"
    if is_cuda_torch(torch, install.version):
        return f"pip install {owner}"
    newest = history.releases[-1]
    for text in history.requires(newest) or []:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        if requirement.name != "torch" or (requirement.marker is not None and "extra" in str(requirement.marker)):
            continue
        if any(specifier.operator == "==" for specifier in requirement.specifier):
            return (
                f"not an install of {owner}: {owner} {newest} pins torch ({requirement.specifier}), a build compiled "
                f"for CUDA, and torch {torch} here is a CPU build; use a release of the importing package that does "
                f"not import {owner} at load time"
            )
    return f"pip install {owner}"


def for_signature(
    install: Install, callee: tuple[str, str], caller: tuple[str, str], shape: tuple[int, list[str]]
) -> str:
    """A method of ``callee`` (distribution, qualified name) refuses how ``caller``'s code calls it."""
    (callee_distribution, callee_name), (caller_distribution, caller_name) = callee, caller
    shape = (shape[0] + 1, shape[1])  # the histories' signatures count self
    options = []
    history = _history(callee_distribution)
    if history is not None:
        for release in _newer(history, install.version(callee_distribution)):
            signature = history.signature(callee_name, release)
            if signature is not None and signature.accepts(*shape) is None:
                options.append(f"'{callee_distribution}>={release}'")
                break
    history = _history(caller_distribution)
    if history is not None:  # the base's own method: the releases whose own signature refuses this call
        spans = [(first, last) for first, last, signature in history.signature_spans(caller_name)
                 if signature.accepts(*shape) is not None]  # fmt: skip
        options.append(_pin_into(history, caller_distribution, install.version(caller_distribution), spans))
    method = callee_name.rsplit(".", 1)[-1]
    return _join(
        options,
        f"install a {callee_distribution} release whose {method} takes this call, or a {caller_distribution} "
        f"release that calls it as the installed {callee_distribution} expects",
    )


def for_removed_attribute(
    install: Install, owner: str, cls: str, attribute: str, spans: list[tuple[str, str]], reader: str
) -> str:
    """``reader``'s code reads ``attribute`` on an object of ``owner``'s class ``cls``, which ``owner`` had in
    ``spans`` (the API histories) and the installed release no longer sets: the nearest range of releases that had
    it."""
    history = _history(owner)
    pin = _pin_into(history, owner, install.version(owner), spans) if history is not None else None
    return _join(
        [pin],
        f"install a {owner} release whose {cls} has {attribute}, or a {reader} release that no longer reads it",
    )


def for_keyword(install: Install, callee: tuple[str, str], caller: tuple[str, str], keyword: str) -> str:
    """``caller``'s code passes ``keyword`` to ``callee``'s function or class, which does not take it."""
    (owner, qualname), (distribution, _module) = callee, caller
    history = _history(owner)
    options = []
    if history is not None:
        spans = []
        for name in (qualname, f"{qualname}.__init__"):
            spans += [(first, last) for first, last, signature in history.signature_spans(name)
                      if signature.accepts(0, [keyword]) is None]  # fmt: skip
        options.append(_pin_into(history, owner, install.version(owner), spans))
    return _join(options, f"install a {owner} release whose {qualname.rsplit('.', 1)[-1]} takes {keyword}=, "
                          f"or a {distribution} release that does not pass it")  # fmt: skip


# -- one finding per root cause, the smallest change --------------------------------------------------------------


def collapse(install: Install, findings: list) -> list:
    """The findings as the user should read them: each module once, in the order the import meets it; the findings
    one guard causes as one finding whose fix is the guard's (a pin), not one leaf install per symptom; every pin
    bounded by what the other installed packages declare; the grpo_compat patch that handles it, where one does."""
    from grpo_compat.static_check.files import Finding

    unique: dict[tuple, Finding] = {}
    for finding in findings:
        unique.setdefault((finding.kind, finding.message), finding)
    _one_per_import_line(unique)
    grouped: dict[tuple, list[Finding]] = {}
    result: list[Finding | tuple] = []
    for finding in unique.values():
        if finding.cause[:1] == ("always-true",):
            key = (finding.package, finding.cause[1].name, finding.cause[2])
            if key not in grouped:
                grouped[key] = []
                result.append(key)  # the group stands where its first symptom is met
            grouped[key].append(finding)
        else:
            result.append(finding)
    shown = [_always_true(install, grouped[item]) if isinstance(item, tuple) else item for item in result]
    for finding in shown:
        if finding.cause[:1] != ("always-true",):
            record = _known_record(install, error=finding.message.rsplit(": ", 1)[-1])
            if record is not None and record.fix and not finding.fix.startswith("pip install"):
                finding.fix = record.fix  # the record's tested fix over a description of what to look for
            finding.fix += _patch_note(install, record)
        finding.fix = bounded(install, finding.fix)
    return shown


def _one_per_import_line(unique: dict) -> None:
    """``from m import a, b, c`` that lacks all three: one finding naming them (Python stops at the first)."""
    import re

    first_of_line: dict[str, tuple] = {}
    for key, finding in list(unique.items()):
        if finding.kind != "missing-name":
            continue
        name = re.search(r" imports (\w+) from ", finding.message)
        if name is None:
            continue
        if finding.where not in first_of_line:
            first_of_line[finding.where] = (key, [name.group(1)])
            continue
        first_key, names = first_of_line[finding.where]
        names.append(name.group(1))
        del unique[key]
        kept = unique[first_key]
        kept.message = re.sub(r" imports [\w, ]+? from ", f" imports {', '.join(names)} from ", kept.message, count=1)


def _always_true(install: Install, symptoms: list):
    """One finding for the imports an always-true availability check lets run (transformers >= 5.3's probe
    returns a (found, version) tuple, which trl 0.19-0.28 read as a bool)."""
    from grpo_compat.static_check.files import Finding

    first = symptoms[0]
    _, home, probe, _guard = first.cause
    owner = install.owner(home.name)
    owner_version = f"{owner} {install.version(owner)}"
    modules = list(dict.fromkeys(s.other.removesuffix(" not installed") for s in symptoms))
    guards = list(dict.fromkeys(s.cause[3] for s in symptoms))
    them = "it is" if len(modules) == 1 else "none of them is"
    message = (
        f"{first.package} imports {', '.join(modules)} when its GRPO trainer loads although {them} installed: "
        f"{', '.join(guards)} {'is' if len(guards) == 1 else 'are'} always true, since {owner_version}'s {probe}() "
        f"({home.relative_path}) returns a (found, version) tuple; the first import fails: No module named "
        f"'{modules[0]}'"
    )
    distribution = first.package.split()[0]
    record = _known_record(install, probe)
    fix = record.fix if record is not None and record.fix else (
        f"install a {owner} release whose {probe}() returns a bool, or a {distribution} release that reads its first "
        "item"
    )  # fmt: skip
    fix += _patch_note(install, record)
    finding = Finding("missing-module", message, first.where, first.package, owner_version, fix)
    finding.cause = first.cause
    return finding


def _known_record(install: Install, identifier: str | None = None, error: str | None = None):
    """The catalogue record whose versions hold this install and that names the finding: its cause names
    ``identifier`` (the code object the finding's cause is), or one of its patterns matches ``error`` (the error the
    finding says Python will raise). Its fix has been run; its patches handle it."""

    try:
        from grpo_compat.catalogue import load_failures
    except ImportError:
        return None
    for record in load_failures():
        if not record.confirmed or not record.affects or not _holds(install, record.affects):
            continue
        if identifier and identifier in f"{record.title} {record.cause}":
            return record
        if error and any(_searches(pattern, error) for pattern in record.patterns):
            return record
    return None


def _searches(pattern: str, text: str) -> bool:
    import re

    try:
        return re.search(pattern, text) is not None
    except re.error:
        return False


def _holds(install: Install, windows) -> bool:
    from packaging.requirements import InvalidRequirement, Requirement

    for window in windows:
        try:
            requirements = [Requirement(text) for text in window]
        except InvalidRequirement:
            continue
        if all(
            install.version(r.name) and r.specifier.contains(install.version(r.name), prereleases=True)
            for r in requirements
        ):
            return True
    return False


def _patch_note(install: Install, record) -> str:
    """Which grpo_compat patch handles the record here (its window holding the installed versions)."""
    if record is None:
        return ""
    from grpo_compat.patch_index import PATCHES

    here = [p for p in PATCHES if p["id"] in (record.patches or ()) and _holds(install, [p["requires"]])]
    if not here:
        return ""
    doing = {"fixed": "fixes it", "refused": "refuses it before the model loads", "diagnosed": "names it"}
    patches = ", ".join(p["id"] for p in here)
    return f" (grpo_compat.apply() {doing.get(record.handling, 'handles it')}: patch {patches})"


def bounded(install: Install, fix: str) -> str:
    """Each ``'name>=version'`` the fix proposes, with the upper bounds the other installed packages declare on
    ``name`` (ms-swift 3.10 declares trl<0.25: ``'trl>=0.17.0,<0.25'``, where an open ``trl>=0.17.0`` let pip move
    past what ms-swift takes); an option that no bound leaves room for is dropped."""
    import re

    if not fix.startswith("pip install "):
        return fix
    options = []
    for option in fix.removeprefix("pip install ").split(" or "):
        found = re.fullmatch(r"'([A-Za-z0-9._-]+)>=([^',]+)'", option.strip())
        if not found:
            options.append(option)
            continue
        name, lowest = found.groups()
        uppers = _declared_upper_bounds(install, name)
        if any(_key(lowest) >= _key(upper.lstrip("<=")) for upper in uppers if upper.startswith("<") and
               not upper.startswith("<=")) or any(_key(lowest) > _key(upper[2:]) for upper in uppers
                                                  if upper.startswith("<=")):  # fmt: skip
            continue
        options.append(f"'{name}>={lowest}{''.join(',' + u for u in uppers)}'")
    return "pip install " + " or ".join(options) if options else fix


def _declared_upper_bounds(install: Install, name: str) -> list[str]:
    """The tightest ``<`` / ``<=`` bound on ``name`` that the installed distributions' requirements declare."""
    from packaging.requirements import InvalidRequirement, Requirement

    from grpo_compat.core.versions import folder_name
    from grpo_compat.histories import _REQUIREMENT_NAME

    bounds = []
    for normalized, (_, _, _) in install.distributions.items():
        if normalized == folder_name(name):
            continue
        for text in install.requires(normalized):
            leading = _REQUIREMENT_NAME.match(text)  # a requirement on another name is not parsed (5,000 on ms-swift)
            if leading is None or folder_name(leading.group(1)) != folder_name(name):
                continue
            try:
                requirement = Requirement(text)
            except InvalidRequirement:
                continue
            if folder_name(requirement.name) != folder_name(name) or (
                requirement.marker is not None and "extra" in str(requirement.marker)
            ):
                continue
            bounds += [(s.operator, s.version) for s in requirement.specifier if s.operator in ("<", "<=")]
    if not bounds:
        return []
    operator, version = min(bounds, key=lambda b: (_key(b[1]), b[0] == "<="))
    return [f"{operator}{version}"]


class VersionsOnly:
    """A set known by its versions alone (the what-if's): what these fixes read of an install."""

    def __init__(self, versions: dict[str, str]) -> None:
        self.versions = versions  # canonical name -> version

    def version(self, distribution: str) -> str | None:
        from grpo_compat.core.versions import canonicalize_name

        return self.versions.get(canonicalize_name(distribution))
