"""What the installed set's compiled parts make of the trainer (the static check, grpo_compat.static_check):

- ``build``: a torchvision / torchaudio built for another torch than the installed one (a CUDA torchvision beside a
  CPU torch, or one pinned to another torch release): importing it fails ("operator torchvision::nms does not
  exist"), and transformers imports it when it is installed, so the GRPO trainer's import fails;
- ``kernel``: an optional compiled kernel a release needs without declaring it: a module-level
  ``try: from .kernels import f except ImportError: f = None`` whose import fails here (Triton, which ships with
  PyTorch's CUDA builds only, missing), then ``f(...)`` / ``f.apply(...)`` with no test of ``f`` in a function the
  trainer calls unconditionally (trl 1.15.0 on a CPU torch: the first step calls ``None.apply``; 1.16 trains).
"""

from __future__ import annotations

import ast
import platform
import sys
from collections.abc import Iterator

from grpo_compat.core.versions import is_cuda_build, is_cuda_torch
from grpo_compat.static_check.files import Finding, Install, Module, catches_import_error, walk
from grpo_compat.static_check.guards import guard_holds

TORCH_COMPANIONS = ("torchvision", "torchaudio")


def build_findings(install: Install) -> list[Finding]:
    torch = install.version("torch")
    if not torch or not install.version("transformers") or not any(install.version(n) for n in TORCH_COMPANIONS):
        return []
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version

    torch_cuda = is_cuda_torch(torch, install.version)
    # An untagged torchvision / torchaudio wheel for x86-64 Linux is PyPI's, a CUDA build.
    pypi_is_cuda = sys.platform == "linux" and platform.machine() in ("x86_64", "AMD64")
    findings = []
    for name in TORCH_COMPANIONS:
        have = install.version(name)
        if not have:
            continue
        why = None
        for text in install.requires(name):
            try:
                requirement = Requirement(text)
            except InvalidRequirement:
                continue
            pins = [s.version for s in requirement.specifier if s.operator == "==" and requirement.name == "torch"]
            try:
                if pins and Version(pins[0]).release != Version(torch.partition("+")[0]).release:
                    why = f"it is built for torch {pins[0]}"
            except InvalidVersion:
                continue
        if why is None and not torch_cuda and is_cuda_build(have, pypi_is_cuda):
            why = "it is a CUDA build and torch is a CPU build"
        if why is None:
            continue
        needed = [d for d in install.distributions if d != name and _requires(install, d, name)]
        fix = (
            f"install the {name} build made for torch {torch} (from the index torch came from)"
            if needed
            else f"pip uninstall -y {name} (the GRPO trainer does not need it; transformers imports it when present)"
        )
        transformers = f"transformers {install.version('transformers')}"
        message = (
            f'{name} {have} does not match torch {torch}: {why}, so importing it fails ("operator '
            f'torchvision::nms does not exist" or an undefined symbol), and {transformers} imports it when it is '
            "installed: the GRPO trainer's import fails"
        )
        info = install.distributions[name][2]
        where = f"{info.rsplit('/', 1)[-1]}/METADATA"
        findings.append(Finding("build", message, where, f"{name} {have}", f"torch {torch}", fix))
    return findings


def _requires(install: Install, distribution: str, name: str) -> bool:
    import re

    for text in install.requires(distribution):
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", text)
        if match and match.group(1).lower() == name and "extra" not in text:
            return True
    return False


# -- optional compiled kernels ------------------------------------------------------------------------------------


def kernel_findings(install: Install, walked: dict[str, Module], trainer_module: str) -> list[Finding]:
    """``f = None`` where the kernel's import fails here, then ``f`` called untested on the trainer's path."""
    trainer = walked.get(trainer_module)
    if trainer is None:
        return []
    findings = []
    for module in walked.values():
        for name, record_module, line, imported in _none_fallbacks(module):
            if not _import_fails(install, record_module, {module.name.split(".")[0]}):
                continue
            for function_name, use in _untested_uses(module, name):
                if not _called_by_trainer(trainer, module, function_name):
                    continue
                owner = install.owner(module.name)
                version = f"{owner} {install.version(owner)}"
                message = (
                    f"{version} sets {name} = None when {record_module} cannot import ({module.relative_path}:{line}; "
                    f"here it cannot: {_missing_here(install, record_module, {module.name.split('.')[0]})} is not "
                    f"installed), then calls it in {function_name}() with no test of it ({module.relative_path}:"
                    f"{use}), which the GRPO trainer runs: the first training step fails on None"
                )
                fix = _kernel_fix(install, owner, module.name, imported)
                findings.append(
                    Finding(
                        "kernel",
                        message,
                        f"{module.relative_path}:{use}",
                        version,
                        f"{_missing_here(install, record_module, set())} not installed",
                        fix,
                    )
                )
                break
    return findings


