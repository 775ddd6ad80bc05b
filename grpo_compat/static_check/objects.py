"""Attributes the trainer reads on objects other than ``self`` that a release of their class removed (the static
check's ``attribute`` kind, grpo_compat.static_check; ``self.X`` reads are attributes.py's).

trl 0.14-0.26 write ``model.warnings_issued["estimate_tokens"] = True`` in ``GRPOTrainer.__init__``, ``model`` being
annotated ``Union[str, PreTrainedModel]``; transformers set ``self.warnings_issued = {}`` in
``PreTrainedModel.__init__`` up to 5.0 and dropped it in 5.1, so on 5.1 and later the trainer cannot be built. Found
where all of this holds:

- the read is in a statement of an ``__init__`` that runs for the trainer, in its own body (no if, loop, with or try
  around it, no test of attributes or versions in it), on a parameter annotated with classes (``str`` / ``None``
  aside) that all resolve;
- a class ``C`` of the annotation reaches the read unchanged: every rebinding of the parameter before it is in a
  branch a ``C`` instance need not take (``if isinstance(model, str):`` is false for it, a test the check cannot
  decide may be);
- every base of ``C``'s chain resolves, none has a ``__getattr__`` that hands the name to another object, and no class
  of the chain sets the attribute (a class attribute, a method or property, ``self.X = ...`` in any method);
- a release of the chain's distribution had it on a class of the chain (the API histories: a class member, or
  ``self.X = ...`` in a method), and the installed release is after the last that had it;
- no file of the chain's distributions names it at all (a subclass, such as a concrete model, may set it; a
  registry, ``setattr(self, name, ...)``, nn.Module's ``__getattr__``, is filled from names written somewhere), and
  no file of the trainer's distribution stores it on anything (``x.X = ...``, ``setattr(x, "X", ...)``).

Anything the check cannot tell is left alone: a false finding on a stack that trains is harm.
"""

from __future__ import annotations

import ast
import os

from grpo_compat.static_check.attributes import (
    ALWAYS_RUN_STATEMENTS,
    _always_runs,
    _class_names,
    _self_assignments,
    _spans_any,
    trainer_inits,
)
from grpo_compat.static_check.calls import Definition, _resolve_expression, methods, resolve
from grpo_compat.static_check.files import _VERSION_TEST, Finding, Install, Module, walk

# Annotation members that are not classes of a package: a value of these types is not what the finding is about.
_BUILTINS = {"str", "bytes", "int", "float", "bool", "dict", "list", "tuple", "set", "None", "NoneType"}
_OPEN_BASES = ("object", "Generic", "typing.Generic", "ABC", "abc.ABC", "Protocol", "typing.Protocol")


class _Read:
    """``name.attribute`` read on line ``line`` of the ``__init__`` of ``order[index]`` (the trainer's chain), where
    ``name`` is annotated with ``cls`` (its closed chain ``chain``, setting ``names``) and a ``cls`` reaches the read
    as it was passed."""

    __slots__ = ("attribute", "chain", "cls", "index", "line", "name", "names", "order")

    def __init__(self, order, index, name, attribute, line, cls, chain, names) -> None:
        self.order, self.index, self.name, self.attribute, self.line = order, index, name, attribute, line
        self.cls, self.chain, self.names = cls, chain, names

    @property
    def trainer_tops(self) -> set[str]:
        """The packages of the trainer class and of the reading ``__init__`` (trl; ms-swift and trl)."""
        return {self.order[0].module.name.split(".")[0], self.order[self.index].module.name.split(".")[0]}


def object_attribute_findings(install: Install, entry: tuple[str, str], walked: dict[str, Module]) -> list[Finding]:
    findings: list[Finding] = []
    judged = set()
    for read in _reads_of_annotated(install, entry, walked, unset=True):
        if (read.name, read.attribute) in judged:
            continue
        removed = _removed_by(install, read.chain, read.attribute)
        if removed is None:
            continue
        if _named_anywhere(install, {d.module.name.split(".")[0] for d in read.chain}, read.attribute, False):
            continue
        if _named_anywhere(install, read.trainer_tops, read.attribute, stores_only=True):
            continue
        judged.add((read.name, read.attribute))
        findings.append(_finding(install, read, removed))
    return findings


