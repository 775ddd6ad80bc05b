"""The installed files as the static check reads them (grpo_compat.static_check): where a module is, which
distribution installs it, what a module's source imports (with the guards around each import) and binds, and
whether a guard holds on this install. Nothing here imports what it reads."""

from __future__ import annotations

import bisect
import json
import os
import re
import sys
import weakref
from collections import deque
from collections.abc import Iterator, Mapping

from grpo_compat.core.versions import distribution_folders, folder_name, requires_dist
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
        found = self.distributions.get(folder_name(distribution))
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
        if folder_name(named) in self.distributions:  # most import names are their distribution's (torch, trl)
            return self.distributions[folder_name(named)][0].replace("_", "-")
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
        found = self.distributions.get(folder_name(distribution))
        return requires_dist(found[2]) if found else []


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
    return character.isalnum() or character == "_"  # what \w matches in a regular expression


def word_positions(text: str, name: str) -> Iterator[int]:
    """Where ``text`` holds the identifier ``name`` as a word (``\\bname\\b``, without a pattern per name)."""
    at = text.find(name)
    while at != -1:
        end = at + len(name)
        if not (at and _WORD(text[at - 1])) and not (end < len(text) and _WORD(text[end])):
            yield at
        at = text.find(name, end)  # an occurrence starting inside this one follows a word character: not a word


def holds_word(text: str, name: str) -> bool:
    return next(word_positions(text, name), None) is not None


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
        self.name, self.site, self.path, self._tree, self.text = name, site, path, tree, text
        self.statements: list = list(tree.body)  # the top-level statements, left-out definitions as Elided
        self._whole = None
        self._text_lines: list[str] = []
        self.imports: list[Import] = []
        self.bound: set[str] = set()
        self.stars: list[str] = []
        self.lazy: dict[str, str] = {}  # name -> submodule, from _import_structure
        self.open_ended = False  # __getattr__ or define_import_structure: any name may exist
        self.classes = _Definitions(self)  # top-level class / function name -> its node, parsed when asked for
        self.functions = _Definitions(self)
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
                found.update(bisect.bisect_right(self._starts, at) for at in word_positions(text, name))
            self._mentions[key] = sorted(found)
        return self._mentions[key]

    def offsets(self, first: int, last: int) -> tuple[int, int]:
        """Where lines ``first`` to ``last`` (1-based, inclusive) start and end in the text."""
        if not self._starts:
            self._starts = [0, *(m.end() for m in re.finditer("\n", self.text))]
        return self._starts[first - 1], self._starts[last] if last < len(self._starts) else len(self.text)

    @property
    def relative_path(self) -> str:
        return os.path.relpath(self.path, self.site)

    @classmethod
    def read(cls, name: str, site: str, path: str) -> Module | None:
        import ast

        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
        except OSError:
            return None
        definitions = _top_level_definitions(text)
        tree = None
        if definitions:  # the module level parsed alone, each top-level def and class body left out
            try:
                tree = ast.parse(_without(text, definitions), path)
            except (SyntaxError, ValueError):
                definitions = None  # a start read inside brackets: parsed whole
        try:
            tree = tree or ast.parse(text, path)
        except (SyntaxError, ValueError):
            return None
        return cls.of_tree(name, site, path, tree, text, definitions)

    @classmethod
    def of_tree(cls, name: str, site: str, path: str, tree, text: str, definitions=None) -> Module:
        """A module already parsed: an installed file, or a release's file the histories' reader holds.
        ``definitions``: the top-level definitions left out of ``tree`` (``_top_level_definitions``)."""
        module = cls(name, site, path, tree, text)
        module.statements = _in_line_order(tree.body, [Elided(*found) for found in definitions or ()])
        package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
        module._scan(module.statements, (), package)
        return module

    @property
    def tree(self):
        """The whole module's tree, every left-out definition parsed: for a reading that walks everything."""
        import ast

        if self._whole is None:
            if any(isinstance(statement, Elided) for statement in self.statements):
                self._whole = ast.Module(body=[self.definition(s) for s in self.statements], type_ignores=[])
            else:
                self._whole = self._tree
        return self._whole

    def definition(self, statement):
        """A top-level statement as the full parse has it: an ``Elided`` definition is parsed (once) from its
        lines, with the file's line numbers; any other statement is itself."""
        import ast

        if not isinstance(statement, Elided):
            return statement
        if statement.node is None:
            if not self._text_lines:
                self._text_lines = self.text.split("\n")  # Python's lines: only "\n" ends one here (no lone "\r")
            lines = self._text_lines[statement.first - 1 : statement.last]
            try:
                body = ast.parse("\n" * (statement.first - 1) + "\n".join(lines), self.path).body
            except (SyntaxError, ValueError):
                body = []
            kinds = ast.ClassDef if statement.kind == "class" else ast.FunctionDef | ast.AsyncFunctionDef
            if len(body) == 1 and isinstance(body[0], kinds) and body[0].name == statement.name:
                statement.node = body[0]
            else:  # a body that does not parse on this Python: a definition that accepts anything, read as such
                stub = (
                    f"class {statement.name}: pass"
                    if statement.kind == "class"
                    else f"def {statement.name}(*a, **k): pass"
                )
                statement.node = ast.parse("\n" * (statement.first - 1) + stub).body[0]
        return statement.node

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
            elif isinstance(node, Elided):
                self.bound.add(node.name)
                (self.classes if node.kind == "class" else self.functions).found[node.name] = node
                self.open_ended |= node.name == "__getattr__" and node.kind != "class"
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                self.bound.add(node.name)
                self.functions.found[node.name] = node
                self.open_ended |= node.name == "__getattr__"
            elif isinstance(node, ast.ClassDef):
                self.bound.add(node.name)
                self.classes.found[node.name] = node
            else:
                self._bind(node)

    def _bind(self, node) -> None:
        import ast

        for child in walk(node):
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

        for child in walk(value):
            if isinstance(child, ast.Constant) and isinstance(child.value, str):
                self.lazy.setdefault(child.value, submodule)


