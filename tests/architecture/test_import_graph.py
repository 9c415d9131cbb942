"""The tree's arrows point one way: no import cycle between modules or packages, and neither
`protocol` nor `robotactl` imports the daemon (docs/architecture.md).

Imports are read from the source with `ast` (every import statement, at module level or inside a
function, `TYPE_CHECKING` blocks excepted: those are for the type checker only).
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("protocol", "robotad", "robotactl")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_names(path: Path, name: str, modules: Collection[str]) -> Iterator[str]:
    """Every module an import statement of `path` loads (TYPE_CHECKING blocks skipped).

    ``from P import a`` loads the module ``P.a`` when there is one, else ``P`` itself.
    """
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                yield submodule if submodule in modules else base
        stack.extend(ast.iter_child_nodes(node))


def import_graph() -> dict[str, set[str]]:
    modules = all_modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = {t for t in imported_names(path, name, modules) if t in modules and t != name}
        graph[name] = targets
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of `graph` as a path of nodes, or None."""
    colour: dict[str, int] = {}
    parent: dict[str, str] = {}
    for root in sorted(graph):
        if colour.get(root):
            continue
        stack = [(root, iter(sorted(graph[root])))]
        colour[root] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                colour[node] = 2
                stack.pop()
            elif colour.get(child) == 1:
                cycle = [child, node]
                while cycle[-1] != child:
                    cycle.append(parent[cycle[-1]])
                return list(reversed(cycle))
            elif not colour.get(child):
                colour[child] = 1
                parent[child] = node
                stack.append((child, iter(sorted(graph.get(child, ())))))
    return None


def package_of(module: str) -> str:
    """The package a module belongs to: two levels for robotad (``robotad.session``), else one."""
    parts = module.split(".")
    depth = 2 if parts[0] == "robotad" else 1
    return ".".join(parts[:depth])


def test_no_module_imports_itself_back() -> None:
    assert find_cycle(import_graph()) is None


def test_no_package_imports_itself_back() -> None:
    packages: dict[str, set[str]] = {}
    for module, targets in import_graph().items():
        here = package_of(module)
        packages.setdefault(here, set()).update(
            package_of(t) for t in targets if package_of(t) != here
        )
    assert find_cycle(packages) is None


@pytest.mark.parametrize("client", ["protocol", "robotactl"])
def test_clients_never_import_the_daemon(client: str) -> None:
    offenders = sorted(
        f"{module} -> {target}"
        for module, targets in import_graph().items()
        if module.split(".")[0] == client
        for target in targets
        if target.split(".")[0] == "robotad"
    )
    assert offenders == []


def test_no_package_hides_imports_behind_getattr() -> None:
    offenders = [
        name
        for name, path in all_modules().items()
        if any(
            isinstance(node, ast.FunctionDef | ast.Assign)
            and "__getattr__" in ast.unparse(node).split("(")[0]
            for node in ast.parse(path.read_text()).body
        )
    ]
    assert offenders == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