def _reads_of_annotated(install: Install, entry: tuple[str, str], walked: dict[str, Module] | None, unset: bool):
    """Every read of an attribute on an annotated parameter of an ``__init__`` that runs for the trainer, in a
    statement of its own body, for each class of the annotation that reaches it unchanged (``unset``: only those
    whose installed chain does not set the attribute)."""
    found = trainer_inits(install, entry, walked)
    if found is None:
        return
    order, inits = found
    for index, function in inits:
        module = order[index].module
        annotated = _annotated_parameters(function)
        if not annotated:
            continue
        lines = module.lines_mentioning(set(annotated))
        statements = [s for s in function.body if isinstance(s, ALWAYS_RUN_STATEMENTS) and _spans_any(s, lines)]
        seen: set[tuple[str, str]] = set()
        chains: dict[str, list] = {}  # parameter -> [(class, its chain, the names the chain sets)]
        for name, attribute, line in _reads(module, statements, set(annotated)):
            if (name, attribute) in seen or not _always_runs(function, line):
                continue
            seen.add((name, attribute))
            if name not in chains:
                chains[name] = _chains(install, module, annotated[name])
            for cls, chain, names in chains[name]:
                if unset and attribute in names:
                    continue
                if _reaches_unchanged(install, module, function, name, chain, line):
                    yield _Read(order, index, name, attribute, line, cls, chain, names)


def _chains(install: Install, module: Module, annotation) -> list[tuple[Definition, list[Definition], set[str]]]:
    """Each class an annotation names whose chain is closed, with the chain and the names it sets; [] where a member
    of the annotation does not resolve (the type is not known)."""
    found = []
    for cls in _annotation_classes(install, module, annotation):
        chain = _closed_chain(install, cls)
        if chain is not None:
            found.append((cls, chain, _set_names(chain)))
    return found


# -- the reads ------------------------------------------------------------------------------------------------------


def _annotated_parameters(function) -> dict[str, ast.expr]:
    arguments = function.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    return {a.arg: a.annotation for a in every if a.annotation is not None and a.arg not in ("self", "cls")}


def _reads(module: Module, statements: list, names: set[str]) -> list[tuple[str, str, int]]:
    """``name.X`` loads (a subscript store ``name.X[k] = v`` loads ``name.X``) of the given names, none under a test
    of attributes or versions, in a ``try``, or in a nested function."""
    reads: list[tuple[str, str, int]] = []
    for statement in statements:
        _reads_under(module, statement, names, reads)
    return reads


def _reads_under(module: Module, node, names: set[str], reads: list) -> None:
    if isinstance(node, ast.If | ast.IfExp | ast.While) and _VERSION_TEST.search(module.segment(node.test)):
        return
    if isinstance(node, ast.Try | ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
        return
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Load)
        and isinstance(node.value, ast.Name)
        and node.value.id in names
    ):
        reads.append((node.value.id, node.attr, node.lineno))
    for child in _always_evaluated(node):
        _reads_under(module, child, names, reads)


def _always_evaluated(node) -> list:
    """The parts of an expression that run whenever it does: an ``a if t else b``'s test, an ``and`` / ``or``'s
    first operand, a comprehension's first iterable (the rest may never run)."""
    if isinstance(node, ast.IfExp):
        return [node.test]
    if isinstance(node, ast.BoolOp):
        return node.values[:1]
    if isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
        return [node.generators[0].iter]
    return list(ast.iter_child_nodes(node))


# -- the object's type ----------------------------------------------------------------------------------------------


def _annotation_classes(install: Install, module: Module, annotation) -> list[Definition]:
    """The classes an annotation names (``Union[str, PreTrainedModel]``, ``"A | None"``), builtins aside; [] where a
    member does not resolve to a class."""
    members: list[ast.expr] = []
    _members(annotation, members)
    members = [m for m in members if not (isinstance(m, ast.Constant) and m.value is None)]
    if not all(isinstance(member, ast.Name | ast.Attribute) for member in members):
        return []  # dict[str, Dataset], Callable[...]: not judged (nothing resolved for it)
    classes = []
    for member in members:
        if ast.unparse(member) in _BUILTINS:
            continue
        found = _resolve_class(install, module, member)
        if found is None:
            return []
        classes.append(found)
    return classes


