"""The package's imports read with ``ast``, for the tests of its import graph and its floors.

Every ``import`` and ``from ... import`` anywhere in a module counts, late imports inside
functions included, because a late import only hides a dependency from the interpreter, not from
the reader. Imports under ``if TYPE_CHECKING:`` do not count: they never run. An edge to a
package is an edge to its ``__init__`` module only; ``from pkg import name`` where ``name`` is a
submodule is an edge to that submodule as well.
"""
from __future__ import annotations

import ast
from pathlib import Path

LIB = Path(__file__).resolve().parents[2] / "lib"
PACKAGE = "stackbook"


def module_files(lib: Path = LIB, package: str = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    modules: dict[str, Path] = {}
    for path in sorted((lib / package).rglob("*.py")):
        parts = list(path.relative_to(lib).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _is_type_checking_guard(node: ast.If) -> bool:
    test = node.test
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _imports(tree: ast.AST):
    """Import nodes of a module, skipping those under ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking_guard(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _resolve_base(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    anchor = module.split(".") if is_package else module.split(".")[:-1]
    anchor = anchor[: len(anchor) - (node.level - 1)]
    return ".".join(anchor + ([node.module] if node.module else []))


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is a module of the package."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def package_imports(modules: dict[str, Path]) -> list[tuple[str, str, int]]:
    """Every import of one of the package's modules by another: (importer, imported, line)."""
    found: list[tuple[str, str, int]] = []
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in _imports(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = _resolve_base(module, is_package, node)
                submodules = [f"{base}.{a.name}" for a in node.names]
                targets = [t if t in modules else base for t in submodules]
            for target in targets:
                known = _known(target, modules)
                if known is not None and known != module:
                    found.append((module, known, node.lineno))
    return found


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module name -> the package's modules it imports."""
    graph: dict[str, set[str]] = {module: set() for module in modules}
    for module, imported, _ in package_imports(modules):
        graph[module].add(imported)
    return graph
