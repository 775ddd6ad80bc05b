"""The installed files as the static check reads them (grpo_compat.static_check): where a module is, which
distribution installs it, what a module's source imports (with the guards around each import) and binds, and
whether a guard holds on this install. Nothing here imports what it reads."""

from __future__ import annotations

import bisect
import json
import os
import re
import sys
from collections.abc import Iterator

from grpo_compat.core.versions import distribution_folders
from grpo_compat.static_check.stamp import CHECK_VERSION

# The callables item 4 judges: keywords trl / ms-swift pass to these distributions' functions and classes.
KEYWORD_TARGETS = ("transformers", "vllm", "peft")
# A test that mentions one of these chooses between releases or shapes: code under it is not judged.
_VERSION_TEST = re.compile(r"version|hasattr|getattr|signature|parameters|__code__|co_varnames|_available|_is_|is_")
# Import names whose distribution has another name (for the fix's `pip install`) when the histories do not say.
_KNOWN_DISTRIBUTIONS = {"yaml": "PyYAML", "PIL": "pillow", "swift": "ms-swift", "sklearn": "scikit-learn"}


class Finding:
    """One finding: what trips, where, both packages with their versions, and the fix."""

    FIELDS = ("kind", "message", "where", "package", "other", "fix")
    # cause (not shown, not cached): what findings of one root cause share, for fixes.collapse
    __slots__ = (*FIELDS, "cause")
    # kind: missing-module, missing-name, override, keyword; where: file (relative to its site folder) and line;
    # package: the distribution whose code trips, with its version ("trl 0.25.1"); other: what it trips over.

    def __init__(self, kind: str, message: str, where: str, package: str, other: str, fix: str) -> None:
        self.kind, self.message, self.where, self.package, self.other, self.fix = (
            kind, message, where, package, other, fix
        )  # fmt: skip
        self.cause: tuple = ()

    def to_dict(self) -> dict[str, str]:
        return {name: getattr(self, name) for name in self.FIELDS}

    def line(self) -> str:
        return f"{self.message} ({self.where}). Fix: {self.fix}"


# -- where modules are ------------------------------------------------------------------------------------------