def _members(node, members: list) -> None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a string annotation
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            members.append(node)
            return
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        _members(node.left, members)
        _members(node.right, members)
    elif isinstance(node, ast.Subscript) and ast.unparse(node.value).rsplit(".", 1)[-1] in ("Union", "Optional"):
        inner = node.slice
        for element in inner.elts if isinstance(inner, ast.Tuple) else [inner]:
            _members(element, members)
    else:
        members.append(node)


def _resolve_class(install: Install, module: Module, node: ast.expr) -> Definition | None:
    """A class named in a module: imported by name, or ``package.Class`` where ``from torch import nn`` bound the
    submodule (``nn.Module``)."""
    found = _resolve_expression(install, module, node)
    if found is None and isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        for record in module.imports:
            for imported, bound in record.names:
                submodule = f"{record.module}.{imported}"
                if bound == node.value.id and install.find(submodule):
                    found = resolve(install, submodule, node.attr)
    return found if found is not None and isinstance(found.node, ast.ClassDef) else None


def _closed_chain(install: Install, cls: Definition) -> list[Definition] | None:
    """Every class of ``cls``'s chain, or None where a base does not resolve or a ``__getattr__`` hands names to
    another object (peft's PeftModel forwards to the model it wraps)."""
    chain, queue = [], [cls]
    while queue:
        current = queue.pop(0)
        if current in chain:
            continue
        if len(chain) > 40:
            return None
        chain.append(current)
        for node in current.node.body:
            if isinstance(node, ast.FunctionDef) and node.name in ("__getattr__", "__getattribute__"):
                if "getattr(" in current.module.segment(node).replace("__getattr__(", ""):
                    return None
        for base in current.node.bases:
            if ast.unparse(base).startswith(_OPEN_BASES):
                continue
            found = _resolve_class(install, current.module, base)
            if found is None:
                return None
            queue.append(found)
    return chain


def _set_names(chain: list[Definition]) -> set[str]:
    """The attributes the classes of a chain have: class attributes, methods and properties, and ``self.X = ...`` in
    any of their methods."""
    names: set[str] = set()
    for definition in chain:
        names |= _class_names(definition.node)
        for function in methods(definition).values():
            names |= _self_assignments(definition.module, function)
    return names


def _reaches_unchanged(install: Install, module: Module, function, name: str, chain: list, line: int) -> bool:
    """Whether an instance of the chain's class reaches the read on line ``line`` as it was passed: every rebinding
    of ``name`` before it is in a branch that instance need not take."""
    return not _rebinds(install, module, function.body, name, chain, line, avoidable=False)


def _rebinds(install, module, body: list, name: str, chain: list, line: int, avoidable: bool) -> bool:
    for statement in body:
        if statement.lineno >= line:
            break
        if isinstance(statement, ast.If):
            if not avoidable and any(_binds(node, name) for node in walk(statement.test)):
                return True  # if (model := wrap(model)):
            holds = _holds_for(install, module, statement.test, name, chain)
            if _rebinds(install, module, statement.body, name, chain, line, avoidable or holds is not True):
                return True
            if _rebinds(install, module, statement.orelse, name, chain, line, avoidable or holds is not False):
                return True
            continue
        if avoidable:
            continue
        if any(_binds(node, name) for node in walk(statement)):
            return True
    return False


def _binds(node, name: str) -> bool:
    """Whether a node (re)binds ``name``: a store or delete, ``global`` / ``nonlocal``, an import as it."""
    if isinstance(node, ast.Name):
        return node.id == name and not isinstance(node.ctx, ast.Load)
    if isinstance(node, ast.Global | ast.Nonlocal):
        return name in node.names
    return isinstance(node, ast.alias) and (node.asname or node.name) == name


