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
