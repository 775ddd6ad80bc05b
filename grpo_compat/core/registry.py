"""The patch declaration and the registry of every patch grpo_compat ships.

A patch module under ``patches/<upstream library>/`` declares its fix with :func:`patch`; its module
docstring is the patch's record (symptom, upstream issue, affected versions, when to delete it).
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
    """One attribute to wrap: ``"package.module:Qualified.name"``; a trailing ``?`` marks it optional."""

    __slots__ = ("module", "optional", "qualname")

    def __init__(self, module: str, qualname: str, optional: bool = False) -> None:
        self.module, self.qualname, self.optional = module, qualname, optional

    @classmethod
    def parse(cls, spec: str) -> Target:
        module, sep, qualname = spec.rstrip("?").partition(":")
        if not sep or not module or not qualname:
            raise ValueError(f"target {spec!r} is not of the form 'package.module:Qualified.name'")
        return cls(module, qualname, spec.endswith("?"))

    def __str__(self) -> str:
        return f"{self.module}:{self.qualname}{'?' if self.optional else ''}"

    __repr__ = __str__


class Patch:
    """A declared fix: where it applies (version window, targets) and the wrapper that does it."""

    def __init__(
        self,
        id: str,  # noqa: A002 - "id" is the word every patch author expects here
        requires: tuple[str, ...],
        targets: tuple[Target, ...],
        wrapper: Wrapper,
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
        self.wrapper = wrapper
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
    """Register the decorated ``wrapper(wrapped, *args, **kwargs)`` as patch ``id``."""
    window = (requires,) if isinstance(requires, str) else tuple(requires)
    parsed = tuple(Target.parse(t) for t in ([targets] if isinstance(targets, str) else targets))

    def register(wrapper: Wrapper) -> Wrapper:
        known = _REGISTRY.get(id)
        if known is not None and known.wrapper.__module__ != wrapper.__module__:
            raise ValueError(f"patch id {id!r} is declared twice ({known.wrapper.__module__}, {wrapper.__module__})")
        module_doc = getattr(sys.modules.get(wrapper.__module__), "__doc__", None) or ""
        _REGISTRY[id] = Patch(id, window, parsed, wrapper, expects, detect, rebind_in, module_doc)
        return wrapper

    return register


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