def _holds_for(install, module, test, name: str, chain: list) -> bool | None:
    """A test's value for an instance of the chain's class bound to ``name``: True, False, or None (cannot say)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        value = _holds_for(install, module, test.operand, name, chain)
        return None if value is None else not value
    if isinstance(test, ast.BoolOp):
        values = [_holds_for(install, module, v, name, chain) for v in test.values]
        if isinstance(test.op, ast.And):
            return False if False in values else None if None in values else True
        return True if True in values else None if None in values else False
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Is | ast.IsNot)
        and isinstance(test.left, ast.Name)
        and test.left.id == name
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    ):
        return isinstance(test.ops[0], ast.IsNot)
    if (
        isinstance(test, ast.Call)
        and isinstance(test.func, ast.Name)
        and test.func.id == "isinstance"
        and len(test.args) == 2
        and isinstance(test.args[0], ast.Name)
        and test.args[0].id == name
    ):
        kinds = test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
        values = [_is_instance(install, module, kind, chain) for kind in kinds]
        return True if True in values else None if None in values else False
    return None


def _is_instance(install, module, kind, chain: list) -> bool | None:
    if isinstance(kind, ast.Name) and kind.id in _BUILTINS:
        return False  # the chain resolved to package classes, none of them a builtin
    found = _resolve_class(install, module, kind) if isinstance(kind, ast.Name | ast.Attribute) else None
    return True if found is not None and found in chain else None


# -- the evidence: a release had it, no installed code names it -----------------------------------------------------


def _removed_by(install: Install, chain: list[Definition], attribute: str, versions=None) -> tuple | None:
    """(distribution, the class that had it, the releases that had it, the first release without it) where the API
    histories say a release of a chain class's distribution had the attribute and the installed one (``versions``:
    the what-if set's, canonical name -> version) comes after."""
    from grpo_compat.core.versions import canonicalize_name
    from grpo_compat.static_check.fixes import _history, _key

    for definition in chain:
        distribution = install.owner(definition.module.name)
        release = versions.get(canonicalize_name(distribution)) if versions else install.version(distribution)
        history = _history(distribution)
        if history is None or release is None:
            continue
        spans = _attribute_spans(history, definition.module.name, definition.node.name, attribute)
        before = [last for _, last in spans if _key(last) < _key(release)]
        if not spans or any(_key(first) <= _key(release) <= _key(last) for first, last in spans) or not before:
            continue
        last = max(before, key=_key)
        following = [r for r in history.releases if _key(r) > _key(last)]
        return distribution, definition, spans, following[0] if following else None
    return None


def _attribute_spans(history, module: str, cls: str, attribute: str) -> list[tuple[str, str]]:
    """The releases whose ``module.cls`` had ``attribute``: a class member, or ``self.X = ...`` in a method."""
    index = {release: i for i, release in enumerate(history.releases)}
    assigned = history._data.get("attributes", {}).get(f"{module}.{cls}", {}).get(attribute, [])
    pairs = [(index[a], index[b]) for a, b in history.name_spans(module, f"{cls}.{attribute}")] + assigned
    held = sorted({i for first, last in pairs for i in range(first, last + 1)})
    spans: list[tuple[str, str]] = []
    for i in held:  # one span per run of consecutive releases
        if spans and index[spans[-1][1]] == i - 1:
            spans[-1] = (spans[-1][0], history.releases[i])
        else:
            spans.append((history.releases[i], history.releases[i]))
    return spans


def _named_anywhere(install: Install, tops: set[str], attribute: str, stores_only: bool, skip=()) -> bool:
    """Whether a file of these top-level packages (but the paths ``skip``) names the attribute in code
    (``stores_only``: stores it on an object: ``x.X = ...``, ``del x.X``, or names it as a string,
    ``setattr(x, "X", ...)``); comments do not count."""
    needle = attribute.encode()
    for top in sorted(tops):
        found = install.find(top)
        if not found or not found[1].endswith("__init__.py"):
            continue
        for folder, _, files in os.walk(os.path.dirname(found[1])):
            for file in files:
                path = os.path.join(folder, file)
                if file.endswith(".py") and path not in skip and _names(path, needle, attribute, stores_only):
                    return True
    return False


def _names(path: str, needle: bytes, attribute: str, stores_only: bool) -> bool:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return False
    return names_in(data, needle, attribute, stores_only)