class Elided:
    """A top-level ``def`` or ``class`` left out of the module-level parse: its name and lines (decorators on),
    parsed by ``Module.definition`` when a reading asks for its body. Not an ast node: it has no fields."""

    __slots__ = ("first", "kind", "last", "name", "node")
    _fields = ()

    def __init__(self, first: int, last: int, kind: str, name: str) -> None:
        self.first, self.last, self.kind, self.name = first, last, kind, name  # lines, 1-based, inclusive
        self.node = None


class _Definitions(Mapping):
    """A module's top-level classes (or functions) by name, each parsed the first time it is read. It holds its
    module weakly: a cycle would leave every tree to the cyclic collector (0.2 s on ms-swift's, after the check)."""

    def __init__(self, module: Module) -> None:
        self.module = weakref.ref(module)
        self.found: dict[str, object] = {}

    def __getitem__(self, name: str):
        return self.module().definition(self.found[name])

    def __contains__(self, name: object) -> bool:
        return name in self.found

    def __iter__(self):
        return iter(self.found)

    def __len__(self) -> int:
        return len(self.found)


# Where top-level statements start, read from the text with one regular expression that the engine runs to the
# next start by itself: code, whole string literals, comments, backslash continuations and indented, blank or
# comment lines are skipped; a newline before code at column 0 ends the match. A line that starts with a closing
# bracket continues a statement (a signature's ``) -> bool:``). Brackets are not counted: any other column-0 line
# inside brackets is taken for a start, and then the text parsed without the definitions holds a closing bracket
# without its opening one, which Python refuses: the module is parsed whole (``Module.read``). A quote that starts no
# literal the expression knows (an unterminated one) stops the match: a doubt.
_STRING = (
    r'"""[^"\\]*+(?:(?:\\.|"(?!""))[^"\\]*+)*+"""'
    r"|'''[^'\\]*+(?:(?:\\.|'(?!''))[^'\\]*+)*+'''"
    r'|"[^"\\\n]*+(?:\\.[^"\\\n]*+)*+"'
    r"|'[^'\\\n]*+(?:\\.[^'\\\n]*+)*+'"
)
_TO_NEXT_START = re.compile(
    rf"""(?:[^'"#\\\n]++|{_STRING}|#[^\n]*+|\\\n|\\(?!\n)|\n(?=[ \t\r\n#)\]}}]|\Z))*+(?:\n(?=[^ \t\r\n#)\]}}])|\Z)""",
    re.DOTALL,
)
# From Python 3.12 a replacement field may hold its literal's own quote (f"{d["k"]}"), which the expression above
# reads as two literals: a line where an f-string's field holds a quote is a doubt there.
_FIELD_QUOTE = re.compile(r"""(?<![\w])(?:[rRbB]?[fFtT]|[fFtT][rRbB])["'][^\n]*?\{[^}\n]*?["']""")
_DEFINITION_HEAD = re.compile(r"(?:(class)|(?:async[ \t]+)?def)[ \t]+([A-Za-z_][A-Za-z0-9_]*)[ \t]*[(\[:]")


