"""The package stands alone: it imports nothing from a checkout, and its modules import each other in no circle."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "grpo_compat"


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


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


def test_the_packages_modules_import_each_other_in_no_circle():
    modules = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph = {
        name: {target for target in imports(path, everywhere=False) if target in modules and target != name}
        for name, path in modules.items()
    }
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


def test_the_repositorys_matrix_scripts_share_no_module_name_with_the_packages_matrix_runner():
    # matrix/ holds this repository's cells, plan and scripts (data the runner runs); grpo_compat/matrix is the runner.
    scripts = {path.stem for path in (REPO / "matrix").glob("*.py")} - {"__init__"}
    runner = {path.stem for path in (PACKAGE / "matrix").glob("*.py")} - {"__init__"}
    assert scripts & runner == set()
    assert not (REPO / "matrix" / "__main__.py").exists(), "python -m matrix.repository matrix is the entry point"