class Install:
    """The files of an installed set: the folders modules are imported from (``sys.path``, or a --target folder)."""

    def __init__(self, paths: list[str] | None = None) -> None:
        self.paths = [p for p in (sys.path if paths is None else paths) if p and os.path.isdir(p)]
        self.distributions = distribution_folders(self.paths)  # normalised name -> (name, version, dist-info path)
        self._found: dict[str, tuple[str, str] | None] = {}
        self._modules: dict[str, Module | None] = {}
        self._owners: dict[str, str] = {}
        self.evaluator = None  # grpo_compat.static_check.guards.evaluator(): one per install

    def drop_sources(self) -> None:
        """Forget the parsed modules and what the guards' evaluator read from them: the check's trees (hundreds of
        thousands of nodes) are then freed at once by reference counting, not left to the cyclic collector, which
        traverses them all, several times (ms-swift 4.6: 2.2 s of CPU in the doctor after the check)."""
        self._modules.clear()
        self.evaluator = None

    def key(self) -> str:
        """Names this installed set: every distribution and version (a cache key)."""
        import hashlib

        text = json.dumps([CHECK_VERSION, sorted((n, v) for n, v, _ in self.distributions.values()), sys.version])
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def version(self, distribution: str) -> str | None:
        found = self.distributions.get(_normalize(distribution))
        return found[1] if found else None

    def find(self, module: str) -> tuple[str, str] | None:
        """(site folder, file) of a module; file "" for one that exists but cannot be read (compiled, namespace)."""
        if module in self._found:
            return self._found[module]
        parts = module.split(".")
        found = None
        if len(parts) == 1:
            for site in self.paths:
                found = _module_in(site, site, parts[0])
                if found:
                    break
        else:
            parent = self.find(".".join(parts[:-1]))
            if parent and parent[1].endswith("__init__.py"):
                found = _module_in(parent[0], os.path.dirname(parent[1]), parts[-1])
            elif parent and parent[1] == "" and os.path.isdir(os.path.join(parent[0], *parts[:-1])):
                found = _module_in(parent[0], os.path.join(parent[0], *parts[:-1]), parts[-1])  # namespace package
        self._found[module] = found
        return found

    def module(self, name: str) -> Module | None:
        if name not in self._modules:
            found = self.find(name)
            self._modules[name] = Module.read(name, found[0], found[1]) if found and found[1].endswith(".py") else None
        return self._modules[name]

    def owner(self, module: str) -> str:
        """The distribution that installs a top-level module (its RECORD), else the histories' or a known name."""
        top = module.split(".")[0]
        if top in self._owners:
            return self._owners[top]
        named = _KNOWN_DISTRIBUTIONS.get(top, top)
        if _normalize(named) in self.distributions:  # most import names are their distribution's (torch, trl)
            return self.distributions[_normalize(named)][0].replace("_", "-")
        self._read_owners()
        if top in self._owners:
            return self._owners[top]
        try:
            import grpo_compat.histories as histories  # type: ignore[import-not-found]

            named = histories.distribution_of_module(top)
        except (ImportError, AttributeError):
            named = None
        return named or _KNOWN_DISTRIBUTIONS.get(top, top.replace("_", "-"))

    def _read_owners(self) -> None:
        """Top-level module -> distribution, from every distribution's top_level.txt or RECORD (read once)."""
        if not self._owners:
            for name, _version, info in self.distributions.values():
                for top in _top_levels(info):
                    self._owners.setdefault(top, name.replace("_", "-"))

    def requires(self, distribution: str) -> list[str]:
        found = self.distributions.get(_normalize(distribution))
        if not found:
            return []
        try:
            with open(os.path.join(found[2], "METADATA"), encoding="utf-8") as handle:
                return re.findall(r"^Requires-Dist:\s*(.+)$", handle.read(), flags=re.MULTILINE)
        except OSError:
            return []


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _module_in(site: str, folder: str, name: str) -> tuple[str, str] | None:
    package = os.path.join(folder, name)
    if os.path.isfile(os.path.join(package, "__init__.py")):
        return site, os.path.join(package, "__init__.py")
    if os.path.isfile(package + ".py"):
        return site, package + ".py"
    try:
        if any(f.startswith(name + ".") and f.endswith((".so", ".pyd")) for f in _listing(folder)):
            return site, ""
    except OSError:
        return None
    return (site, "") if os.path.isdir(package) and not name.endswith(("-info", ".libs")) else None


_LISTINGS: dict[str, list[str]] = {}


def _listing(folder: str) -> list[str]:
    if folder not in _LISTINGS:
        _LISTINGS[folder] = os.listdir(folder)
    return _LISTINGS[folder]


def _top_levels(info: str) -> set[str]:
    from grpo_compat.histories.providers import top_level_of_metadata

    return top_level_of_metadata(info) or set()


# -- one module's source ------------------------------------------------------------------------------------------


def _WORD(character: str) -> bool:
    return character.isalnum() or character == "_"


class Import:
    __slots__ = ("guards", "line", "module", "names")

    def __init__(self, module: str, names: tuple, line: int, guards: tuple) -> None:
        self.module = module  # absolute
        self.names = names  # ((name imported, name bound), ...); () for `import module`
        self.line = line
        self.guards = guards  # enclosing (kind, test node, branch), from the module's top


