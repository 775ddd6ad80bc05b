"""The settings a release of trl or ms-swift takes, read from its source files by AST (nothing is imported).

A *source* is a released wheel (a zip) or an installed package's folder; both read alike, so the data the
generator (``matrix/settings_history.py``) writes from the wheels is checked against the installed release.
Fields are the dataclass fields of the named classes and of every base class defined in the same package,
in dataclass order (bases first, a subclass's field overriding its base's); bases from another package
(transformers' ``TrainingArguments``) are named, not read: the installed one is read at run time.
"""

from __future__ import annotations

import ast
import os
import re
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

NO_DEFAULT = "<required>"
DEPRECATED = re.compile(r"\bdeprecated\b", re.IGNORECASE)
_TYPING_ALIASES = {"List": "list", "Dict": "dict", "Tuple": "tuple", "Set": "set", "Type": "type"}


class Source:
    """The ``.py`` files of one top-level package (``trl``, ``swift``), from a wheel, an sdist or a folder holding it.

    ``include`` (a path -> bool) limits which files are read (a big sdist's modules the stack reaches);
    ``metadata`` is the release's own core metadata text (a wheel's METADATA, an sdist's PKG-INFO), None for a
    folder.
    """

    def __init__(self, location: Path, package: str, include: Callable[[str], bool] | None = None) -> None:
        self.package = package
        self._texts: dict[str, str | None] = {}  # read when first asked for
        self.metadata: str | None = None
        wanted = include or (lambda _path: True)
        self._wheel = zipfile.ZipFile(location) if zipfile.is_zipfile(location) else None
        if self._wheel is not None:
            listed = self._wheel.namelist()
            names = [n for n in listed if n.startswith(f"{package}/") and n.endswith(".py") and wanted(n)]
            meta = next((n for n in listed if n.endswith(".dist-info/METADATA") and n.count("/") == 1), None)
            self.metadata = self._wheel.read(meta).decode("utf-8", errors="replace") if meta else None
        elif str(location).endswith((".tar.gz", ".tgz")):
            names = self._read_sdist(Path(location), wanted)
        else:
            self._root = Path(location)
            names = [n for n in _python_files(str(self._root), package) if wanted(n)]
        self._texts.update((n, self._texts.get(n)) for n in names)
        if not self._texts:
            raise FileNotFoundError(f"no {package}/*.py in {location}")
        self._trees: dict[str, ast.Module] = {}
        self._imports: dict[str, dict[str, list[tuple[str, str]]]] = {}
        self._defining: dict[str, list[str]] = {}

    def _read_sdist(self, location: Path, wanted: Callable[[str], bool]) -> list[str]:
        """An sdist's files under ``<name>-<version>/``, read in one pass (a gzip stream has no index)."""
        with tarfile.open(location, "r:gz") as archive:
            for member in archive:
                inside = member.name.split("/", 1)[1] if "/" in member.name else ""
                is_source = inside.startswith(f"{self.package}/") and inside.endswith(".py") and wanted(inside)
                if member.isfile() and (is_source or inside == "PKG-INFO"):
                    text = archive.extractfile(member).read().decode("utf-8", errors="replace")
                    if is_source:
                        self._texts[inside] = text
                    else:
                        self.metadata = text
        return list(self._texts)

    @property
    def paths(self) -> list[str]:
        return list(self._texts)

    def text(self, path: str) -> str:
        if self._texts[path] is None:
            data = self._wheel.read(path) if self._wheel is not None else (self._root / path).read_bytes()
            self._texts[path] = data.decode("utf-8", errors="replace")
        return self._texts[path]

    def tree(self, path: str) -> ast.Module | None:
        if path not in self._texts:
            return None
        if path not in self._trees:
            self._trees[path] = ast.parse(self.text(path))
        return self._trees[path]

    def imported(self, path: str) -> dict[str, list[tuple[str, str]]]:
        """A module's ``from m import x [as y]`` anywhere in it (TYPE_CHECKING / try blocks too): y -> [(m, x)]."""
        if path not in self._imports:
            found: dict[str, list[tuple[str, str]]] = {}
            tree = self.tree(path)
            for node in ast.walk(tree) if tree else ():
                if isinstance(node, ast.ImportFrom):
                    module = _absolute(path, node)
                    for alias in node.names:
                        found.setdefault(alias.asname or alias.name, []).append((module, alias.name))
            self._imports[path] = found
        return self._imports[path]

    def module_path(self, module: str) -> str | None:
        """``trl.trainer.grpo_config`` -> ``trl/trainer/grpo_config.py`` (or its package's ``__init__.py``)."""
        base = module.replace(".", "/")
        return next((p for p in (f"{base}.py", f"{base}/__init__.py") if p in self._texts), None)

    def defining(self, name: str) -> list[str]:
        """Files that define a class of this name, the likeliest first (outside experimental / megatron code)."""
        if name not in self._defining:
            pattern = re.compile(rf"^class {re.escape(name)}\b", re.MULTILINE)
            found = [p for p in self._texts if f"class {name}" in self.text(p) and pattern.search(self.text(p))]
            aside = ("experimental", "megatron")
            self._defining[name] = sorted(found, key=lambda p: (any(w in p for w in aside), len(p), p))
        return self._defining[name]