def _none_fallbacks(module: Module) -> list[tuple[str, str, int, str]]:
    """(name, the module it is imported from, line, the name imported) for ``try: from m import x as name``
    ``except ImportError: name = None`` at module level."""
    found = []
    package = module.name if module.path.endswith("__init__.py") else module.name.rpartition(".")[0]
    for node in module.statements:
        if not isinstance(node, ast.Try) or not any(catches_import_error(h) for h in node.handlers):
            continue
        nulled = {
            target.id
            for handler in node.handlers
            for statement in handler.body
            if isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Constant)
            and statement.value.value is None
            for target in statement.targets if isinstance(target, ast.Name)
        }  # fmt: skip
        for statement in node.body:
            if isinstance(statement, ast.ImportFrom):
                from grpo_compat.static_check.files import _absolute

                source = _absolute(statement, package)
                for alias in statement.names:
                    if (alias.asname or alias.name) in nulled:
                        found.append((alias.asname or alias.name, source, statement.lineno, alias.name))
    return found


def _missing_here(install: Install, name: str, tops: set[str]) -> str | None:
    """The first top-level module that importing ``name`` needs and this install lacks (following the modules of
    its own distribution, ``tops``, through the imports that run here)."""
    return next(unreachable_imports(install, name, tops), None)


def unreachable_imports(install, name: str, tops: set[str], holds=guard_holds, depth: int = 0) -> Iterator[str]:
    """Each top-level module that importing ``name`` imports and ``install.find`` does not find, in import order,
    following the modules of its own distribution (``tops``) through the imports whose guards ``holds``. On an
    install: what is missing here; on a release's files (grpo_compat.histories.reader): every other distribution's
    module it needs."""
    if depth > 4:
        return
    module = install.module(name)
    if module is None:
        if install.find(name.split(".")[0]) is None:
            yield name.split(".")[0]
        return
    for record in module.imports:
        if not holds(install, record.guards, module):
            continue
        top = record.module.split(".")[0]
        if top in sys.stdlib_module_names or top == "__future__":
            continue
        if install.find(top) is None:
            yield top
            continue
        if top in tops:
            for target in [record.module] + [f"{record.module}.{n}" for n, _ in record.names]:
                if install.find(target) and target != name:
                    yield from unreachable_imports(install, target, tops, holds, depth + 1)


def _import_fails(install: Install, name: str, tops: set[str]) -> bool:
    return _missing_here(install, name, tops) is not None


def _untested_uses(module: Module, name: str) -> list[tuple[str, int]]:
    """(top-level function, line) of each call of ``name`` (``name(...)``, ``name.attr(...)``) that no test of
    ``name`` (``if name is not None``, ``if name``) or ``try`` guards."""
    uses = []
    for function in module.functions.values():
        for line in _calls_untested(function.body, name):
            uses.append((function.name, line))
            break
    return uses


def _calls_untested(body: list, name: str) -> list[int]:
    lines: list[int] = []
    for statement in body:
        _untested_calls_under(statement, name, lines)
    return lines


def _mentions_name(node, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in walk(node))


def _untested_calls_under(node, name: str, lines: list[int]) -> None:
    # module-level, not nested: a nested function that calls itself is a reference cycle (Install.drop_sources)
    if isinstance(node, ast.If | ast.IfExp | ast.While) and _mentions_name(node.test, name):
        return
    if isinstance(node, ast.BoolOp) and any(_mentions_name(v, name) for v in node.values[:-1]):
        return
    if isinstance(node, ast.Try):
        return
    if isinstance(node, ast.Call):
        func = node.func.value if isinstance(node.func, ast.Attribute) else node.func
        if isinstance(func, ast.Name) and func.id == name:
            lines.append(node.lineno)
    for child in ast.iter_child_nodes(node):
        _untested_calls_under(child, name, lines)


def _called_by_trainer(trainer: Module, module: Module, function_name: str) -> bool:
    """The trainer module imports ``function_name`` from ``module`` and a method of one of its classes calls it as a
    statement of the method's own body (not under a test, a loop or a try)."""
    imported = any(
        record.module == module.name and any(name == function_name and bound == function_name
                                             for name, bound in record.names)
        for record in trainer.imports
    )  # fmt: skip
    if not imported:
        return False
    for cls in trainer.classes.values():
        for method in cls.body:
            if not isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for statement in method.body:
                if (
                    isinstance(statement, ast.Expr)
                    and isinstance(statement.value, ast.Call)
                    and isinstance(statement.value.func, ast.Name)
                    and statement.value.func.id == function_name
                ):
                    return True
    return False


def _kernel_fix(install: Install, owner: str, module: str, name: str) -> str:
    """The first release of ``owner`` after the installed one whose module imports ``name`` unguarded (it no
    longer needs the kernel to import), from the histories; else what to look for."""
    import grpo_compat.static_check.fixes as fixes

    history = fixes._history(owner)
    if history is not None:
        for release in fixes._newer(history, install.version(owner)):
            imports = history.imports(module, release) or []
            if any(name in i.names and not (i.guard or "") for i in imports):
                return f"pip install '{owner}>={release}'"
    return f"install a {owner} release that imports {name} without the kernel, or the kernel's package (Triton)"
