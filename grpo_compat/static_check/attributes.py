"""Attributes the trainer reads that nothing sets (the static check's ``attribute`` kind, grpo_compat.static_check).

The trainer's methods read ``self.X``; the attribute must come from the class chain as installed: a class attribute,
a method or property, or an assignment ``self.X = ...`` in a method. An assignment in an ``__init__`` counts only
where that ``__init__`` runs: the effective one and those it reaches through ``super().__init__(...)`` /
``Base.__init__(self, ...)``. Found:

- an attribute set only in an ``__init__`` that does not run (ms-swift 3.2.0 deletes trl's ``GRPOTrainer.__init__``
  and builds the trainer from transformers' ``Trainer.__init__``, so trl 0.16's ``self.temperature`` is never set);
- an attribute that nothing in the chain sets, read in a constructor that runs (a base class that had it and a
  release that removed it: the constructor fails).

Left alone (cannot tell): a chain with a class that does not resolve, a ``__getattr__`` / ``__getattribute__``,
``setattr`` / ``__dict__`` on self anywhere in the chain; a read under a test of attributes or versions, or in a
``try``.
"""

from __future__ import annotations

import ast
import bisect
import re

from grpo_compat.static_check.calls import Definition, _resolve_expression, methods, mro, resolve
from grpo_compat.static_check.files import _VERSION_TEST, Finding, Install, Module, walk

# Statements of a method's own body that run whenever the method does (no if, loop, with or try around them).
ALWAYS_RUN_STATEMENTS = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Return)


def _trainer_chain(install: Install, entry: tuple[str, str], walked: dict[str, Module] | None):
    """(the trainer's class chain, each class's methods that exist (``del Base.__init__`` followed), the indexes of
    the classes whose ``__init__`` runs), or None where the trainer is not a class."""
    trainer = resolve(install, *entry)
    if trainer is None or not isinstance(trainer.node, ast.ClassDef):
        return None
    order = mro(install, trainer)
    if walked is None:  # no import walk: the modules of the chain, where ms-swift 3.x deletes trl's __init__
        walked = {definition.module.name: definition.module for definition in order}
    deleted = _deleted_methods(install, walked)
    own = {i: {n: f for n, f in methods(d).items() if (d.node, n) not in deleted} for i, d in enumerate(order)}
    return order, own, _running_inits(install, order, own)


def trainer_inits(install: Install, entry: tuple[str, str], walked: dict[str, Module] | None):
    """(the trainer's class chain, [(index, __init__) of each one that runs when the trainer is built]), or None."""
    found = _trainer_chain(install, entry, walked)
    if found is None:
        return None
    order, own, running = found
    return order, [(index, own[index]["__init__"]) for index in sorted(running)]


def attribute_findings(install: Install, entry: tuple[str, str], walked: dict[str, Module]) -> list[Finding]:
    found = _trainer_chain(install, entry, walked)
    if found is None:
        return []
    order, own, running = found
    if not _chain_is_closed(install, order):
        return []
    bound = set()
    set_in_init: dict[str, list[int]] = {}
    for index, definition in enumerate(order):
        bound |= _class_names(definition.node)
        for name, function in methods(definition).items():  # a deleted __init__ (never runs) still says what it set
            assigned = _self_assignments(definition.module, function)
            if name not in own[index] and name != "__init__":
                continue
            if name == "__init__" and index not in running:
                for attribute in assigned:
                    set_in_init.setdefault(attribute, []).append(index)
            else:
                bound |= assigned
    findings = []
    seen = set()
    candidates = set(set_in_init) - bound
    judged = [(i, "__init__", own[i]["__init__"]) for i in sorted(running)]
    if candidates:
        judged += _methods_that_run(order, own, running)
    for index, name, function in judged:
        module = order[index].module
        if name != "__init__" and not module.lines_mentioning(candidates):
            continue
        # Only the reads that can be findings: of a candidate (its line mentions one), or in a statement of a running
        # __init__'s own body (where any attribute no class sets is one); every other statement is not walked.
        statements = [
            statement for statement in function.body
            if (name == "__init__" and isinstance(statement, ALWAYS_RUN_STATEMENTS))
            or _spans_any(statement, module.lines_mentioning(candidates))
        ]  # fmt: skip
        for attribute, line in _self_reads(module, statements):
            if attribute in bound or attribute in seen:
                continue
            if attribute in set_in_init:
                where_set = order[set_in_init[attribute][0]]
                why = (
                    f"only {where_set.node.name}.__init__ ({where_set.where}) sets it, and that __init__ does not run "
                    f"for {order[0].node.name} ({_who_builds(order, running)})"
                )
            elif name == "__init__" and index in running and _always_runs(function, line):
                why = "no class of its chain sets it (a release of a base class removed it)"
            else:
                continue
            seen.add(attribute)
            findings.append(_finding(install, order, index, name, attribute, line, why))
    return findings