@dataclass(frozen=True)
class ClassRef:
    path: str
    node: ast.ClassDef


def _absolute(path: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    parts = path[: -len(".py")].split("/")
    parts = parts[: len(parts) - node.level]  # a module's own folder is level 1 (its __init__ the same)
    return ".".join([*parts, *([node.module] if node.module else [])])


def find_class(source: Source, path: str, name: str, seen: frozenset = frozenset()) -> ClassRef | None:
    """A class as module ``path`` sees the name: defined there, or imported from within the package."""
    if (path, name) in seen:
        return None
    tree = source.tree(path)
    if tree is None:
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return ClassRef(path, node)
    for module, original in source.imported(path).get(name, ()):  # `if TYPE_CHECKING:` / try blocks count too
        if module.split(".")[0] != source.package:
            return None  # another package's class (transformers): named, not read
        target = source.module_path(module)
        if target is not None:
            found = find_class(source, target, original, seen | {(path, name)})
            if found:
                return found
    return None


def find_class_anywhere(source: Source, name: str, near: str | None = None) -> ClassRef | None:
    found = find_class(source, near, name) if near else None
    if found:
        return found
    for path in source.defining(name):  # lazy imports (trl's __init__) hide where a name comes from
        found = find_class(source, path, name)
        if found:
            return found
    return None


def _base_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def linearise(source: Source, ref: ClassRef, external: set[str], within: frozenset = frozenset()) -> list[ClassRef]:
    """The class and its package-local bases in method resolution order (C3); other bases go to ``external``.

    ``within``: the classes being linearised below which this one sits (a base resolving to one of them is
    named, not followed: Python would refuse such a class, and the reader must not loop on it).
    """
    within = within | {id(ref.node)}
    bases = []
    for base in ref.node.bases:
        name = _base_name(base)
        if name is None or name in ("object", "Generic"):
            continue
        found = find_class(source, ref.path, name)
        if found is not None and found.node is ref.node:  # `class X(X)`: the base is the X its module imports
            found = _imported_class(source, ref.path, name)
        elif found is None and not _imported_from_elsewhere(source, ref.path, name):
            found = find_class_anywhere(source, name)
        if found is None or id(found.node) in within:
            external.add(name)
        else:
            bases.append(found)
    sequences = [linearise(source, base, external, within) for base in bases] + [bases]
    order = [ref]
    while any(sequences):
        for sequence in sequences:
            head = sequence[0] if sequence else None
            if head is not None and not any(head in s[1:] for s in sequences):
                break
        else:  # not linearisable: keep declaration order (Python itself would refuse the class)
            head = next(s[0] for s in sequences if s)
        order.append(head)
        sequences = [[c for c in s if c != head] for s in sequences]
    return order


def _imported_class(source: Source, path: str, name: str) -> ClassRef | None:
    for module, original in source.imported(path).get(name, ()):
        target = source.module_path(module) if module.split(".")[0] == source.package else None
        found = find_class(source, target, original) if target else None
        if found is not None:
            return found
    return None


def _imported_from_elsewhere(source: Source, path: str, name: str) -> bool:
    imported = source.imported(path).get(name)
    return bool(imported) and imported[0][0].split(".")[0] != source.package


def _is_dataclass(node: ast.ClassDef) -> bool:
    return any("dataclass" in ast.unparse(d) for d in node.decorator_list)


class _TypeText(ast.NodeTransformer):
    """``Optional[List[int]]`` and ``list[int] | None`` read the same: a type is compared across releases."""

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        node = self.generic_visit(node)
        name = _base_name(node.value)
        args = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
        if name == "Optional":
            return ast.BinOp(args[0], ast.BitOr(), ast.Constant(None))
        if name == "Union":
            result = args[0]
            for arg in args[1:]:
                result = ast.BinOp(result, ast.BitOr(), arg)
            return result
        if name in _TYPING_ALIASES:
            node.value = ast.Name(_TYPING_ALIASES[name])
        return node

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.Name(_TYPING_ALIASES.get(node.id, node.id))


def type_text(annotation: ast.expr) -> str:
    text = ast.unparse(_TypeText().visit(ast.parse(ast.unparse(annotation), mode="eval").body))
    return text.replace("'", "").replace('"', "")


def _literal(node: ast.expr) -> object:
    """A default as JSON holds it; an expression that is no literal as ``{"expr": source}``."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return {"expr": ast.unparse(node)}
    if isinstance(value, tuple | set | frozenset):
        value = list(value)
    if isinstance(value, float) and value != value:  # NaN has no JSON form
        return {"expr": "nan"}
    if isinstance(value, dict | list) and not _json_safe(value):
        return {"expr": ast.unparse(node)}
    return value


def _json_safe(value: object) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_safe(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_json_safe(v) for v in value)
    return value is None or isinstance(value, bool | int | float | str)


def _field_of(node: ast.AnnAssign) -> dict | None:
    annotation = ast.unparse(node.annotation)
    if "ClassVar" in annotation or not isinstance(node.target, ast.Name):
        return None
    default: object = NO_DEFAULT
    help_text = ""
    value = node.value
    if isinstance(value, ast.Call) and _base_name(value.func) == "field":
        for keyword in value.keywords:
            if keyword.arg == "default":
                default = _literal(keyword.value)
            elif keyword.arg == "default_factory":
                factory = keyword.value
                body = factory.body if isinstance(factory, ast.Lambda) else None
                default = _literal(body) if body is not None else {"expr": f"{ast.unparse(factory)}()"}
            elif keyword.arg == "metadata" and isinstance(keyword.value, ast.Dict):
                for key, item in zip(keyword.value.keys, keyword.value.values, strict=False):
                    if isinstance(key, ast.Constant) and key.value == "help":
                        text = _literal(item)
                        help_text = text if isinstance(text, str) else ""
            elif keyword.arg == "init" and isinstance(keyword.value, ast.Constant) and keyword.value.value is False:
                return None  # not a constructor argument
    elif value is not None:
        default = _literal(value)
    entry: dict = {"type": type_text(node.annotation), "default": default}
    if DEPRECATED.search(help_text):
        entry["deprecated"] = " ".join(help_text.split())[:240]
    return entry


def dataclass_fields(source: Source, ref: ClassRef) -> tuple[dict[str, dict], list[str]]:
    """Every dataclass field of a class (its package-local bases included) and the bases read elsewhere."""
    external: set[str] = set()
    order = linearise(source, ref, external)
    fields: dict[str, dict] = {}
    for cls in reversed(order):
        if not _is_dataclass(cls.node):
            continue
        for node in cls.node.body:
            if isinstance(node, ast.AnnAssign):
                entry = _field_of(node)
                if entry is not None:
                    fields[node.target.id] = {**entry, "of": ref.node.name}
    return fields, sorted(external)


def trl_cli_classes(source: Source) -> list[str]:
    """The dataclasses ``trl grpo --config`` fills (its TrlParser's types), GRPOConfig first."""
    tree = source.tree("trl/scripts/grpo.py")
    names: list[str] = []
    for node in ast.walk(tree) if tree else ():
        if isinstance(node, ast.Tuple) and any(isinstance(e, ast.Name) and e.id == "GRPOConfig" for e in node.elts):
            names = [e.id for e in node.elts if isinstance(e, ast.Name)]
            break
    return ["GRPOConfig", *[n for n in names if n != "GRPOConfig"]]


def settings_of(source: Source, class_names: list[str], near: str | None = None) -> dict:
    """``{"settings": {name: field}, "external_bases": [...]}`` of the classes; the first class wins a name."""
    settings: dict[str, dict] = {}
    external: set[str] = set()
    for name in class_names:
        ref = find_class_anywhere(source, name, near)
        if ref is None:
            continue
        fields, bases = dataclass_fields(source, ref)
        for key, entry in fields.items():
            settings.setdefault(key, {**entry, "of": name})
        external.update(bases)
    return {"settings": settings, "external_bases": sorted(external)}


# What each library's data reads: the classes, where the first is found, and how the CLI names them.
TRL_CONFIG = "trl/trainer/grpo_config.py"
SWIFT_ARGUMENT_MODULES = ("swift/arguments/rlhf_args.py", "swift/llm/argument/rlhf_args.py")


def trl_release_settings(location: Path) -> dict:
    source = Source(location, "trl")
    return settings_of(source, trl_cli_classes(source), near=TRL_CONFIG)


def swift_release_settings(location: Path) -> dict:
    source = Source(location, "swift")
    near = next((p for p in SWIFT_ARGUMENT_MODULES if source.tree(p) is not None), None)
    return settings_of(source, ["RLHFArguments"], near=near)


READERS = {"trl": trl_release_settings, "ms-swift": swift_release_settings}


def _python_files(root: str, package: str) -> list[str]:
    """``package/**/*.py`` under ``root``, relative and with ``/``, in ``Path.rglob``'s order (folders depth first,
    as listed): os.walk with strings, a third of rglob's time on transformers' 2,900 files."""
    names = []
    for folder, _folders, files in os.walk(os.path.join(root, package)):
        relative = os.path.relpath(folder, root).replace(os.sep, "/")
        names += [f"{relative}/{name}" for name in files if name.endswith(".py")]
    return names
