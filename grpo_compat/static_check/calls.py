"""Calls across packages, read from source (items 3 and 4 of the static check, grpo_compat.static_check):

- the methods trl's GRPO trainer overrides (ms-swift's: trl's and transformers'), against how the installed base
  calls them: ``self.m(...)``, ``super().m(...)``, and ``self.m`` handed to a base method that calls it
  (transformers 4.52's ``_get_dataloader(sampler_fn=self._get_train_sampler)`` calls ``sampler_fn(dataset)``);
- the keywords trl / ms-swift pass to transformers, vLLM and peft functions and classes they import by name.

Only what resolves statically is judged: a call under a version or signature test, in a ``try`` that catches
TypeError, with ``*args`` / ``**kwargs``, or to a callee that takes ``**kwargs`` or renames keywords, is left alone.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Callable, Iterator
from functools import partial

from grpo_compat.static_check.files import _VERSION_TEST, KEYWORD_TARGETS, Elided, Finding, Install, Module
from grpo_compat.static_check.guards import guard_holds

_PASSING_DECORATORS = ("staticmethod", "classmethod", "wraps", "profiling_decorator", "no_grad", "inference_mode")


class Definition:
    """A class or function and the module it is defined in."""

    __slots__ = ("module", "node")

    def __init__(self, module: Module, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.module, self.node = module, node

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Definition) and other.node is self.node

    def __hash__(self) -> int:
        return id(self.node)

    @property
    def where(self) -> str:
        return f"{self.module.relative_path}:{self.node.lineno}"


def resolve(install: Install, module_name: str, name: str, depth: int = 0) -> Definition | None:
    """The class or function ``name`` is in ``module_name``, following imports and lazy structures."""
    module = install.module(module_name)
    if module is None or depth > 8:
        return None
    if name in module.classes:
        return Definition(module, module.classes[name])
    if name in module.functions:
        return Definition(module, module.functions[name])
    for record in module.imports:
        for imported, bound in record.names:
            if bound == name and guard_holds(install, record.guards):
                return (
                    None
                    if install.find(f"{record.module}.{imported}")
                    else resolve(install, record.module, imported, depth + 1)
                )
    if name in module.lazy:
        return resolve(install, f"{module.name}.{module.lazy[name]}", name, depth + 1)
    for star in module.stars:
        found = resolve(install, star, name, depth + 1)
        if found:
            return found
    return None


def _resolve_expression(install: Install, module: Module, node: ast.expr) -> Definition | None:
    if isinstance(node, ast.Name):
        return resolve(install, module.name, node.id)
    dotted = ast.unparse(node).split(".")
    for record in module.imports:  # `import transformers` ... transformers.Trainer
        if not record.names and record.module.split(".")[0] == dotted[0]:
            return resolve(install, ".".join(dotted[:-1]), dotted[-1])
    return None


def mro(install: Install, definition: Definition) -> list[Definition]:
    """C3 linearisation over the bases that resolve (unresolved ones, e.g. torch's, are left out)."""
    return linearise(definition, partial(_resolved_bases, install))


def _resolved_bases(install: Install, definition: Definition) -> list[Definition]:
    bases = [_resolve_expression(install, definition.module, base) for base in definition.node.bases]
    return [base for base in bases if isinstance(base, Definition)]


# The recursive walks here are module-level functions, not nested ones: a nested function that calls itself is a
# reference cycle, which keeps every tree it reaches for the cyclic collector (Install.drop_sources).
def linearise(current, bases_of: Callable, seen: tuple = ()) -> list:
    """C3 linearisation of a class over ``bases_of(class)``, the bases that resolve: an installed class's
    (Definition), or one the API histories hold (grpo_compat.static_check.hypothetical)."""
    if current in seen or len(seen) > 20:
        return [current]
    bases = bases_of(current)
    orders = [linearise(base, bases_of, (*seen, current)) for base in bases]
    orders = [order for order in orders if order] + [list(bases)]
    result = [current]
    while any(orders):
        for order in orders:
            head = order[0] if order else None
            if head and not any(head in other[1:] for other in orders):
                break
        else:
            head = next(order[0] for order in orders if order)  # inconsistent: take the first, as DFS would
        result.append(head)
        orders = [[d for d in order if d != head] for order in orders]
    return result


def methods(definition: Definition) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    return {
        node.name: node
        for node in definition.node.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and not any(_decorator_name(d) in ("property", "cached_property", "setter") for d in node.decorator_list)
    }


def _decorator_name(node: ast.expr) -> str:
    node = node.func if isinstance(node, ast.Call) else node
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def _renames_arguments(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A decorator other than a plain pass-through may translate keywords (``@deprecate_kwarg``)."""
    return any(_decorator_name(d) not in _PASSING_DECORATORS for d in function.decorator_list)


# A call of a plain name: the name, then ``(`` past spaces, line continuations, comments and closing parentheses.
_NAMED_CALL = re.compile(r"(?<![\w.])([A-Za-z_]\w*)(?:[\s\\)]|#[^\n]*)*\(")


def judged_calls(
    module: Module, root: ast.AST | None, names: set[str], named_callees: bool = False
) -> Iterator[ast.Call]:
    """The calls under ``root`` (None: the whole module) on lines that mention one of ``names`` and always take
    the shape they are written with: none under a test of versions, attributes or signatures, none in a ``try``
    that catches TypeError. Only the statements around such lines are walked (most of a 5,000-line Trainer is
    not), and of the module's left-out definitions only those whose lines hold such a line are parsed.
    ``named_callees``: only calls whose callee is one of ``names`` as a plain name are wanted (others may come too),
    so a left-out definition is parsed only where its text may hold one: a name, then ``(`` past spaces, line
    continuations, comments and closing parentheses (``(name)(...)``)."""
    lines = module.lines_mentioning(names)
    if not lines:
        return
    callees = named_callees and module.text.isascii()  # (a non-ASCII spelling may normalise to a name)
    for statement in module.statements if root is None else getattr(root, "body", []):
        if isinstance(statement, Elided):  # a definition left out of the module-level parse: parsed if it may hold one
            at = bisect.bisect_left(lines, statement.first)
            if not (at < len(lines) and lines[at] <= statement.last):
                continue
            if callees and not any(
                call.group(1) in names
                for call in _NAMED_CALL.finditer(module.text, *module.offsets(statement.first, statement.last))
            ):
                continue
            statement = module.definition(statement)
        yield from _judged_calls_under(module, lines, statement)


def _judged_calls_under(module: Module, lines: list[int], node: ast.AST) -> Iterator[ast.Call]:
    first, last = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
    if first is not None:
        at = bisect.bisect_left(lines, first)
        if not (at < len(lines) and lines[at] <= last):
            return  # no line of this node mentions the names
    if isinstance(node, ast.If | ast.IfExp | ast.While) and _VERSION_TEST.search(module.segment(node.test)):
        return
    if isinstance(node, ast.Try) and any(_catches_type_error(h) for h in node.handlers):
        for child in node.handlers + node.orelse + node.finalbody:
            yield from _judged_calls_under(module, lines, child)
        return
    if isinstance(node, ast.Call):
        yield node
    for child in ast.iter_child_nodes(node):
        yield from _judged_calls_under(module, lines, child)


def _catches_type_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    text = ast.unparse(handler.type)
    return any(name in text for name in ("TypeError", "Exception"))


def call_shape(call: ast.Call) -> tuple[int, list[str]] | None:
    """(positional count, keyword names); None with ``*args`` or ``**kwargs``."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    return len(call.args), [k.arg for k in call.keywords if k.arg]


def refusal(
    function: ast.FunctionDef | ast.AsyncFunctionDef, positional: int, keywords: list[str], bound: bool
) -> str | None:
    """Why Python would refuse this call of ``function`` (None: it accepts it), as Python's TypeError says it."""
    arguments = function.args
    ordered = arguments.posonlyargs + arguments.args
    if bound and ordered and not any(_decorator_name(d) == "staticmethod" for d in function.decorator_list):
        ordered = ordered[1:]
    names = [a.arg for a in ordered]
    if positional > len(names) and arguments.vararg is None:
        given = positional + (1 if bound else 0)
        return f"takes {len(names) + (1 if bound else 0)} positional argument(s) but {given} were given"
    known = {a.arg for a in arguments.args} | {a.arg for a in arguments.kwonlyargs}  # posonly ones are not keywords
    for keyword in keywords:
        if keyword not in known and arguments.kwarg is None:
            return f"got an unexpected keyword argument '{keyword}'"
    defaults = len(arguments.defaults)
    required = names[positional : len(names) - defaults] if defaults else names[positional:]
    missing = [name for name in required if name not in keywords]
    missing += [
        a.arg
        for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
        if d is None and a.arg not in keywords
    ]
    if missing:
        return f"missing required argument(s) {', '.join(repr(m) for m in missing)}"
    return None


def _signature_text(function: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """``name(self, a, b=..., *args, c=..., **kwargs)``: the parameters without their annotations and defaults."""
    arguments = function.args
    ordered = arguments.posonlyargs + arguments.args
    first_default = len(ordered) - len(arguments.defaults)
    parts = [a.arg + ("=..." if i >= first_default else "") for i, a in enumerate(ordered)]
    if arguments.posonlyargs:
        parts.insert(len(arguments.posonlyargs), "/")
    if arguments.vararg or arguments.kwonlyargs:
        parts.append(f"*{arguments.vararg.arg}" if arguments.vararg else "*")
    parts += [
        a.arg + ("=..." if d is not None else "")
        for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
    ]
    parts += [f"**{arguments.kwarg.arg}"] if arguments.kwarg else []
    return f"{function.name}({', '.join(parts)})"


# -- item 3: overrides against how the base calls them ------------------------------------------------------------


def override_findings(install: Install, entry: tuple[str, str]) -> list[Finding]:
    trainer = resolve(install, *entry)
    if trainer is None or not isinstance(trainer.node, ast.ClassDef):
        return []
    order = mro(install, trainer)
    owners = [install.owner(d.module.name) for d in order]
    effective: dict[str, tuple[int, ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    for index, definition in enumerate(order):
        for name, function in methods(definition).items():
            effective.setdefault(name, (index, function))
    findings = []
    for index, definition in enumerate(order):
        # The methods a call from this class may reach in another distribution's code.
        foreign = {n for n, (i, _) in effective.items() if owners[i] != owners[index]}
        foreign |= {
            n for later in order[index + 1 :] for n in methods(later) if owners[order.index(later)] != owners[index]
        }
        for name, function in methods(definition).items():
            if effective[name][0] != index:
                continue  # overridden further down: this body never runs for the trainer
            for call in judged_calls(definition.module, function, foreign):
                for target, shape in _calls_to_methods(call, index, effective, order, definition):
                    callee_index, callee = target
                    if owners[callee_index] == owners[index] or shape is None:
                        continue
                    why = refusal(callee, *shape, bound=True)
                    if why:
                        findings.append(
                            _override_finding(install, order, owners, index, callee_index, call, callee, why, shape)
                        )
    return findings


def _calls_to_methods(call: ast.Call, index: int, effective: dict, order: list, definition: Definition):
    """(callee (index, function), shape) of each method call this call makes of the trainer's own methods."""
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
        if func.attr in effective:
            yield effective[func.attr], call_shape(call)
            yield from _handed_over(call, effective, order)
    elif (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Call)
        and isinstance(func.value.func, ast.Name)
        and func.value.func.id == "super"
    ):
        for later in range(index + 1, len(order)):
            found = methods(order[later]).get(func.attr)
            if found:
                yield (later, found), call_shape(call)
                break


def _handed_over(call: ast.Call, effective: dict, order: list):
    """``self.helper(..., kw=self.m)``: the calls ``helper`` makes of its parameter ``kw``, as calls of ``m``."""
    helper_index, helper = effective[call.func.attr]
    helper_module = order[helper_index].module
    parameters = [a.arg for a in helper.args.posonlyargs + helper.args.args][1:]
    handed = [(parameters[i] if i < len(parameters) else None, a) for i, a in enumerate(call.args)]
    handed += [(k.arg, k.value) for k in call.keywords]
    for parameter, value in handed:
        if (
            parameter
            and isinstance(value, ast.Attribute)
            and isinstance(value.value, ast.Name)
            and value.value.id == "self"
            and value.attr in effective
        ):
            for inner in judged_calls(helper_module, helper, {parameter}):
                if isinstance(inner.func, ast.Name) and inner.func.id == parameter:
                    yield effective[value.attr], call_shape(inner)


def _override_finding(install, order, owners, caller_index, callee_index, call, callee, why, shape) -> Finding:
    import grpo_compat.static_check.fixes as fixes

    caller, defined = order[caller_index], order[callee_index]
    caller_version = f"{owners[caller_index]} {install.version(owners[caller_index])}"
    callee_version = f"{owners[callee_index]} {install.version(owners[callee_index])}"
    message = (
        f"{caller_version} calls {defined.node.name}.{callee.name} with {shape[0]} positional argument(s)"
        f"{' and ' + ', '.join(shape[1]) if shape[1] else ''} ({caller.module.relative_path}:{call.lineno}), but "
        f"{callee_version} defines {defined.node.name}.{_signature_text(callee)}: {why}"
    )
    fix = fixes.for_signature(
        install,
        (owners[callee_index], f"{defined.module.name}.{defined.node.name}.{callee.name}"),
        (owners[caller_index], f"{caller.module.name}.{caller.node.name}.{callee.name}"),
        shape,
    )
    where = f"{defined.module.relative_path}:{callee.lineno}"
    return Finding("override", message, where, callee_version, caller_version, fix)


# -- item 4: keywords passed to transformers / vLLM / peft ----------------------------------------------------------


def keyword_findings(install: Install, module: Module) -> list[Finding]:
    imported = {}
    for record in module.imports:
        if record.names and guard_holds(install, record.guards):
            owner = install.owner(record.module)
            if owner in KEYWORD_TARGETS and install.version(owner):
                imported.update({bound: (record.module, name, owner) for name, bound in record.names})
    if not imported:
        return []
    findings = []
    for call in judged_calls(module, None, set(imported), named_callees=True):
        if not (isinstance(call.func, ast.Name) and call.func.id in imported) or not call.keywords:
            continue
        shape = call_shape(call)
        source, name, owner = imported[call.func.id]
        target = resolve(install, source, name) if shape else None
        accepted = _keywords_of(install, target) if target else None
        if accepted is None:
            continue
        names, open_ = accepted
        unknown = [k for k in shape[1] if k not in names and not open_]
        if unknown:
            findings.append(_keyword_finding(install, module, call, target, owner, name, unknown[0]))
    return findings


def _keywords_of(install: Install, target: Definition) -> tuple[set[str], bool] | None:
    """The keyword names a function or class takes, and whether it takes any (``**kwargs``); None: cannot tell."""
    if isinstance(target.node, ast.FunctionDef | ast.AsyncFunctionDef):
        if _renames_arguments(target.node):
            return None
        arguments = target.node.args
        return {a.arg for a in arguments.args + arguments.kwonlyargs}, arguments.kwarg is not None
    fields: set[str] = set()
    for definition in mro(install, target):
        if not isinstance(definition.node, ast.ClassDef):
            return None
        init = methods(definition).get("__init__")
        if init is not None:
            if _renames_arguments(init) or fields:
                return None
            arguments = init.args
            return {a.arg for a in arguments.args[1:] + arguments.kwonlyargs}, arguments.kwarg is not None
        decorators = [_decorator_name(d) for d in definition.node.decorator_list]
        struct = any(ast.unparse(b).endswith("Struct") for b in definition.node.bases)
        if "dataclass" in decorators or struct:
            fields |= {
                n.target.id
                for n in definition.node.body
                if isinstance(n, ast.AnnAssign)
                and isinstance(n.target, ast.Name)
                and "ClassVar" not in ast.unparse(n.annotation)
            }
        elif definition.node.decorator_list or definition.node.keywords:
            return None  # a metaclass or class decorator builds the constructor: cannot tell
    bases_resolved = len(mro(install, target)) > 1 or not target.node.bases
    return (fields, False) if fields and bases_resolved else None


def _keyword_finding(install, module, call, target, owner, name, keyword) -> Finding:
    import grpo_compat.static_check.fixes as fixes

    mine = install.owner(module.name)
    mine_version, other_version = f"{mine} {install.version(mine)}", f"{owner} {install.version(owner)}"
    message = (
        f"{mine_version} passes {keyword}= to {name} ({module.relative_path}:{call.lineno}), which {other_version} "
        f"does not take ({target.where}): got an unexpected keyword argument '{keyword}'"
    )
    qualname = f"{target.module.name}.{target.node.name}"
    fix = fixes.for_keyword(install, (owner, qualname), (mine, module.name), keyword)
    return Finding("keyword", message, f"{module.relative_path}:{call.lineno}", mine_version, other_version, fix)