class Module:
    """One module's source as the check needs it: its imports with their guards, the names it binds."""

    def __init__(self, name: str, site: str, path: str, tree, text: str) -> None:
        self.name, self.site, self.path, self.tree, self.text = name, site, path, tree, text
        self.imports: list[Import] = []
        self.bound: set[str] = set()
        self.stars: list[str] = []
        self.lazy: dict[str, str] = {}  # name -> submodule, from _import_structure
        self.open_ended = False  # __getattr__ or define_import_structure: any name may exist
        self.classes: dict[str, object] = {}
        self.functions: dict[str, object] = {}
        self._mentions: dict = {}
        self._lines: list[str] = []
        self._starts: list[int] = []

    def segment(self, node) -> str:
        """The source text of a node (ast.unparse costs ten times more)."""
        if not self._lines:
            self._lines = self.text.splitlines()
        lines = self._lines[node.lineno - 1 : node.end_lineno]
        if len(lines) == 1:
            return lines[0][node.col_offset : node.end_col_offset]
        return "\n".join([lines[0][node.col_offset :], *lines[1:-1], lines[-1][: node.end_col_offset]])

    def lines_mentioning(self, names: set[str]) -> list[int]:
        """Sorted numbers of the lines whose text holds one of ``names`` as a word."""
        key = frozenset(names)
        if key not in self._mentions:
            if not self._starts:
                self._starts = [0, *(m.end() for m in re.finditer("\n", self.text))]
            text, found = self.text, set()
            for name in names:  # str.find per name: a regex alternation of hundreds of names is many times slower
                at = text.find(name)
                while at != -1:
                    end = at + len(name)
                    if not (at and _WORD(text[at - 1])) and not (end < len(text) and _WORD(text[end])):
                        found.add(bisect.bisect_right(self._starts, at))
                    at = text.find(name, end)
            self._mentions[key] = sorted(found)
        return self._mentions[key]

    @property
    def relative_path(self) -> str:
        return os.path.relpath(self.path, self.site)

    @classmethod
    def read(cls, name: str, site: str, path: str) -> Module | None:
        import ast

        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
            tree = ast.parse(text, path)
        except (OSError, SyntaxError, ValueError):
            return None
        return cls.of_tree(name, site, path, tree, text)

    @classmethod
    def of_tree(cls, name: str, site: str, path: str, tree, text: str) -> Module:
        """A module already parsed: an installed file, or a release's file the histories' reader holds."""
        module = cls(name, site, path, tree, text)
        package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
        module._scan(tree.body, (), package)
        return module

    def _scan(self, body: list, guards: tuple, package: str) -> None:
        import ast

        for node in body:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self.imports.append(Import(alias.name, (), node.lineno, guards))
                    self.bound.add((alias.asname or alias.name).split(".")[0])
            elif isinstance(node, ast.ImportFrom):
                target = _absolute(node, package)
                if node.names[0].name == "*":
                    self.stars.append(target)
                    self.imports.append(Import(target, (), node.lineno, guards))
                    continue
                names = tuple((a.name, a.asname or a.name) for a in node.names)
                self.imports.append(Import(target, names, node.lineno, guards))
                self.bound.update(bound for _, bound in names)
            elif isinstance(node, ast.If):
                self._scan(node.body, (*guards, ("if", node.test, True)), package)
                self._scan(node.orelse, (*guards, ("if", node.test, False)), package)
            elif isinstance(node, ast.Try | getattr(ast, "TryStar", ast.Try)):
                caught = any(catches_import_error(handler) for handler in node.handlers)
                self._scan(node.body, (*guards, ("try", None, not caught)), package)
                for handler in node.handlers:
                    self._scan(handler.body, (*guards, ("except", None, False)), package)
                self._scan(node.orelse + node.finalbody, guards, package)
            elif isinstance(node, ast.With):
                suppressed = any(_suppresses_import_error(item.context_expr) for item in node.items)
                self._scan(node.body, (*guards, ("with", None, not suppressed)), package)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self.bound.add(node.name)
                self.functions[node.name] = node
                self.open_ended |= node.name == "__getattr__"
            elif isinstance(node, ast.ClassDef):
                self.bound.add(node.name)
                self.classes[node.name] = node
            else:
                self._bind(node)

    def _bind(self, node) -> None:
        import ast

        for child in ast.walk(node):
            if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                self.bound.add(child.id)
            elif isinstance(child, ast.Call) and _callee_name(child) == "define_import_structure":
                self.open_ended = True
        if isinstance(node, ast.Assign | ast.AugAssign | ast.Expr):
            self._read_import_structure(node)

    def _read_import_structure(self, node) -> None:
        """``_import_structure = {"submodule": ["Name"]}``, ``_import_structure["x"] = [...]`` / ``.extend([...])``."""
        import ast

        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            # vLLM's table for its module __getattr__: {"LLM": ".entrypoints.llm:LLM", ...}
            for key, value in zip(node.value.keys, node.value.values, strict=False):
                if isinstance(key, ast.Constant) and isinstance(value, ast.Constant) and isinstance(value.value, str):
                    found = re.fullmatch(r"\.([\w.]+):(\w+)", value.value)
                    if found and found.group(2) == key.value:
                        self.lazy.setdefault(key.value, found.group(1))
            if any(isinstance(t, ast.Name) and t.id == "_import_structure" for t in node.targets):
                for key, value in zip(node.value.keys, node.value.values, strict=False):
                    if isinstance(key, ast.Constant) and isinstance(key.value, str):
                        self._lazy_names(key.value, value)
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript):
            key = _structure_key(node.targets[0])
            if key:
                self._lazy_names(key, node.value)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            call = node.value
            if isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Subscript):
                key = _structure_key(call.func.value)
                if key:
                    for argument in call.args:
                        self._lazy_names(key, argument)

    def _lazy_names(self, submodule: str, value) -> None:
        import ast

        for child in ast.walk(value):
            if isinstance(child, ast.Constant) and isinstance(child.value, str):
                self.lazy.setdefault(child.value, submodule)


