"""Post-import hooks: run a callback right after a named module finishes executing.

Patches must not import their targets (``import grpo_compat; grpo_compat.apply()`` may not pull in
torch or trl), so they wait here until the user's own code imports the module. The finder only
wraps the loader of watched names and restores the original loader afterwards, so the imported
module looks exactly as it would without us.
"""

from __future__ import annotations

import _thread
import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType

ModuleCallback = Callable[[ModuleType], None]


class _CallbackLoader:
    # Not an importlib.abc.Loader subclass on purpose: importing importlib.abc costs ~10 ms.
    def __init__(self, loader: object, on_loaded: Callable[[ModuleType], None]) -> None:
        self._loader = loader
        self._on_loaded = on_loaded

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        # Hand the module its real loader before upstream code runs: inspect.getsource and
        # importlib.resources look at __loader__.
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        self._on_loaded(module)


class PostImportFinder:
    """A meta path finder that only ever answers for watched module names."""

    def __init__(self) -> None:
        self._callbacks: dict[str, list[ModuleCallback]] = {}
        self._resolving: set[str] = set()
        self._lock = _thread.RLock()

    def watch(self, module_name: str, callback: ModuleCallback) -> None:
        """Call ``callback(module)`` once the module is imported; at once if it already is."""
        module = sys.modules.get(module_name)
        if module is not None and not still_loading(module):
            callback(module)
            return
        with self._lock:
            self._callbacks.setdefault(module_name, []).append(callback)
            if self not in sys.meta_path:
                sys.meta_path.insert(0, self)

    def clear(self) -> None:
        with self._lock:
            self._callbacks.clear()
            if self in sys.meta_path:
                sys.meta_path.remove(self)

    def find_spec(self, fullname: str, path=None, target=None):
        with self._lock:
            if fullname not in self._callbacks or fullname in self._resolving:
                return None
            self._resolving.add(fullname)
        try:
            spec = _spec_from_other_finders(self, fullname, path, target)
        finally:
            with self._lock:
                self._resolving.discard(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _CallbackLoader(spec.loader, self._run_callbacks)
        return spec

    def _run_callbacks(self, module: ModuleType) -> None:
        with self._lock:
            callbacks = self._callbacks.pop(module.__name__, [])
            if not self._callbacks and self in sys.meta_path:
                sys.meta_path.remove(self)
        for callback in callbacks:
            callback(module)


def _spec_from_other_finders(me: PostImportFinder, fullname: str, path, target):
    for finder in sys.meta_path:
        if finder is me or not hasattr(finder, "find_spec"):
            continue
        spec = finder.find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None


def still_loading(module: ModuleType | None) -> bool:
    """Whether ``module``'s own code is still running (it is in sys.modules from its first line on)."""
    return module is not None and bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


_FOUND: dict[str, importlib.machinery.ModuleSpec | None] = {}


def module_exists(name: str) -> bool:
    """Whether ``name`` can be imported, found without executing any package code.

    Specs are remembered (the patches share their few target modules and packages) until
    :func:`forget_found_modules`, which the engine calls at each ``apply()``.
    """
    return name in sys.modules or _found_spec(name) is not None


def forget_found_modules() -> None:
    _FOUND.clear()


def _found_spec(name: str) -> importlib.machinery.ModuleSpec | None:
    if name in _FOUND:
        return _FOUND[name]
    parent, _, _ = name.rpartition(".")
    if not parent:
        spec = importlib.util.find_spec(name)  # finding a top-level spec runs no package code
    else:  # a submodule is looked up on disk, beside its package, without importing the package
        loaded = sys.modules.get(parent)
        package = getattr(loaded, "__spec__", None) if loaded is not None else _found_spec(parent)
        locations = getattr(package, "submodule_search_locations", None)
        spec = importlib.machinery.PathFinder.find_spec(name, list(locations)) if locations is not None else None
    _FOUND[name] = spec
    return spec