def names_in(data: bytes, needle: bytes, attribute: str, stores_only: bool) -> bool:
    """Whether a file's bytes name the attribute in code (``_named_anywhere``'s test of one file)."""
    if needle not in data:
        return False
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return True  # cannot tell: it may
    for node in walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == attribute:
            if not stores_only or not isinstance(node.ctx, ast.Load):
                return True
        elif isinstance(node, ast.Constant) and node.value == attribute:
            return True
        elif not stores_only and (
            (isinstance(node, ast.Name) and node.id == attribute)
            or (isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == attribute)
            or (isinstance(node, ast.arg | ast.keyword) and node.arg == attribute)
        ):
            return True
    return False


def _finding(install, read: _Read, removed) -> Finding:
    from grpo_compat.static_check.fixes import for_removed_attribute

    distribution, had, spans, first_without = removed
    owner, message = _said(install, read, distribution, install.version(distribution), had, spans, first_without)
    fix = for_removed_attribute(install, distribution, had.node.name, read.attribute, spans, owner)
    where = f"{read.order[read.index].module.relative_path}:{read.line}"
    return Finding("attribute", message, where, f"{owner} {install.version(owner)}",
                   f"{distribution} {install.version(distribution)}", fix)  # fmt: skip


def _said(install, read: _Read, distribution, version, had, spans, first_without) -> tuple[str, str]:
    """(the reading distribution, the finding's message)."""
    definition = read.order[read.index]
    owner = install.owner(definition.module.name)
    where = f"{definition.module.relative_path}:{read.line}"
    reader = (f"{owner} {install.version(owner)}", definition.node.name, where)
    package = (distribution, version)
    return owner, _message(reader, read.name, read.attribute, read.cls.node.name, package, had, spans, first_without)


def _message(reader: tuple, name: str, attribute: str, cls: str, package: tuple, had, spans, first_without) -> str:
    """``reader``: (its distribution and release, the class whose ``__init__`` reads, where); ``package``: the
    annotated class's distribution and the release judged."""
    owner, init_class, where = reader
    distribution, version = package
    had_it = ", ".join(first if first == last else f"{first}-{last}" for first, last in spans)
    removed_in = f", removed in {first_without}" if first_without else ""
    return (
        f"{owner}'s {init_class}.__init__ reads {name}.{attribute} ({where}) on every build, {name} being a {cls} "
        f"(its annotation), and no class of {cls}'s chain in {distribution} {version} sets it ({distribution} had it "
        f"on {had.node.name} in {had_it}{removed_in}): '{cls}' object has no attribute '{attribute}'"
    )


def _release_sets(history, module: str, cls: str, release: str, attribute: str, kept: dict, depth: int = 0):
    """Whether that release's ``module.cls`` (its API history) or a class of its chain sets the attribute: True,
    False, or None where the chain cannot be followed. A base the history does not define is judged as installed
    (``kept``: base text -> the names its installed chain sets), where the set keeps the package that has it."""
    qualname = f"{module}.{cls}"
    bases = history.bases(qualname, release)
    if bases is None or depth > 20:
        return None
    if attribute in history.assigned_attributes(qualname, release) or history.has(
        module, f"{cls}.{attribute}", release
    ):
        return True
    known = True
    for base in bases:
        if base.startswith(_OPEN_BASES):
            continue
        home = _release_home(history, module, base, release)
        if home is not None:
            sets = _release_sets(history, *home, release, attribute, kept, depth + 1)
        else:
            sets = attribute in kept[base] if base in kept else None
        if sets:
            return True
        known = known and sets is not None
    return False if known else None


def _release_home(history, module: str, name: str, release: str, hops: int = 4) -> tuple[str, str] | None:
    """(module, class) where a class named in ``module`` is defined in that release, through ``from M import name``."""
    if "." in name:
        return None
    for _ in range(hops):
        if history.bases(f"{module}.{name}", release) is not None:
            return module, name
        found = next((i.module for i in history.imports(module, release) if name in i.names), None)
        if found is None:
            return None
        module = found
    return None


