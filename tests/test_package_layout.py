"""The package stands alone: it imports nothing from a checkout, its modules import each other in no circle (at
any depth, function-local imports included), and its layers point one way: the command line (tools/) is
imported by nothing but itself."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "grpo_compat"
PATCHES = REPO / "patches"  # ships as grpo_compat.patches


def module_name(path: Path) -> str:
    if path.is_relative_to(PATCHES):
        parts = ("grpo_compat", "patches", *path.relative_to(PATCHES).with_suffix("").parts)
    else:
        parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules() -> dict[str, Path]:
    return {module_name(path): path for folder in (PACKAGE, PATCHES) for path in folder.rglob("*.py")}


def imports(path: Path, everywhere: bool) -> set[str]:
    """The modules a file imports at module level (``everywhere``: inside functions too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = ast.walk(tree) if everywhere else iter(tree.body)
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def test_the_package_imports_nothing_from_a_checkout():
    offenders = {
        module_name(path): sorted(name for name in imports(path, everywhere=True) if name.split(".")[0] == "matrix")
        for path in PACKAGE.rglob("*.py")
    }
    assert {name: found for name, found in offenders.items() if found} == {}


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports, at module level or inside a function."""
    modules = package_modules()
    return {
        name: {target for target in imports(path, everywhere=True) if target in modules and target != name}
        for name, path in modules.items()
    }


def test_the_packages_modules_import_each_other_in_no_circle():
    graph = import_graph()
    visiting: list[str] = []
    done: set[str] = set()

    def visit(name: str) -> None:
        assert name not in visiting, "import circle: " + " -> ".join([*visiting[visiting.index(name) :], name])
        if name in done:
            return
        visiting.append(name)
        for target in sorted(graph[name]):
            visit(target)
        visiting.pop()
        done.add(name)

    for name in sorted(graph):
        visit(name)


def test_the_layout_test_sees_function_local_imports():
    graph = import_graph()
    # grpo_compat/__init__.py imports the engine only inside a function (on first use).
    assert "grpo_compat.core.engine" in graph["grpo_compat"]
    assert "grpo_compat.fixes.swift_settings" in graph["grpo_compat.patches.swift.grpo_arguments_check"]


def is_command_line(module: str) -> bool:
    return module.startswith("grpo_compat.tools") or module.endswith((".__main__", ".cli"))


def test_only_the_command_line_imports_the_command_line():
    # tools/ is the grpo-compat command: runtime logic (patches, fixes, core, the plugin, the startup hook, the
    # matrix runner) lives below it and never reaches back up, even inside a function. The other command lines
    # (python -m grpo_compat, `grpo-compat matrix`'s parser) may use it.
    reaching_up = {
        name: sorted(target for target in targets if target.startswith("grpo_compat.tools"))
        for name, targets in import_graph().items()
        if not is_command_line(name)
    }
    assert {name: found for name, found in reaching_up.items() if found} == {}


def test_the_engine_and_the_fixes_import_nothing_above_them():
    # core/ is the engine (it loads the patch modules by name, never by import statement), fixes/ the logic the
    # patches call: neither reaches up to the catalogue, the plugin, the startup hook, the matrix or the commands.
    allowed = {
        "grpo_compat.core": ("grpo_compat.core", "grpo_compat.patches", "grpo_compat.patch_index"),
        "grpo_compat.fixes": ("grpo_compat.core", "grpo_compat.fixes"),
    }
    reaching_up = {
        name: sorted(target for target in targets if not target.startswith(allowed[layer]))
        for name, targets in import_graph().items()
        for layer in allowed
        if name == layer or name.startswith(layer + ".")
    }
    assert {name: found for name, found in reaching_up.items() if found} == {}


def test_the_repositorys_matrix_scripts_share_no_module_name_with_the_packages_matrix_runner():
    # matrix/ holds this repository's cells, plan and scripts (data the runner runs); grpo_compat/matrix is the runner.
    scripts = {path.stem for path in (REPO / "matrix").glob("*.py")} - {"__init__"}
    runner = {path.stem for path in (PACKAGE / "matrix").glob("*.py")} - {"__init__"}
    assert scripts & runner == set()
    assert not (REPO / "matrix" / "__main__.py").exists(), "python -m matrix.repository matrix is the entry point"


def test_every_package_folder_is_listed_for_the_wheel():
    """pyproject.toml lists packages by hand: a new folder left out is missing from the wheel (and apply() with it)."""
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = {module_name(path) for folder in (PACKAGE, PATCHES) for path in folder.rglob("__init__.py")}
    assert folders - listed == set()
