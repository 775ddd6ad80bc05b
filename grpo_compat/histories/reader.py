"""The API facts of one release, read from its source files by AST (nothing is imported).

A release is read from an ``extract.Source`` (a wheel, an sdist or an installed folder read alike), so the data
the generator (``matrix/api_history.py``) writes from PyPI's files is checked against the installed release by
running this same reader on the installed folder (tests/test_histories.py).

The facts of a release are a flat dict, key -> value, so that consecutive releases with the same value fold into
one span (``spans``):

    ("m", module)                                  -> 1          the module exists
    ("n", module, name)                            -> 1          a name defined or importable there
    ("n", module, "Class.member")                  -> 1          a method, property or class attribute
    ("i", module, imported, names, guard, line)    -> 1          a module-level import
    ("s", qualname)                                -> signature  "self,/,a,b=,*args,*,c=,**kwargs"
    ("b", qualname)                                -> [bases]    a class's bases as written
    ("f", qualname)                                -> {field: default source}   a dataclass's fields
    ("r",)                                         -> [Requires-Dist lines]
    ("a", qualname, attribute)                     -> 1          a class's methods assign ``self.attribute``
    ("c", qualname, method)                        -> [[callee, positional, [keywords], via], ...]
        how the method calls methods of its class chain: ``self.callee(...)`` (via ""), ``super().callee(...)``
        (via "super"), or ``self.callee`` handed to a method of the chain that calls it (via: that method's name);
        without line numbers, which change with nearly every release of a big module (with them, five times the
        data: transformers' calls 1.1 MB of JSON instead of 0.2 MB)
    ("k", module, name)                            -> {"from", "line", "imported", "needs", "uses"}
        an optional compiled kernel: ``try: from <from> import <imported> as name except ImportError: name = None``,
        whose import needs the other distributions' modules ``needs``, and ``uses``: [[function, line, [modules
        whose classes call the function unconditionally]], ...] where the function calls ``name`` untested
    ("o", qualname, "parameter.attribute")         -> [line, [[module, class], ...]]
        the GRPO trainer's ``__init__`` (of the class ``qualname`` of its chain; trl's trainer only) reads
        ``parameter.attribute`` on an argument annotated with another distribution's classes, each named as the
        release imports it (``["transformers", "PreTrainedModel"]``): the reads static_check/objects.py judges (in
        a statement of the running ``__init__``'s own body, untested, a class of the annotation reaching it as
        passed), kept only where no file of the release stores the attribute on anything
    ("g", module, name)                            -> source     a module-level statement the guards' evaluator
        reads (grpo_compat.static_check.guards.guard_statements): in the trainers' distributions, what the module's
        guards test and its availability checks, with the names those read (``_x = _is_package_available("x")``,
        ``from ... import ...``); everywhere bodies are read, its probes, as the evaluator reads one (their returns:
        transformers >= 5.3's ``_is_package_available`` returns tuples only, which make every check on it true)

The calls, attributes, kernels, argument reads and guard statements are read by the static check's own analysis
(grpo_compat.static_check.calls, attributes, builds, objects, guards) run on the release's trees: the what-if judges a
set by the same reading as the installed check.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from email.parser import HeaderParser

from grpo_compat.settings import extract
from grpo_compat.static_check.files import IMPORT_ERROR_GUARD, module_statements

TYPE_CHECKING_GUARD = "TYPE_CHECKING"
NO_DEFAULT = extract.NO_DEFAULT
_ABSOLUTE_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+(?P<module>[A-Za-z_][\w.]*)[ \t]+import[ \t]+(?P<names>\([^)]*\)|[^\n#]*)"
    r"|import[ \t]+(?P<plain>[A-Za-z_][\w.]*(?:[ \t]+as[ \t]+\w+)?"
    r"(?:[ \t]*,[ \t]*[A-Za-z_][\w.]*(?:[ \t]+as[ \t]+\w+)?)*))",
    re.MULTILINE,
)
_LAZY_MARKERS = ("_LazyModule", "_import_structure", "def __getattr__", "MODULE_ATTRS")
# The packages whose GRPO trainer's reads of annotated arguments are recorded ("o" facts): its module and class
# (grpo_compat.static_check.TRAINER_CLASSES["trl"]; ms-swift's trainer builds trl's, another package's release).
ARGUMENT_READS_OF = {"trl": ("trl.trainer.grpo_trainer", "GRPOTrainer")}


def module_of(path: str) -> str:
    """``trl/trainer/grpo_trainer.py`` -> ``trl.trainer.grpo_trainer``; a package's ``__init__.py`` -> the package."""
    parts = path[: -len(".py")].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def signature_text(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """A ``def``'s parameters as written, without annotations or default values: ``self,/,a,b=,*args,*,c=,**kw``."""
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    first_default = len(positional) - len(args.defaults)
    parts = []
    for i, arg in enumerate(positional):
        parts.append(arg.arg + ("=" if i >= first_default else ""))
        if args.posonlyargs and i == len(args.posonlyargs) - 1:
            parts.append("/")
    if args.vararg:
        parts.append("*" + args.vararg.arg)
    elif args.kwonlyargs:
        parts.append("*")
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        parts.append(arg.arg + ("" if default is None else "="))
    if args.kwarg:
        parts.append("**" + args.kwarg.arg)
    return ",".join(parts)


def _guard(conditions: tuple[str, ...]) -> str | None:
    """The guard a statement sits under: a caught import failure wins (the import cannot fail the module)."""
    if IMPORT_ERROR_GUARD in conditions:
        return IMPORT_ERROR_GUARD
    return " and ".join(conditions) if conditions else None


def _under_type_checking(conditions: tuple[str, ...]) -> bool:
    return any(c.endswith("TYPE_CHECKING") and not c.startswith("not") for c in conditions)


def _strings(node: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _lazy_names(node: ast.stmt) -> list[str]:
    """Names a lazy ``__init__`` exports: ``_import_structure``'s lists (transformers, trl) and vLLM's MODULE_ATTRS."""
    if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        for target in targets:
            text = ast.unparse(target)
            if text.startswith("_import_structure") and value is not None:
                values = value.values if isinstance(value, ast.Dict) else [value]
                return [s for v in values for s in _strings(v)]
            if text == "MODULE_ATTRS" and isinstance(value, ast.Dict):
                return [k.value for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        func = node.value.func
        if isinstance(func, ast.Attribute) and ast.unparse(func.value).startswith("_import_structure"):
            return [s for arg in node.value.args for s in _strings(arg)]
    return []


def _bound_names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Tuple | ast.List):
        return [n for element in target.elts for n in _bound_names(element)]
    return []


def _default_text(node: ast.AnnAssign) -> str | None:
    """A dataclass field's default as source text; None for a field that is no constructor argument."""
    value = node.value
    if value is None:
        return NO_DEFAULT
    if isinstance(value, ast.Call) and extract._base_name(value.func) == "field":
        keywords = {k.arg: k.value for k in value.keywords}
        init = keywords.get("init")
        if isinstance(init, ast.Constant) and init.value is False:
            return None
        if "default" in keywords:
            return ast.unparse(keywords["default"])
        if "default_factory" in keywords:
            factory = keywords["default_factory"]
            return ast.unparse(factory.body) if isinstance(factory, ast.Lambda) else f"{ast.unparse(factory)}()"
        return NO_DEFAULT
    return ast.unparse(value)


def _own_fields(node: ast.ClassDef) -> dict[str, str]:
    fields = {}
    for item in node.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            if "ClassVar" in ast.unparse(item.annotation):
                continue
            default = _default_text(item)
            if default is not None:
                fields[item.target.id] = default
    return fields


def requires_of(metadata: str | None) -> list[str] | None:
    """The Requires-Dist lines of a core-metadata text, as declared; None when it lists none (dynamic)."""
    if not metadata:
        return None
    lines = HeaderParser().parsestr(metadata).get_all("Requires-Dist")
    return [" ".join(line.split()) for line in lines] if lines else None


class ReleaseReader:
    """Reads the facts of one release's modules (those its Source lets through).

    ``memo`` (path -> (text, tree, module's facts)), shared by the releases of one distribution read in order,
    lets a file unchanged since the previous release be neither parsed nor walked again: parsing is most of
    the cost, and most files of a patch release are unchanged.
    """

    def __init__(
        self, source: extract.Source, memo: dict | None = None, bodies: bool = True, checks: bool = False
    ) -> None:
        self.source = source
        self.memo = memo if memo is not None else {}
        self.bodies = bodies  # read the ("a", "c", "k", "g") facts of bodies too
        self.checks = checks  # the ("g") facts of guards and availability checks too, not only of probes
        self.facts: dict[tuple, object] = {}
        self._all: dict[str, list[str]] = {}  # module -> its __all__, for star imports
        self._stars: list[tuple[str, str]] = []  # (module, module it star-imports)
        self._dataclasses: list[tuple[str, str, ast.ClassDef]] = []  # (qualname, path, node): fields read last
        self._calls: list[tuple[str, str, ast.ClassDef, dict]] = []  # (qualname, path, node, calls): chains read last
        self._kernels: list[tuple] = []  # (module, name, from, line, imported, uses): what they need read last
        # every module imported anywhere (in functions too), and ``from m import x``'s m.x: what a big
        # dependency's data must cover for this release (vllm and deepspeed are read only that far)
        self.referenced: set[str] = set()

    def read(self) -> dict[tuple, object]:
        for path in sorted(self.source.paths):
            text = self.source.text(path)
            cached = self.memo.get(path)
            if cached is None or cached[0] != text:
                try:
                    tree = self.source.tree(path)
                except SyntaxError:
                    continue  # a file this interpreter cannot parse (a template, a py2 leftover): nothing read
                cached = self.memo[path] = (text, tree, self._module_facts(path, tree), {})
            self.source._trees[path] = cached[1]  # the fields' base classes are looked up in these trees
            if "imported" in cached[3]:
                self.source._imports[path] = cached[3]["imported"]
            facts, all_names, stars, referenced, dataclasses, calls, kernels = cached[2]
            self.facts.update(facts)
            self._all.update(all_names)
            self._stars += stars
            self.referenced |= referenced
            self._dataclasses += dataclasses
            self._calls += calls
            self._kernels += kernels
        self._resolve_stars()
        for qualname, path, node in self._dataclasses:
            self.facts[("f", qualname)] = self._fields(path, node)
        self._read_chain_calls()
        self._read_kernels()
        if self.bodies and self.source.package in ARGUMENT_READS_OF:
            self.facts.update(argument_reads(self.source, ARGUMENT_READS_OF[self.source.package]))
        for path, imported in self.source._imports.items():  # the next release reuses the import maps too
            if path in self.memo:
                self.memo[path][3]["imported"] = imported
        requires = requires_of(self.source.metadata)
        if requires is not None:
            self.facts[("r",)] = requires
        return self.facts

    def _module_facts(self, path: str, tree: ast.Module) -> tuple:
        """What one file contributes, read into fresh containers (so that the memo can hold it)."""
        kept = (self.facts, self._all, self._stars, self.referenced, self._dataclasses, self._calls, self._kernels)
        self.facts, self._all, self._stars, self.referenced, self._dataclasses, self._calls, self._kernels = (
            {}, {}, [], set(), [], [], []
        )  # fmt: skip
        try:
            self._read_module(path, tree)
            return self.facts, self._all, self._stars, self.referenced, self._dataclasses, self._calls, self._kernels
        finally:
            self.facts, self._all, self._stars, self.referenced, self._dataclasses, self._calls, self._kernels = kept

    def _read_module(self, path: str, tree: ast.Module) -> None:
        module = module_of(path)
        facts = self.facts
        text = self.source.text(path)
        for match in _ABSOLUTE_IMPORT.finditer(text):  # a regex: a second walk of every tree costs more than the read
            if match["plain"]:
                self.referenced.update(m.split(" as ")[0].strip() for m in match["plain"].split(","))
            else:
                names = (match["names"] or "").replace("(", " ").replace(")", " ").replace("\\", " ")
                self.referenced.add(match["module"])
                self.referenced.update(
                    f"{match['module']}.{n.split(' as ')[0].strip()}" for n in names.split(",") if n.strip()
                )
        facts[("m", module)] = 1
        lazy = any(marker in text for marker in _LAZY_MARKERS)
        from grpo_compat.static_check.files import Module

        checked = Module.of_tree(module, ".", path, tree, text) if self.bodies else None  # the static check's view
        if checked is not None:
            self._kernels += _kernel_candidates(checked)
            from grpo_compat.static_check.guards import guard_statements

            for bound, statement in guard_statements(tree, path, self.checks).items():
                facts[("g", module, bound)] = statement

        def name(value: str) -> None:
            if not (value.startswith("__") and value.endswith("__")):
                facts[("n", module, value)] = 1

        for node, conditions in module_statements(tree.body):
            type_only = _under_type_checking(conditions)
            guard = TYPE_CHECKING_GUARD if type_only else _guard(conditions)
            if isinstance(node, ast.Import | ast.ImportFrom):
                imported = extract._absolute(path, node) if isinstance(node, ast.ImportFrom) else None
                if imported is not None:
                    names = ",".join(a.name for a in node.names)
                    facts[("i", module, imported, names, guard or "", node.lineno)] = 1
                    if type_only and not lazy:
                        continue  # never bound when the module runs
                    for alias in node.names:
                        if alias.name == "*":
                            self._stars.append((module, imported))
                        else:
                            name(alias.asname or alias.name)
                else:
                    for alias in node.names:
                        facts[("i", module, alias.name, "", guard or "", node.lineno)] = 1
                continue
            if type_only and not lazy:
                continue
            for value in _lazy_names(node):
                name(value)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                name(node.name)
                facts[("s", f"{module}.{node.name}")] = signature_text(node)
            elif isinstance(node, ast.ClassDef):
                name(node.name)
                self._read_class(module, path, node, checked)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    for bound in _bound_names(target):
                        if bound == "__all__":
                            self._all[module] = self._all.get(module, []) + _strings(node.value)
                        name(bound)
            elif isinstance(node, ast.AnnAssign | ast.AugAssign):
                for bound in _bound_names(node.target):
                    if bound == "__all__" and node.value is not None:
                        self._all[module] = self._all.get(module, []) + _strings(node.value)
                    name(bound)
        for value in self._all.get(module, []):
            name(value)

    def _read_class(self, module: str, path: str, node: ast.ClassDef, checked) -> None:
        qualname = f"{module}.{node.name}"
        self.facts[("b", qualname)] = [ast.unparse(base) for base in node.bases]
        if checked is not None:
            self._read_bodies(qualname, path, node, checked)
        for item in node.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                self.facts[("n", module, f"{node.name}.{item.name}")] = 1
                decorators = [ast.unparse(d) for d in item.decorator_list]
                if not any(d == "property" or d.endswith((".setter", ".getter", ".deleter")) for d in decorators):
                    self.facts[("s", f"{qualname}.{item.name}")] = signature_text(item)
            elif isinstance(item, ast.Assign | ast.AnnAssign):
                targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                for target in targets:
                    for bound in _bound_names(target):
                        self.facts[("n", module, f"{node.name}.{bound}")] = 1
        if extract._is_dataclass(node):
            self._dataclasses.append((qualname, path, node))

    def _read_bodies(self, qualname: str, path: str, node: ast.ClassDef, checked) -> None:
        """The attributes a class's methods assign on self; its methods' calls, judged once its chain is read."""
        from grpo_compat.static_check.attributes import _self_assignments

        assigned = set()
        for item in node.body:
            if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                assigned |= _self_assignments(checked, item)
        for attribute in assigned:
            self.facts[("a", qualname, attribute)] = 1
        calls = _class_calls(checked, node)
        calls["assigned"] = assigned
        self._calls.append((qualname, path, node, calls))

    def _fields(self, path: str, node: ast.ClassDef) -> dict[str, str]:
        """A dataclass's fields with those of its bases in the same package, in dataclass order."""
        fields: dict[str, str] = {}
        for cls in reversed(extract.linearise(self.source, extract.ClassRef(path, node), set())):
            if extract._is_dataclass(cls.node):
                fields.update(_own_fields(cls.node))
        return fields

    def _read_chain_calls(self) -> None:
        """("c", ...) facts: each class's calls of the methods of its chain (its same-package bases, linearised),
        and where a base is another package's (trl's trainers on transformers' ``Trainer``), of the methods it may
        inherit from there: names neither the chain defines nor its methods assign."""
        by_node = {id(node): calls for _, _, node, calls in self._calls}
        for qualname, path, node, calls in self._calls:
            if not calls["calls"]:
                continue
            external: set[str] = set()
            chain = extract.linearise(self.source, extract.ClassRef(path, node), external)
            effective: dict[str, dict] = {}  # method -> the calls record of the class whose method it is
            known: set[str] = set()  # every name a class of the chain defines or assigns
            for ref in chain:
                found = by_node.get(id(ref.node)) or _class_calls(None, ref.node)
                for method in found["methods"]:
                    effective.setdefault(method, found)
                known |= found["names"] | found.get("assigned", set())
            inherits = bool(external - {"ABC", "object"})
            callable_names = set(effective) | ({"*"} if inherits else set())
            for method, made in calls["calls"].items():
                recorded = set()
                for via, target, positional, keywords, _line in made:
                    if via != "hand":
                        if _in_chain(target, callable_names, known):
                            recorded.add((target, positional, tuple(keywords), via))
                        continue
                    helper, handed = target  # self.helper(..., key=self.handed): the helper's calls of its parameter
                    owner = effective.get(helper)
                    parameter = owner and owner["parameters"].get(helper, {}).get(positional, positional)
                    if owner is None or not _in_chain(handed, callable_names, known) or not isinstance(parameter, str):
                        continue
                    for inner_positional, inner_keywords in owner["parameter_calls"].get(helper, {}).get(parameter, ()):
                        recorded.add((handed, inner_positional, tuple(inner_keywords), helper))
                if recorded:
                    self.facts[("c", qualname, method)] = [[t, p, list(k), v] for t, p, k, v in sorted(recorded)]

    def _read_kernels(self) -> None:
        """("k", ...) facts: a kernel set to None where its import fails, called untested by a function that a
        class's method calls unconditionally (builds.py's reading): with the other distributions' modules its
        import needs."""
        from grpo_compat.static_check import builds

        files = _ReleaseFiles(self.source)
        own = {self.source.package}
        for module, name, source_module, line, imported, uses in self._kernels:
            needs = list(dict.fromkeys(builds.unreachable_imports(files, source_module, own, _unguarded)))
            found = []
            kernel_module = files.module(module)
            for function, use in uses:
                callers = [
                    caller
                    for caller in files.mentioning(function)
                    if builds._called_by_trainer(files.module(caller), kernel_module, function)
                ]
                if callers:
                    found.append([function, use, sorted(callers)])
            if found and needs:
                self.facts[("k", module, name)] = {
                    "from": source_module, "line": line, "imported": imported, "needs": needs, "uses": found
                }  # fmt: skip

    def _resolve_stars(self) -> None:
        """``from .x import *`` binds x's ``__all__``, else its public names (resolved until nothing changes)."""
        names_of: dict[str, set[str]] = {}
        for key in self.facts:
            if key[0] == "n" and "." not in key[2]:
                names_of.setdefault(key[1], set()).add(key[2])
        changed = True
        while changed:
            changed = False
            for module, imported in self._stars:
                exported = self._all.get(imported) or [n for n in names_of.get(imported, ()) if not n.startswith("_")]
                new = set(exported) - names_of.setdefault(module, set())
                if new:
                    names_of[module] |= new
                    changed = True
                    for value in new:
                        self.facts[("n", module, value)] = 1


def _in_chain(target: str, methods: set[str], known: set[str]) -> bool:
    """A method of the chain, or (``"*"`` in ``methods``: a base is another package's) a name the chain neither
    defines nor assigns, which it may inherit from there."""
    return target in methods or ("*" in methods and target not in known)


def _unguarded(_install, guards: tuple, _module) -> bool:
    return not guards


class _ReleaseFiles:
    """A release's files as the static check reads an install's (``find``, ``module``): another distribution's
    module is not found."""

    def __init__(self, source: extract.Source) -> None:
        self.source = source
        self._modules: dict[str, object] = {}

    def find(self, name: str) -> tuple[str, str] | None:
        path = self.source.module_path(name)
        return None if path is None else (".", path)

    def module(self, name: str):
        from grpo_compat.static_check.files import Module

        if name not in self._modules:
            path = self.source.module_path(name)
            tree = self.source.tree(path) if path else None
            self._modules[name] = tree and Module.of_tree(name, ".", path, tree, self.source.text(path))
        return self._modules[name]

    def mentioning(self, word: str) -> list[str]:
        """The modules whose text holds ``word``."""
        return [module_of(path) for path in self.source.paths if word in self.source.text(path)]


class _ForeignModule:
    """A module of another distribution that a release imports from: every name asked of it is a class with no body
    or bases (the same node each time), which the histories of that distribution judge (objects.py's reading run on
    one release's files: ``from transformers import PreTrainedModel`` resolves to it)."""

    site, path, text, tree = ".", "", "", None

    def __init__(self, name: str) -> None:
        self.name = name
        self.classes = _ForeignClasses()
        self.functions: dict = {}
        self.imports: list = []
        self.lazy: dict = {}
        self.stars: list = []


class _ForeignClasses(dict):
    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.isidentifier()

    def __missing__(self, name: str) -> ast.ClassDef:
        node = self[name] = ast.ClassDef(name=name, bases=[], keywords=[], body=[], decorator_list=[])
        return node


class _ReleaseInstall(_ReleaseFiles):
    """A release's files as objects.py reads an install's: a module of another distribution is a _ForeignModule;
    nothing is installed, so no version is known and an availability check finds nothing."""

    evaluator = None

    def module(self, name: str):
        if name.split(".")[0] == self.source.package:
            return super().module(name)
        if name not in self._modules:
            self._modules[name] = _ForeignModule(name)
        return self._modules[name]

    def version(self, _distribution: str) -> None:
        return None

    def owner(self, module: str) -> str:
        return module.split(".")[0]


def argument_reads(source: extract.Source, entry: tuple[str, str]) -> dict[tuple, list]:
    """("o", ...) facts: the reads objects.py judges on the trainer's annotated arguments, where every class that
    reaches the read is another distribution's (what that distribution's release sets is judged from its history),
    and no file of this release stores the attribute on anything (``x.X = ...``, ``setattr(x, "X", ...)``)."""
    from grpo_compat.static_check.objects import _reads_of_annotated, names_in

    install = _ReleaseInstall(source)
    found: dict[tuple, list] = {}
    stored: dict[str, bool] = {}
    for read in _reads_of_annotated(install, entry, None, unset=False):
        if not isinstance(read.cls.module, _ForeignModule):
            continue  # one of the release's own classes (GRPOConfig): its chain crosses into another package
        if read.attribute not in stored:
            needle = read.attribute.encode()
            stored[read.attribute] = any(
                names_in(source.text(path).encode(), needle, read.attribute, stores_only=True)
                for path in source.paths
                if read.attribute in source.text(path)
            )
        if stored[read.attribute]:
            continue
        definition = read.order[read.index]
        key = ("o", f"{definition.module.name}.{definition.node.name}", f"{read.name}.{read.attribute}")
        classes = found.setdefault(key, [read.line, []])[1]
        if [read.cls.module.name, read.cls.node.name] not in classes:
            classes.append([read.cls.module.name, read.cls.node.name])
    return found


def _kernel_candidates(checked) -> list[tuple]:
    """(module, name, from, line, imported, uses) for each ``name = None`` fallback of a kernel import that a
    function of the module calls untested (grpo_compat.static_check.builds' reading)."""
    from grpo_compat.static_check import builds

    found = []
    if "None" not in checked.text:
        return found
    for name, source_module, line, imported in builds._none_fallbacks(checked):
        uses = builds._untested_uses(checked, name)
        if uses:
            found.append((checked.name, name, source_module, line, imported, uses))
    return found


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def _class_calls(checked, node: ast.ClassDef) -> dict:
    """What a class's own methods call of ``self`` (the static check's judged calls: none under a version test or
    in a try that catches TypeError, none with ``*args`` / ``**kwargs``), and the calls each method makes of its
    own parameters (a helper handed ``self.m`` calls ``m`` so). Without ``checked`` (a file not read here), only
    its names."""
    from grpo_compat.static_check import calls as check

    own = check.methods(check.Definition(checked, node))
    names = {n.name for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    for item in node.body:
        if isinstance(item, ast.Assign | ast.AnnAssign):
            for target in item.targets if isinstance(item, ast.Assign) else [item.target]:
                names.update(_bound_names(target))
    found: dict = {"methods": set(own), "names": names, "calls": {}, "parameters": {}, "parameter_calls": {}}
    if checked is None:
        return found
    for method, function in own.items():
        parameters = [a.arg for a in function.args.posonlyargs + function.args.args][1:]
        found["parameters"][method] = dict(enumerate(parameters)) | {p: p for p in parameters}
        called = set()
        for call in check.judged_calls(checked, function, set(parameters) | {"self", "super"}):
            func = call.func
            shape = check.call_shape(call)
            if isinstance(func, ast.Name) and func.id in parameters and shape:
                found["parameter_calls"].setdefault(method, {}).setdefault(func.id, []).append(shape)
            if not isinstance(func, ast.Attribute):
                continue
            if _is_self(func.value):
                if shape:
                    called.add(("", func.attr, shape[0], tuple(shape[1]), call.lineno))
                handed = [*enumerate(call.args), *((k.arg, k.value) for k in call.keywords if k.arg)]
                for key, value in handed:
                    if isinstance(value, ast.Attribute) and _is_self(value.value):
                        called.add(("hand", (func.attr, value.attr), key, (), call.lineno))
            elif isinstance(func.value, ast.Call) and isinstance(func.value.func, ast.Name) and shape:
                if func.value.func.id == "super":
                    called.add(("super", func.attr, shape[0], tuple(shape[1]), call.lineno))
        if called:
            found["calls"][method] = sorted(called, key=lambda c: (c[4], c[0], str(c[1])))
    for method in own:
        found["parameter_calls"].setdefault(method, {})
    return found


def read_release(
    source: extract.Source, memo: dict | None = None, bodies: bool = True, checks: bool = False
) -> tuple[dict[tuple, object], set[str]]:
    """The release's facts, and the modules its code imports anywhere (``memo``, ``bodies``, ``checks``: see
    ReleaseReader)."""
    reader = ReleaseReader(source, memo, bodies, checks)
    return reader.read(), reader.referenced


def scope_filter(package: str, modules: list[str] | None, exclude: Callable[[str], bool] | None = None):
    """The files read: the listed modules and their packages' ``__init__`` (all when None), less ``exclude``."""
    if modules is None:
        return (lambda path: not exclude(path)) if exclude else None
    wanted = set()
    for module in modules:
        parts = module.split(".")
        for i in range(1, len(parts) + 1):
            base = "/".join(parts[:i])
            wanted.update({f"{base}.py", f"{base}/__init__.py"})
    return lambda path: path in wanted and not (exclude and exclude(path))
