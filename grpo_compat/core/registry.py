"""The patch declaration and the registry of every patch grpo_compat ships.

A patch module under ``patches/<upstream library>/`` declares its fix with :func:`patch` (one wrapper
for its targets) or :func:`patch_each` (a wrapper per target); its module docstring is the patch's
record (symptom, upstream issue, affected versions, when to delete it).
Plain classes rather than dataclasses, and ``typing`` only for type checkers: this module is on the
import path of ``apply()``, which must stay within a few milliseconds.
"""

from __future__ import annotations

import importlib
import os
import sys

from grpo_compat.core.versions import distribution_of, parse_window

TYPE_CHECKING = False  # typing costs milliseconds of apply(): imported by type checkers only
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    # wrapper(wrapped, *args, **kwargs): runs instead of the target and decides whether to call it.
    Wrapper = Callable[..., Any]
    # detect(module of the first target) -> None when the fix is needed here, else the reason it is not.
    Detector = Callable[[Any], "str | None"]


class Target:
    """One attribute to wrap, ``"package.module:Qualified.name"`` (a trailing ``?``: optional), and its wrapper.

    ``expects``: the parameters this target must still take, where they differ from its patch's (None: the patch's).
    """

    __slots__ = ("expects", "module", "optional", "qualname", "wrapper")

    def __init__(
        self,
        module: str,
        qualname: str,
        wrapper: Wrapper,
        optional: bool = False,
        expects: tuple[str, ...] | None = None,
    ) -> None:
        self.module, self.qualname, self.wrapper, self.optional = module, qualname, wrapper, optional
        self.expects = expects

    @classmethod
    def parse(cls, spec: str, wrapper: Wrapper, expects: tuple[str, ...] | None = None) -> Target:
        module, sep, qualname = spec.rstrip("?").partition(":")
        if not sep or not module or not qualname:
            raise ValueError(f"target {spec!r} is not of the form 'package.module:Qualified.name'")
        return cls(module, qualname, wrapper, spec.endswith("?"), expects)

    def __str__(self) -> str:
        return f"{self.module}:{self.qualname}{'?' if self.optional else ''}"

    __repr__ = __str__


class Patch:
    """A declared fix: where it applies (version window) and what it wraps (targets, each with its wrapper)."""

    def __init__(
        self,
        id: str,  # noqa: A002 - "id" is the word every patch author expects here
        requires: tuple[str, ...],
        targets: tuple[Target, ...],
        expects: tuple[str, ...] = (),
        detect: Detector | None = None,
        rebind_in: tuple[str, ...] = (),
        doc: str = "",
        catalogue: tuple[str, ...] = (),
        module: str = "",
    ) -> None:
        for window in requires:
            parse_window(window)  # a malformed window is a bug in the patch: fail at import
        self.id = id
        self.distribution = distribution_of(targets[0].module)
        self.requires = requires
        self.targets = targets
        # Parameter names the target must still accept; otherwise upstream changed it and we stand back.
        self.expects = expects
        self.detect = detect
        # Extra top-level packages whose modules may hold a by-name import of a wrapped function.
        self.rebind_in = rebind_in
        self.doc = doc
        # Ids of its failure records in grpo_compat/catalogue/failures.toml: the one place a patch names them.
        self.catalogue = catalogue
        self.module = module  # the patch module that declared it

    @property
    def summary(self) -> str:
        return self.doc.strip().splitlines()[0] if self.doc.strip() else ""

    @property
    def modules(self) -> list[str]:
        return sorted({target.module for target in self.targets})

    def load(self) -> Patch:
        return self

    def __repr__(self) -> str:
        return f"<Patch {self.id} {self.requires}>"


class Declaration:
    """A patch as the generated index declares it: what the engine and report need, without its module.

    ``load()`` imports the patch module (once a target module is imported) and returns its :class:`Patch`.
    """

    __slots__ = ("catalogue", "distribution", "id", "module", "requires", "summary", "targets")

    def __init__(
        self,
        id: str,  # noqa: A002
        module: str,
        catalogue: tuple[str, ...],
        requires: tuple[str, ...],
        targets: tuple[str, ...],
        summary: str,
    ) -> None:
        self.id, self.module, self.catalogue, self.requires, self.summary = id, module, catalogue, requires, summary
        self.targets = tuple(Target.parse(spec, _not_loaded) for spec in targets)
        self.distribution = distribution_of(self.targets[0].module)

    modules = Patch.modules

    def load(self) -> Patch:
        importlib.import_module(self.module)
        declared = _REGISTRY.get(self.id)
        if declared is None or declared.module != self.module:
            raise LookupError(f"{self.module} does not declare {self.id}: {STALE_INDEX}")
        return declared

    def __repr__(self) -> str:
        return f"<Declaration {self.id} {self.requires}>"