def _top_level_definitions(text: str) -> list[tuple[int, int, str, str]] | None:
    """(first line, last line, "class" or "def", name) of each top-level ``def`` and ``class`` (with its
    decorators), read from the text; None at a doubt (then the whole module is parsed): an unterminated literal, a
    line ending Python counts that ``\\n`` does not (a lone ``\\r``, a form feed), a null byte, a byte-order mark, an
    f-string field holding a quote (Python 3.12+). A start taken inside brackets makes the parse without the
    definitions fail, and the module is parsed whole (``Module.read``)."""
    if text.startswith("\ufeff") or "\f" in text or "\v" in text or "\x00" in text:
        return None
    if "\r" in text and re.search(r"\r(?!\n)", text):
        return None
    if sys.version_info >= (3, 12) and _FIELD_QUOTE.search(text):
        return None
    starts = [0]  # offsets of the lines that start a top-level logical line
    at, size = 0, len(text)
    while at < size:
        found = _TO_NEXT_START.match(text, at)
        if found is None or found.end() == at:
            return None
        at = found.end()
        if at < size:
            starts.append(at)
    if text[:1].isspace() or text[:1] == "#":
        starts.pop(0)  # the file's first line is not code (blank or a comment)
    found_definitions = []
    decorated = None
    line_at, line = 0, 1  # the starts are read in order: newlines are counted from the last one
    for index, start in enumerate(starts):
        head = text[start : start + 6]
        if head.startswith("@"):
            decorated = start if decorated is None else decorated
            continue
        named = _DEFINITION_HEAD.match(text, start) if head.startswith(("def", "class", "async")) else None
        first = decorated if decorated is not None else start
        decorated = None
        if named is None:
            continue
        end = starts[index + 1] if index + 1 < len(starts) else size
        last_offset = end - 1 if end > start else start
        line += text.count("\n", line_at, first)
        first_line = line
        last_line = first_line + text.count("\n", first, last_offset)
        line_at, line = last_offset, last_line
        found_definitions.append((first_line, last_line, "class" if named.group(1) else "def", named.group(2)))
    return found_definitions if decorated is None else None


def _without(text: str, definitions: list[tuple[int, int, str, str]]) -> str:
    """``text`` with the lines of ``definitions`` emptied (line numbers kept)."""
    lines = text.split("\n")
    for first, last, _kind, _name in definitions:
        lines[first - 1 : last] = [""] * (last - first + 1)
    return "\n".join(lines)


def _in_line_order(statements: list, elided: list) -> list:
    """The module-level statements and the left-out definitions, in the file's order."""
    if not elided:
        return statements

    def first_line(node) -> int:
        return (
            node.first
            if isinstance(node, Elided)
            else min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
        )

    return sorted([*statements, *elided], key=first_line)


# Fields that never hold a node: ``walk`` does not look into them.
_SCALAR_FIELDS = frozenset(
    ("id", "attr", "name", "arg", "asname", "module", "level", "kind", "type_comment", "conversion", "is_async",
     "simple", "rest", "kwd_attrs", "tag")
)  # fmt: skip
_NODE_FIELDS: dict[type, tuple[str, ...]] = {}


def walk(node):
    """Every node under ``node``, itself first, in ``ast.walk``'s order (breadth first, fields in order): the
    readings walk hundreds of thousands of nodes, and ``ast.walk``'s generator per node and field costs half as much
    again."""
    import ast

    todo = deque((node,))
    pop, push, fields_of, known = todo.popleft, todo.append, _NODE_FIELDS.get, ast.AST
    while todo:
        node = pop()
        yield node
        kind = type(node)
        fields = fields_of(kind)
        if fields is None:
            fields = _NODE_FIELDS[kind] = tuple(f for f in kind._fields if f not in _SCALAR_FIELDS)
        for field in fields:
            value = getattr(node, field, None)
            if isinstance(value, known):
                push(value)
            elif type(value) is list:
                for item in value:
                    if isinstance(item, known):
                        push(item)


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
