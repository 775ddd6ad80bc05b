"""The walk over the module-level imports that loading trl's / ms-swift's GRPO trainer reaches (the static check's
``missing-module`` and ``missing-name`` findings; grpo_compat.static_check)."""

from __future__ import annotations

import re
import sys

from grpo_compat.core.versions import folder_name
from grpo_compat.static_check.files import Finding, Import, Install, Module, holds_word, walk
from grpo_compat.static_check.guards import evaluator, guard_holds

# The entry points: what `from trl import GRPOTrainer, GRPOConfig` and ms-swift's trainer import.
ENTRIES = {
    "trl": ("trl", "trl.trainer", "trl.trainer.grpo_trainer", "trl.trainer.grpo_config"),
    "ms-swift": ("swift", "swift.rlhf_trainers.grpo_trainer", "swift.trainers.rlhf_trainer.grpo_trainer"),
}


def trainers_in_use(install: Install) -> tuple[str, ...]:
    """Whose GRPO trainer the check walks: ms-swift's where it is installed (trl is then its dependency, and ms-swift's
    trainer reaches the parts of trl it uses; trl's own GRPOTrainer may not import there and still nobody meets it:
    cell swift-4.6-trl0.26 trains although `from trl import GRPOTrainer` fails there on weave), else trl's."""
    return ("ms-swift",) if install.version("ms-swift") else ("trl",)


class ImportWalk:
    """Walks the modules of trl (of ms-swift) from their entry points; ``findings`` and ``walked`` after run()."""

    def __init__(self, install: Install) -> None:
        self.install = install
        self.findings: list[Finding] = []
        self.walked: dict[str, Module] = {}

    def run(self) -> None:
        for distribution in trainers_in_use(self.install):
            entries = ENTRIES[distribution]
            if self.install.version(distribution) is None:
                continue
            for entry in entries:
                if self.install.find(entry):
                    self._walk(entry, {entries[0]}, distribution)

    def _walk(self, name: str, tops: set[str], distribution: str, depth: int = 0) -> None:
        """Depth first in statement order, as Python runs the imports: the findings come in the order the import
        meets them (the first one is what fails)."""
        if name in self.walked or depth > 200:
            return
        parts = name.split(".")
        for parent in (".".join(parts[:i]) for i in range(1, len(parts))):  # a package runs before its submodule
            self._walk(parent, tops, distribution, depth + 1)
        module = self.install.module(name)
        if module is None or name in self.walked:
            return
        self.walked[name] = module
        for record in sorted(module.imports, key=lambda r: r.line):
            if not guard_holds(self.install, record.guards, module):
                continue
            for lead in self._resolve_import(module, record, tops, distribution):
                self._walk(lead, tops, distribution, depth + 1)

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
            requirements = install.requires(distribution)
            declared = any(_requirement_name(r) == folder_name(owner) for r in requirements)
            extras = _extras_declaring(requirements, owner)
            why = (
                "declares it but it is not installed" if declared
                else f"declares it only in the extra{'s' if len(extras) > 1 else ''} "
                     f"{', '.join(f'[{e}]' for e in extras)}" if extras
                else "does not declare it as a dependency"
            )  # fmt: skip
            message = (
                f"{distribution} {version} imports {missing} when its GRPO trainer loads, and {distribution} {why}: "
                f"No module named '{missing}'"
            )
            finding = Finding("missing-module", message, where, f"{distribution} {version}",
                              f"{owner} not installed", _leaf_fix(install, owner))  # fmt: skip
            finding.cause = self._always_true_guard(module, record)
            self.findings.append(finding)
            return
        other = f"{owner} {install.version(owner)}"
        message = (
            f"{distribution} {version} imports {missing}, which {other} does not have: No module named '{missing}'"
        )
        fix = _fix_for_name(install, distribution, module.name, owner, missing, None)
        self.findings.append(Finding("missing-module", message, where, f"{distribution} {version}", other, fix))

    def _always_true_guard(self, module: Module, record: Import) -> tuple:
        """("always-true", probe's module, probe, guard) where the import runs only because an availability check
        is true without its package (a probe that returns a tuple); () otherwise."""
        import ast

        reader = evaluator(self.install)
        for kind, test, branch in record.guards:
            if kind != "if" or not branch:
                continue
            reader.always_true = []
            reader.value(module, test)
            for home, probe, _package in reader.always_true:
                return ("always-true", home, probe, ast.unparse(test))
        return ()

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


def _extras_declaring(requirements: list[str], owner: str) -> list[str]:
    """The extras of a distribution whose requirements name ``owner`` (trl declares vllm in its [vllm] extra)."""
    extras = []
    for text in requirements:
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", text)
        extra = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", text)
        if match and extra and folder_name(match.group(1)) == folder_name(owner):
            extras.append(extra.group(1))
    return list(dict.fromkeys(extras))


def _requirement_name(text: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", text)
    extra = re.search(r"extra\s*==", text)
    return "" if match is None or extra else folder_name(match.group(1))


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
    at = text.find(name)
    while at != -1:  # each line that holds the name: str.find, not a MULTILINE regex over 300 kB
        begin, finish = text.rfind("\n", 0, at) + 1, text.find("\n", at)
        line = text[begin : finish if finish != -1 else len(text)].strip()
        if holds_word(line, name) and _binds(line, name):
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

    if "meta_path" not in module.text and module.text.isascii():  # (an identifier is NFKC-normalised)
        return False  # not written: the whole tree (every definition parsed) is not needed
    return any(isinstance(n, ast.Attribute) and n.attr == "meta_path" for n in walk(module.tree))


def _defines(install: Install, module: Module, name: str, depth: int = 0) -> bool | str | None:
    """True: ``module`` binds ``name``; a str: the submodule a lazy structure takes it from; None: cannot tell;
    False: it certainly does not."""
    if name in module.lazy:  # before its bindings: a lazy __init__ binds its names under TYPE_CHECKING only
        return f"{module.name}.{module.lazy[name]}"
    if name in module.bound:
        return True
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


def _leaf_fix(install: Install, owner: str) -> str:
    import grpo_compat.static_check.fixes as fixes

    return fixes.leaf_install(install, owner)


def _fix_for_name(install: Install, distribution: str, importer: str, owner: str, target: str, name: str | None) -> str:
    """A pin range read from the histories: the releases of ``owner`` that have ``target``(.``name``), or the
    releases of ``distribution`` that no longer import it; without histories for them, what to look for."""
    import grpo_compat.static_check.fixes as fixes

    return fixes.for_missing(install, distribution, importer, owner, target, name)