def _not_loaded(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("a declared patch's wrapper runs only after Declaration.load()")


INDEX_MODULE = "grpo_compat.patch_index"
STALE_INDEX = f"{INDEX_MODULE} is out of date: run python -m grpo_compat.tools.regenerate"


_REGISTRY: dict[str, Patch] = {}


def patch(
    *,
    id: str,  # noqa: A002
    catalogue: str | tuple[str, ...] = (),
    requires: str | tuple[str, ...],
    targets: str | list[str] | tuple[str, ...],
    expects: tuple[str, ...] = (),
    detect: Detector | None = None,
    rebind_in: tuple[str, ...] = (),
) -> Callable[[Wrapper], Wrapper]:
    """Register the decorated ``wrapper(wrapped, *args, **kwargs)`` as patch ``id``, for every target."""
    specs = [targets] if isinstance(targets, str) else list(targets)

    def register(wrapper: Wrapper) -> Wrapper:
        patch_each(
            id=id,
            catalogue=catalogue,
            requires=requires,
            wrappers={spec: wrapper for spec in specs},
            expects=expects,
            detect=detect,
            rebind_in=rebind_in,
        )
        return wrapper

    return register


def patch_each(
    *,
    id: str,  # noqa: A002
    catalogue: str | tuple[str, ...] = (),
    requires: str | tuple[str, ...],
    wrappers: dict[str, Wrapper],
    expects: tuple[str, ...] | dict[str, tuple[str, ...]] = (),
    detect: Detector | None = None,
    rebind_in: tuple[str, ...] = (),
) -> Patch:
    """Register patch ``id`` with a wrapper per target: ``{"package.module:Qualified.name": wrapper}``.

    ``catalogue``: the id (or ids) of the failure record(s) in ``grpo_compat/catalogue/failures.toml``
    that the patch handles; ``requires``: its version window, declared here only (docs, report, doctor
    and the checks of the record's and reproducers' windows read it from here).

    For one fix in several parts that must never be applied apart; the first target's module is
    the patch's home (its distribution, and the module ``detect`` is asked about). ``expects``: the parameters
    every target must still take, or ``{spec: parameters}`` for targets with different signatures.
    """
    window = (requires,) if isinstance(requires, str) else tuple(requires)
    per_target = expects if isinstance(expects, dict) else {}
    targets = tuple(Target.parse(spec, wrapper, per_target.get(spec)) for spec, wrapper in wrappers.items())
    expects = () if isinstance(expects, dict) else expects
    module = next(iter(wrappers.values())).__module__
    known = _REGISTRY.get(id)
    if known is not None and known.targets[0].wrapper.__module__ != module:
        raise ValueError(f"patch id {id!r} is declared twice ({known.targets[0].wrapper.__module__}, {module})")
    module_doc = getattr(sys.modules.get(module), "__doc__", None) or ""
    records = (catalogue,) if isinstance(catalogue, str) else tuple(catalogue)
    _REGISTRY[id] = Patch(id, window, targets, expects, detect, rebind_in, module_doc, records, module)
    return _REGISTRY[id]


def _patches_package() -> Any:
    try:
        import grpo_compat.patches as package
    except ModuleNotFoundError:
        # patches/ becomes grpo_compat.patches only through the install's package-dir mapping.
        raise ModuleNotFoundError(
            "grpo_compat.patches is missing: grpo_compat is imported from a source tree that is not installed. "
            "Install it: pip install -e <path of the grpo_compat checkout>"
        ) from None
    return package


def registered_patches() -> list[Patch]:
    """Every shipped patch, sorted by id. Imports the patch modules, never their targets."""
    package = _patches_package()
    for name in _module_names(package.__path__, package.__name__):
        importlib.import_module(name)
    return [_REGISTRY[key] for key in sorted(_REGISTRY)]


_DECLARED: list[Declaration] = []


def declared_patches() -> list[Declaration]:
    """Every shipped patch, sorted by id, read from the generated index: no patch module is imported."""
    if not _DECLARED:
        index = importlib.import_module(INDEX_MODULE)
        _DECLARED.extend(Declaration(**entry) for entry in index.PATCHES)
    return list(_DECLARED)


def declared_wrapping_order() -> tuple[str, ...]:
    """:func:`wrapping_order` as the generated index holds it: no patch module, not even the package, is imported."""
    return tuple(importlib.import_module(INDEX_MODULE).WRAPPING_ORDER)


def wrapping_order() -> tuple[str, ...]:
    """Ids of the patches that share a target, outermost wrapper first (declared in ``grpo_compat.patches``).

    Reads the package's ``__init__`` only: the patch modules need not be imported for it.
    """
    package = _patches_package()
    return tuple(package.WRAPPING_ORDER)


def _module_names(paths: list[str], prefix: str) -> list[str]:
    # A walk of the folders, cheaper than pkgutil: patches are plain .py files in sub-packages.
    names = []
    for path in paths:
        for entry in sorted(os.listdir(path)):
            full = os.path.join(path, entry)
            if entry.endswith(".py") and entry != "__init__.py":
                names.append(f"{prefix}.{entry[:-3]}")
            elif os.path.isfile(os.path.join(full, "__init__.py")):
                names.append(f"{prefix}.{entry}")
                names += _module_names([full], f"{prefix}.{entry}")
    return names
