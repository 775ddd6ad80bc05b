"""Import hooks: run a callback right after a named module finishes executing, or just before the first of some
modules starts executing.

Patches must not import their targets (``import grpo_compat; grpo_compat.apply()`` may not pull in
torch or trl), so they wait here until the user's own code imports the module; the engine decides which patches
apply when the first upstream package starts loading. The finder only wraps the loader of watched names and
restores the original loader before the module's code runs, so the imported module looks exactly as it would
without us.
"""

from __future__ import annotations

import _thread
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

TYPE_CHECKING = False  # collections.abc is not imported at start-up: it costs apply() half a millisecond
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    ModuleCallback = Callable[[ModuleType], None]


class _CallbackLoader:
    # Not an importlib.abc.Loader subclass on purpose: importing importlib.abc costs ~10 ms.
    def __init__(
        self, loader: object, on_loaded: Callable[[ModuleType], None], on_start: Callable[[str], None]
    ) -> None:
        self._loader = loader
        self._on_loaded = on_loaded
        self._on_start = on_start

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        # Hand the module its real loader before upstream code runs: inspect.getsource and
        # importlib.resources look at __loader__.
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._on_start(module.__name__)
        self._loader.exec_module(module)
        self._on_loaded(module)


class PostImportFinder:
    """A meta path finder that only ever answers for watched module names."""

    def __init__(self) -> None:
        self._callbacks: dict[str, list[ModuleCallback]] = {}
        self._at_first_start: dict[str, Callable[[], None]] = {}  # module name -> callback of watch_first_start
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

    def watch_first_start(self, module_names: Iterable[str], callback: Callable[[], None]) -> None:
        """Call ``callback()`` once, just before the code of whichever of these modules is imported first runs.

        For top-level packages that are not imported yet: the callback can still watch their submodules.
        """
        with self._lock:
            for name in module_names:
                self._at_first_start[name] = callback
            if self not in sys.meta_path:
                sys.meta_path.insert(0, self)

    def clear(self) -> None:
        with self._lock:
            self._callbacks.clear()
            self._at_first_start.clear()
            if self in sys.meta_path:
                sys.meta_path.remove(self)

    def find_spec(self, fullname: str, path=None, target=None):
        with self._lock:
            watched = fullname in self._callbacks or fullname in self._at_first_start
            if not watched or fullname in self._resolving:
                return None
            self._resolving.add(fullname)
        try:
            spec = _spec_from_other_finders(self, fullname, path, target)
        finally:
            with self._lock:
                self._resolving.discard(fullname)
        if spec is None:
            return spec
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            self._run_first_start(fullname)  # a namespace package: no code of its own, so now is before it runs
            return spec
        spec.loader = _CallbackLoader(spec.loader, self._run_callbacks, self._run_first_start)
        return spec

    def _run_callbacks(self, module: ModuleType) -> None:
        with self._lock:
            callbacks = self._callbacks.pop(module.__name__, [])
            self._leave_meta_path_when_idle()
        for callback in callbacks:
            callback(module)

    def _run_first_start(self, module_name: str) -> None:
        with self._lock:
            callback = self._at_first_start.get(module_name)
            if callback is None:
                return
            # Once: every module the callback was waiting for is forgotten before it runs (it may import them).
            for name in [n for n, c in self._at_first_start.items() if c is callback]:
                del self._at_first_start[name]
            self._leave_meta_path_when_idle()
        callback()

    def _leave_meta_path_when_idle(self) -> None:
        if not self._callbacks and not self._at_first_start and self in sys.meta_path:
            sys.meta_path.remove(self)


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
