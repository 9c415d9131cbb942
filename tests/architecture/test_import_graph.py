"""The tree's arrows point one way: no import cycle between modules or packages, and neither
`protocol` nor `robotactl` imports the daemon (docs/architecture.md).

Imports are read from the source with `ast`: every import statement, at module level, inside a
function or in an ``if TYPE_CHECKING:`` block. A type-only import is an arrow too: a module that
needs another's types to be understood depends on it, so a circle closed by one is still a circle
(give the importer a `typing.Protocol` of what it needs instead).
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterator, Mapping
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


def imported_names(path: Path, name: str, modules: Collection[str]) -> Iterator[str]:
    """Every module an import statement of `path` loads (TYPE_CHECKING blocks included).

    ``from P import a`` loads the module ``P.a`` when there is one, else ``P`` itself.
    """
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
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


def import_graph(modules: Mapping[str, Path] | None = None) -> dict[str, set[str]]:
    """Module → the modules it imports, over `modules` (default: the whole tree)."""
    modules = all_modules() if modules is None else modules
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


def test_a_type_only_import_closes_a_cycle(tmp_path: Path) -> None:
    """The chat's old circle: the controller imported the slash actions where it used them, and
    the actions imported the controller under ``TYPE_CHECKING`` — a cycle all the same."""
    package = tmp_path / "chat"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "controller.py").write_text(
        "class ChatController:\n"
        "    def submit(self) -> None:\n"
        "        from chat.actions import SlashActions\n"
    )
    (package / "actions.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from chat.controller import ChatController\n"
    )
    modules = {f"chat.{name}": package / f"{name}.py" for name in ("actions", "controller")}
    assert find_cycle(import_graph(modules)) == ["chat.actions", "chat.controller", "chat.actions"]