def _finding(install, order, index, method, attribute, line, why) -> Finding:
    definition = order[index]
    owner = install.owner(definition.module.name)
    version = f"{owner} {install.version(owner)}"
    others = sorted({install.owner(d.module.name) for d in order} - {owner})
    other = ", ".join(f"{o} {install.version(o)}" for o in others) or version
    where = f"{definition.module.relative_path}:{line}"
    message = (
        f"{version}'s {definition.node.name}.{method} reads self.{attribute} ({where}), but {why}: "
        f"'{order[0].node.name}' object has no attribute '{attribute}'"
    )
    fix = (
        f"install releases whose classes agree on {attribute}: a {owner} release that no longer reads it, or "
        f"{' / '.join(others) or owner} releases that set it"
    )
    return Finding("attribute", message, where, version, other, fix)


def _chain_is_closed(install: Install, order: list[Definition]) -> bool:
    """Every base of every class resolves (``object`` and ``Generic[...]`` aside), none computes attributes."""
    for definition in order:
        for base in definition.node.bases:
            text = ast.unparse(base)
            if text in ("object",) or text.startswith(("Generic", "typing.Generic", "ABC", "abc.ABC")):
                continue
            if _resolve_expression(install, definition.module, base) is None:
                return False
        for node in definition.node.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in (
                "__getattr__",
                "__getattribute__",
            ):
                return False
        if _NAMED_AT_RUN_TIME.search(definition.module.segment(definition.node)):
            return False
    return True


# Attributes named at run time: setattr(self, ...), vars(self), writes through self.__dict__ (reading it is fine).
_NAMED_AT_RUN_TIME = re.compile(
    r"setattr\(\s*self\s*,|vars\(\s*self\s*\)|self\.__dict__\s*(?:\.update|\.setdefault|\[[^\]]*\]\s*=[^=])"
)


def _is_self(node) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def _deleted_methods(install: Install, walked: dict[str, Module]) -> set[tuple[ast.ClassDef, str]]:
    """``del Class.method`` at module level in a walked module (ms-swift 3.x: ``del HFGRPOTrainer.__init__``)."""
    deleted = set()
    for module in walked.values():
        if "del " not in module.text:
            continue
        for node in module.statements:
            if not isinstance(node, ast.Delete):
                continue
            for target in node.targets:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                    found = _resolve_expression(install, module, target.value)
                    if found is not None and isinstance(found.node, ast.ClassDef):
                        deleted.add((found.node, target.attr))
    return deleted


def _running_inits(install: Install, order: list[Definition], own: dict[int, dict]) -> set[int]:
    """The indexes of the classes whose ``__init__`` runs when the trainer is built."""

    def next_init(after: int) -> int | None:
        return next((i for i in range(after + 1, len(order)) if "__init__" in own[i]), None)

    first = next_init(-1)
    running, queue = set(), [first] if first is not None else []
    while queue:
        index = queue.pop()
        if index in running:
            continue
        running.add(index)
        for call in walk(own[index]["__init__"]):
            if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
                continue
            if call.func.attr != "__init__":
                continue
            target = call.func.value
            if isinstance(target, ast.Call) and isinstance(target.func, ast.Name) and target.func.id == "super":
                found = next_init(index)
            else:
                base = _resolve_expression(install, order[index].module, target)
                found = next((i for i, d in enumerate(order) if base is not None and d == base), None)
                if found is not None and "__init__" not in own[found]:
                    found = next_init(found)
            if found is not None:
                queue.append(found)
    return running