def _structure_key(node) -> str | None:
    import ast

    if isinstance(node.value, ast.Name) and node.value.id == "_import_structure":
        if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            return node.slice.value
    return None


def _absolute(node, package: str) -> str:
    if not node.level:
        return node.module or ""
    base = package.split(".")
    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
    return ".".join([*base, *([node.module] if node.module else [])])


def _suppresses_import_error(expression) -> bool:
    """``contextlib.suppress(ImportError)`` (not any context manager whose name holds "suppress": trl 0.26's
    ``suppress_experimental_warning()`` lets the import's error through)."""
    import ast

    if not (isinstance(expression, ast.Call) and _callee_name(expression) == "suppress"):
        return False
    wanted = ("ImportError", "ModuleNotFoundError", "Exception", "BaseException")
    return any(ast.unparse(argument).split(".")[-1] in wanted for argument in expression.args)


# Exceptions whose handler swallows a failed import (the catalogue's OptionalDependencyNotAvailable is transformers').
IMPORT_ERRORS = ("ImportError", "ModuleNotFoundError", "Exception", "BaseException", "OptionalDependencyNotAvailable")


def reraises(handler) -> bool:
    """A handler whose last statement raises lets the import's error through (``except Exception: raise``)."""
    import ast

    return bool(handler.body) and isinstance(handler.body[-1], ast.Raise)


# The guard of a statement in a try whose handler catches ImportError (the histories' imports and guards).
IMPORT_ERROR_GUARD = "try-except ImportError"


def _raised_unless(node) -> tuple[str, ...]:
    """A try's ``else`` runs when its body did not raise: ``try: if not is_x(): raise ...`` guards it by ``is_x()``."""
    import ast

    first = node.body[0] if len(node.body) == 1 else None
    if isinstance(first, ast.If) and first.body and isinstance(first.body[0], ast.Raise):
        test = first.test
        return (
            ast.unparse(test.operand)
            if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
            else f"not ({ast.unparse(test)})",
        )
    return ()


def _is_main_check(test) -> bool:
    import ast

    return "__name__" in ast.unparse(test) and "__main__" in ast.unparse(test)


def module_statements(body: list, conditions: tuple[str, ...] = ()) -> Iterator[tuple]:
    """Every statement run at module level (through ``if`` / ``try`` / ``with``), with the conditions it runs under."""
    import ast

    for node in body:
        yield node, conditions
        if isinstance(node, ast.If):
            if _is_main_check(node.test):
                continue
            test = ast.unparse(node.test)
            yield from module_statements(node.body, (*conditions, test))
            yield from module_statements(node.orelse, (*conditions, f"not ({test})"))
        elif isinstance(node, ast.Try | getattr(ast, "TryStar", ast.Try)):
            guarded = any(catches_import_error(handler) for handler in node.handlers)
            inner = (*conditions, IMPORT_ERROR_GUARD) if guarded else conditions
            yield from module_statements(node.body, inner)
            for handler in node.handlers:
                yield from module_statements(handler.body, conditions)
            yield from module_statements(node.orelse, (*conditions, *_raised_unless(node)))
            yield from module_statements(node.finalbody, conditions)
        elif isinstance(node, ast.With):
            yield from module_statements(node.body, conditions)


def catches_import_error(handler) -> bool:
    """Whether a failed import inside the try is swallowed by this handler: a guard, unless it raises again. Shared
    by the static check and the histories' reader."""
    import ast

    if reraises(handler):
        return False
    if handler.type is None:
        return True
    caught = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(ast.unparse(name).split(".")[-1] in IMPORT_ERRORS for name in caught)


def _callee_name(call) -> str:
    import ast

    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