def _set_anywhere_in_release(history, attribute: str, release: str) -> bool:
    """Whether any class the release's API history read assigns the attribute on self."""
    at = history.releases.index(history.nearest(release))
    return any(
        any(first <= at <= last for first, last in attributes.get(attribute, ()))
        for attributes in history._data["attributes"].values()
    )


def _kept_bases(install: Install, chain: list[Definition], versions: dict, installed: dict) -> dict[str, set[str]]:
    """The bases of an installed chain that a set keeps as installed (every class of their own chain is of a package
    the set has at its installed release): each one's text -> the names its installed chain sets."""
    from grpo_compat.core.versions import canonicalize_name

    kept = {}
    for definition in chain:
        for base in definition.node.bases:
            found = _resolve_class(install, definition.module, base)
            closed = _closed_chain(install, found) if found is not None else None
            if closed is not None and all(
                versions.get(name) is not None and versions[name] == installed.get(name)
                for name in (canonicalize_name(install.owner(d.module.name)) for d in closed)
            ):
                kept[ast.unparse(base)] = _set_names(closed)
    return kept


def _what_if_finding(install: Install, read: _Read, versions: dict, installed: dict) -> dict[str, str] | None:
    from grpo_compat.core.versions import canonicalize_name
    from grpo_compat.static_check.fixes import VersionsOnly, _history, for_removed_attribute

    def distribution_of(definition: Definition) -> str:
        return canonicalize_name(install.owner(definition.module.name))

    distribution = distribution_of(read.cls)
    release, history = versions.get(distribution), _history(distribution)
    if release is None or release == installed.get(distribution) or history is None:
        return None  # the annotated class's package is not changed (the installed check reads it), or not recorded
    if not history._data.get("attributes") or history.nearest(release) is None:
        return None  # a history without self-assignments cannot say a release does not set it
    if any(distribution_of(d) not in versions for d in read.chain):
        return None
    kept = _kept_bases(install, read.chain, versions, installed)
    if _release_sets(history, read.cls.module.name, read.cls.node.name, release, read.attribute, kept) is not False:
        return None
    removed = _removed_by(install, read.chain, read.attribute, versions)
    if removed is None or canonicalize_name(removed[0]) != distribution:
        return None
    if _set_anywhere_in_release(history, read.attribute, release):
        return None
    _, had, spans, first_without = removed
    chain_files = {d.module.path for d in read.chain}  # the installed chain's own: the release being left sets it there
    tops = {d.module.name.split(".")[0] for d in read.chain}
    if _named_anywhere(install, tops, read.attribute, stores_only=False, skip=chain_files):
        return None  # a class outside the chain (a concrete model) may set it
    if _named_anywhere(install, read.trainer_tops, read.attribute, stores_only=True):
        return None
    owner, message = _said(install, read, removed[0], release, had, spans, first_without)
    fix = for_removed_attribute(VersionsOnly(versions), removed[0], had.node.name, read.attribute, spans, owner)
    where = f"{read.order[read.index].module.relative_path}:{read.line}"
    installed_too = read.attribute not in read.names
    return {"kind": "attribute", "message": message, "where": where, "fix": fix, "installed_too": installed_too}


# -- the what-if of another release of the trainer: its reads as the API history recorded them ------------------------


def release_read_findings(paths: list[str] | None, trainer: str, versions: dict, installed: dict) -> list[dict]:
    """``check --with`` where the set changes the trainer's release: the reads on annotated arguments its API history
    holds (the histories' reader runs this module's reading on each release's files, and keeps a read only where no
    file of that release stores the attribute), each judged against the set's release of the annotated class's
    package (``_release_read_finding``) and the installed set (``paths``: its folders, ``sys.path``)."""
    from grpo_compat.static_check.fixes import _history

    history, release = _history(trainer), versions.get(trainer)
    reads = history.argument_reads(release) if history is not None and release and history.knows(release) else []
    install = Install(paths) if reads else None
    findings, judged = [], set()
    for read in reads:
        if (read.parameter, read.attribute) in judged:
            continue
        for module, name in read.classes:
            trainer_release = (trainer, release, history)
            finding = _release_read_finding(install, trainer_release, read, module, name, versions, installed)
            if finding is not None:
                judged.add((read.parameter, read.attribute))
                findings.append(finding)
                break
    return findings