def _methods_that_run(
    order: list[Definition], own: dict[int, dict], running: set[int]
) -> list[tuple[int, str, ast.FunctionDef]]:
    """The methods that run when the trainer is built and trains: the ``__init__``s that run and ``train``, then
    every method they name as ``self.m`` (the definition first in the chain) or ``super().m`` (the next one after
    the caller: ms-swift 3.2's _get_per_token_logps hands over to trl 0.16's). A method the trainer never reaches
    (trl's rollout code that ms-swift 4 replaced) is not judged."""
    effective: dict[str, int] = {}
    for index in range(len(order)):
        for name in own[index]:
            effective.setdefault(name, index)
    found = {(index, "__init__") for index in running}
    if "train" in effective:
        found.add((effective["train"], "train"))
    queue = list(found)
    while queue:
        index, name = queue.pop()
        for node in walk(own[index][name]):
            reached = None
            if isinstance(node, ast.Attribute) and _is_self(node.value) and node.attr in effective:
                reached = (effective[node.attr], node.attr)
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name)
                and node.value.func.id == "super"
            ):
                after = next((i for i in range(index + 1, len(order)) if node.attr in own[i]), None)
                reached = (after, node.attr) if after is not None else None
            if reached is not None and reached not in found:
                found.add(reached)
                queue.append(reached)
    return [(index, name, own[index][name]) for index, name in sorted(found)]


def _who_builds(order: list[Definition], running: set[int]) -> str:
    names = [f"{order[i].node.name}.__init__" for i in sorted(running)]
    return "built by " + ", ".join(names) if names else "no __init__ runs"


def _class_names(node: ast.ClassDef) -> set[str]:
    names = set()
    for statement in node.body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(statement.name)
        elif isinstance(statement, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            for target in targets:
                names |= {n.id for n in walk(target) if isinstance(n, ast.Name)}
            if any(isinstance(t, ast.Name) and t.id == "__slots__" for t in targets) and statement.value is not None:
                names |= {c.value for c in walk(statement.value) if isinstance(c, ast.Constant)}
    return names


# self.X as a target: not self.X[k] or self.X.y, which read X
_SELF_NAME = re.compile(r"\bself\.(\w+)\b(?!\s*[\[.(])")
_STATEMENTS = ("del ", "for ", "with ", "async with ", "async for ")


def _self_assignments(module: Module, function) -> set[str]:
    """``self.X`` stored in a method (assignment, augmented, annotated, tuple targets, del, for / with targets),
    read from its text line by line: an over-count (a target inside a call's keywords) only keeps it silent."""
    assigned = set()
    for line in module.segment(function).splitlines():
        if "self." not in line:
            continue
        stripped = line.lstrip()
        if stripped.startswith(_STATEMENTS):
            assigned.update(_SELF_NAME.findall(stripped))
            continue
        at = stripped.find("=")
        while at != -1 and (stripped[at + 1 : at + 2] == "=" or stripped[at - 1 : at] in ("=", "<", ">", "!")):
            at = stripped.find("=", at + 2)
        if at > 0:
            assigned.update(_SELF_NAME.findall(stripped[:at]))
    return assigned


def _self_reads(module: Module, statements: list) -> list[tuple[str, int]]:
    """``self.X`` loads in a method's statements, none under a test of attributes or versions, none in a ``try``."""
    reads: list[tuple[str, int]] = []
    for statement in statements:
        _self_reads_under(module, statement, reads)
    return reads


def _spans_any(node, lines: list[int]) -> bool:
    """Whether one of the sorted line numbers ``lines`` is within the node's lines."""
    at = bisect.bisect_left(lines, node.lineno)
    return at < len(lines) and lines[at] <= (node.end_lineno or node.lineno)


def _self_reads_under(module: Module, node, reads: list[tuple[str, int]]) -> None:
    # module-level, not nested: a nested function that calls itself is a reference cycle (Install.drop_sources)
    if isinstance(node, ast.If | ast.IfExp | ast.While) and _VERSION_TEST.search(module.segment(node.test)):
        return
    if isinstance(node, ast.Try | ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
        return  # a try may catch it; a nested function may never run
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Load)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    ):
        reads.append((node.attr, node.lineno))
    for child in ast.iter_child_nodes(node):
        _self_reads_under(module, child, reads)


def _always_runs(function, line: int) -> bool:
    """The read is in a statement of the method's own body (not under an if, a loop, a with or a try)."""
    return any(
        isinstance(s, ALWAYS_RUN_STATEMENTS) and s.lineno <= line <= (s.end_lineno or s.lineno) for s in function.body
    )
