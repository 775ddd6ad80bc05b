"""Reversible wrapping of one attribute: a method on a class or a function in a module.

The wrapper keeps ``__wrapped__`` (as ``functools.wraps`` does) and the exact original object is
kept for :func:`restore`, so a revert puts back the very same object, not an equal copy.
"""

from __future__ import annotations

import functools
import inspect
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from grpo_compat.core.errors import GRPOCompatError
from grpo_compat.core.registry import Target
from grpo_compat.core.tracebacks import is_refusal, without_own_frames

TYPE_CHECKING = False
if TYPE_CHECKING:
    from grpo_compat.core.registry import Wrapper

MISSING: Any = object()
PATCH_ID_ATTRIBUTE = "__grpo_compat_patch__"


class TargetNotFound(LookupError):
    pass


@dataclass
class Replacement:
    """What was swapped where, so it can be swapped back."""

    owner: Any
    name: str
    original: Any  # the object in owner.__dict__ before, or MISSING when it was inherited
    replacement: Any

    def in_effect(self) -> bool:
        """Whether calls still reach our wrapper: in place, or wrapped in turn (found through ``__wrapped__``).

        False when upstream code deleted or replaced it after us (ms-swift deletes trl's GRPOTrainer.__init__).
        """
        ours = underlying_function(self.replacement)
        current = _own_attribute(self.owner, self.name)
        for _ in range(64):  # a chain of wrappers, never a cycle in practice
            if current is MISSING or current is None:
                return False
            if underlying_function(current) is ours:
                return True
            current = getattr(underlying_function(current), "__wrapped__", None)
        return False

    def restore(self) -> bool:
        """Put the original back; False when someone replaced our wrapper in the meantime."""
        if _own_attribute(self.owner, self.name) is not self.replacement:
            return False
        if self.original is MISSING:
            delattr(self.owner, self.name)
        else:
            setattr(self.owner, self.name, self.original)
        return True


def _own_attribute(owner: Any, name: str) -> Any:
    return vars(owner).get(name, MISSING)


def resolve(module: ModuleType, target: Target) -> tuple[Any, str, Any]:
    """Return ``(owner, attribute name, raw attribute)`` for a target; raw is the descriptor for classes."""
    *path, name = target.qualname.split(".")
    owner: Any = module
    for part in path:
        owner = getattr(owner, part, MISSING)
        if owner is MISSING:
            raise TargetNotFound(f"{target.module} has no {'.'.join(path)}")
    try:
        raw = inspect.getattr_static(owner, name)
    except AttributeError:
        raise TargetNotFound(f"{target.module}:{target.qualname} does not exist") from None
    return owner, name, raw


def underlying_function(raw: Any) -> Any:
    return raw.__func__ if isinstance(raw, staticmethod | classmethod) else raw


def missing_parameters(function: Any, expected: tuple[str, ...]) -> list[str]:
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return list(expected)
    return [name for name in expected if name not in parameters]


def is_wrapped_by(raw: Any, patch_id: str) -> bool:
    return getattr(underlying_function(raw), PATCH_ID_ATTRIBUTE, None) == patch_id


def wrap(
    owner: Any, name: str, raw: Any, wrapper: Wrapper, patch_id: str, rebind_in: tuple[str, ...] = ()
) -> list[Replacement]:
    """Wrap ``owner.name`` with ``wrapper(wrapped, *args, **kwargs)``; also rebind by-name imports of a module function.

    ``rebind_in``: top-level packages besides the function's own whose modules may hold such an import.
    """
    function = underlying_function(raw)

    @functools.wraps(function)
    def patched(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # pytest and IPython hide this frame
        try:
            return wrapper(function, *args, **kwargs)
        except GRPOCompatError as refusal:
            if not is_refusal(refusal):
                raise
            # The user reads the message, not the engine: re-raised without grpo_compat's frames (core/tracebacks.py;
            # the excepthook apply() installs drops this frame too). GRPO_COMPAT_TRACEBACK=full keeps them.
            raise refusal.with_traceback(without_own_frames(refusal.__traceback__))  # noqa: B904 - the same error

    setattr(patched, PATCH_ID_ATTRIBUTE, patch_id)
    new = type(raw)(patched) if isinstance(raw, staticmethod | classmethod) else patched
    done = [Replacement(owner, name, _own_attribute(owner, name), new)]
    setattr(owner, name, new)
    if isinstance(owner, ModuleType):
        done += _rebind_imported_copies(owner, function, new, rebind_in)
    return done


def _rebind_imported_copies(home: ModuleType, original: Any, new: Any, rebind_in: tuple[str, ...]) -> list[Replacement]:
    """``from .utils import f`` leaves a second reference to f in the importing module: patch it too."""
    prefixes = {home.__name__.split(".")[0], *rebind_in}
    done = []
    for module_name, module in list(sys.modules.items()):
        if module is home or module is None or module_name.split(".")[0] not in prefixes:
            continue
        for attribute, value in list(vars(module).items()):
            if value is original:
                done.append(Replacement(module, attribute, value, new))
                setattr(module, attribute, new)
    return done


def call_with(function: Any, args: tuple, kwargs: dict, **changes: Any) -> Any:
    """``function(*args, **kwargs)`` with the named arguments replaced, whether they came by position or keyword."""
    bound = inspect.signature(function).bind(*args, **kwargs)
    bound.arguments.update(changes)
    return function(*bound.args, **bound.kwargs)


def bound_arguments(function: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """The call's arguments by parameter name (``args=`` may come by keyword or position); {} for a bad call."""
    try:
        return dict(inspect.signature(function).bind_partial(*args, **kwargs).arguments)
    except TypeError:
        return {}  # upstream's own error will say what is wrong with the call
