"""The patch declaration and the registry of every patch grpo_compat ships.

A patch module under ``patches/<upstream library>/`` declares its fix with :func:`patch` (one wrapper
for its targets) or :func:`patch_each` (a wrapper per target); its module docstring is the patch's
record (symptom, upstream issue, affected versions, when to delete it).
Plain classes rather than dataclasses: this module is on the import path of ``apply()``, which
must stay within a few milliseconds.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

from grpo_compat.core.versions import distribution_of, parse_window

# wrapper(wrapped, *args, **kwargs): runs instead of the target and decides whether to call it.
Wrapper = Callable[..., Any]
# detect(module of the first target) -> None when the fix is needed here, else the reason it is not.
Detector = Callable[[Any], "str | None"]


class Target:
    """One attribute to wrap, ``"package.module:Qualified.name"`` (a trailing ``?``: optional), and its wrapper."""

    __slots__ = ("module", "optional", "qualname", "wrapper")

    def __init__(self, module: str, qualname: str, wrapper: Wrapper, optional: bool = False) -> None:
        self.module, self.qualname, self.wrapper, self.optional = module, qualname, wrapper, optional

    @classmethod
    def parse(cls, spec: str, wrapper: Wrapper) -> Target:
        module, sep, qualname = spec.rstrip("?").partition(":")
        if not sep or not module or not qualname:
            raise ValueError(f"target {spec!r} is not of the form 'package.module:Qualified.name'")
        return cls(module, qualname, wrapper, spec.endswith("?"))

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

    @property
    def summary(self) -> str:
        return self.doc.strip().splitlines()[0] if self.doc.strip() else ""

    @property
    def modules(self) -> list[str]:
        return sorted({target.module for target in self.targets})

    def __repr__(self) -> str:
        return f"<Patch {self.id} {self.requires}>"


_REGISTRY: dict[str, Patch] = {}


def patch(
    *,
    id: str,  # noqa: A002
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
    requires: str | tuple[str, ...],
    wrappers: dict[str, Wrapper],
    expects: tuple[str, ...] = (),
    detect: Detector | None = None,
    rebind_in: tuple[str, ...] = (),
) -> Patch:
    """Register patch ``id`` with a wrapper per target: ``{"package.module:Qualified.name": wrapper}``.

    For one fix in several parts that must never be applied apart; the first target's module is
    the patch's home (its distribution, and the module ``detect`` is asked about).
    """
    window = (requires,) if isinstance(requires, str) else tuple(requires)
    targets = tuple(Target.parse(spec, wrapper) for spec, wrapper in wrappers.items())
    module = next(iter(wrappers.values())).__module__
    known = _REGISTRY.get(id)
    if known is not None and known.targets[0].wrapper.__module__ != module:
        raise ValueError(f"patch id {id!r} is declared twice ({known.targets[0].wrapper.__module__}, {module})")
    module_doc = getattr(sys.modules.get(module), "__doc__", None) or ""
    _REGISTRY[id] = Patch(id, window, targets, expects, detect, rebind_in, module_doc)
    return _REGISTRY[id]


def registered_patches() -> list[Patch]:
    """Every shipped patch, sorted by id. Imports the patch modules, never their targets."""
    try:
        import grpo_compat.patches as package
    except ModuleNotFoundError:
        # patches/ becomes grpo_compat.patches only through the install's package-dir mapping.
        raise ModuleNotFoundError(
            "grpo_compat.patches is missing: grpo_compat is imported from a source tree that is not installed. "
            "Install it: pip install -e <path of the grpo_compat checkout>"
        ) from None

    for name in _module_names(package.__path__, package.__name__):
        importlib.import_module(name)
    return [_REGISTRY[key] for key in sorted(_REGISTRY)]


def wrapping_order() -> tuple[str, ...]:
    """Ids of the patches that share a target, outermost wrapper first (declared in ``grpo_compat.patches``).

    Reads the package's ``__init__`` only: the patch modules need not be imported for it.
    """
    import grpo_compat.patches as package

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