def _release_read_finding(install, trainer: tuple, read, module: str, name: str, versions: dict, installed: dict):
    """One recorded read of ``name`` (imported from ``module``) judged as ``_what_if_finding`` judges an installed
    read: the class resolves in the installed set to a class of the package the set has, its installed chain is
    closed, and the set's release of that package does not set the attribute while an earlier one had it.

    What stands in for "no file of the chain's packages names it", which needs the set's release's files: where the
    set keeps the package, the installed files are them (the installed check's link, unchanged); where it changes
    it, no class that release's API history read may assign it or have it as a member, and no installed file of
    those packages but the chain's own may name it (the histories do not read transformers/models/*: the installed
    concrete models stand in for the release's). In both, no class of the set's release may assign it on self (its
    history, asked first: it needs no file parsed)."""
    from grpo_compat.core.versions import canonicalize_name
    from grpo_compat.histories import distribution_of_module
    from grpo_compat.static_check.fixes import VersionsOnly, _history, for_removed_attribute

    owner, owner_release, owner_history = trainer
    distribution = canonicalize_name(distribution_of_module(module) or "")
    release, history = versions.get(distribution), _history(distribution)
    if release is None or history is None or not history._data.get("attributes") or history.nearest(release) is None:
        return None
    home = _release_home(history, module, name, release)
    if home is None or _set_anywhere_in_release(history, read.attribute, release):
        return None  # the history first (no file parsed): a class of that release assigns it
    cls = resolve(install, module, name)
    if cls is None or not isinstance(cls.node, ast.ClassDef) or cls.node.name != name:
        return None
    chain = _closed_chain(install, cls)
    distributions = None if chain is None else [canonicalize_name(install.owner(d.module.name)) for d in chain]
    if chain is None or distributions[0] != distribution or any(d not in versions for d in distributions):
        return None
    attribute, skip = read.attribute, set()
    if release == installed.get(distribution):
        if attribute in _set_names(chain):
            return None
    else:
        kept = _kept_bases(install, chain, versions, installed)
        if _release_sets(history, *home, release, attribute, kept) is not False:
            return None
        if _member_anywhere_in_release(history, attribute, release):
            return None
        skip = {d.module.path for d in chain}  # the installed chain's own: the release being left may set it there
    removed = _removed_by(install, chain, attribute, versions)
    if removed is None or canonicalize_name(removed[0]) != distribution:
        return None
    if _named_anywhere(install, {d.module.name.split(".")[0] for d in chain}, attribute, False, skip=skip):
        return None
    _, had, spans, first_without = removed
    path = _release_path(owner_history, read.qualname.rpartition(".")[0], owner_release)
    where = f"{path}:{read.line}"
    reader = (f"{owner} {owner_release}", read.qualname.rpartition(".")[2], where)
    message = _message(reader, read.parameter, attribute, name, (removed[0], release), had, spans, first_without)
    fix = for_removed_attribute(VersionsOnly(versions), removed[0], had.node.name, attribute, spans, owner)
    already = installed.get(owner) and any(
        r.parameter == read.parameter and r.attribute == attribute
        for r in owner_history.argument_reads(installed[owner])
    )
    installed_too = bool(already) and attribute not in _set_names(chain)
    return {"kind": "attribute", "message": message, "where": where, "fix": fix, "installed_too": installed_too}


def _member_anywhere_in_release(history, attribute: str, release: str) -> bool:
    """Whether any class the release's API history read has the attribute as a member (a class attribute, a method
    or a property)."""
    suffix = f".{attribute}"
    for module in history.modules(release):
        names = history._data["names"].get(module, ())
        if any(name.endswith(suffix) and history.has(module, name, release) for name in names):
            return True
    return False


def _release_path(history, module: str, release: str) -> str:
    """A module's file in a release, as the installed check names it (``trl/trainer/grpo_trainer.py``)."""
    package = any(m.startswith(module + ".") for m in history.modules(release))
    return module.replace(".", "/") + ("/__init__.py" if package else ".py")
