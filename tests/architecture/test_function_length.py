"""No function of `protocol`, `robotad` or `robotactl` is longer than `LIMIT` lines.

A function is measured from its ``def`` line to its last line (decorators not counted; a
nested function counts inside its parent and on its own). There is no allow-list: a function
that grows past the limit is split into named steps with the change that grows it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("protocol", "robotad", "robotactl")

#: The longest a function may be, in lines.
LIMIT = 80

Function = ast.FunctionDef | ast.AsyncFunctionDef


def functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, Function]]:
    """Every function under `tree` with its qualified name (``Class.method``, ``outer.inner``)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, Function):
            yield f"{prefix}{node.name}", node
            yield from functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, f"{prefix}{node.name}.")
        else:
            yield from functions(node, prefix)


def length(function: Function) -> int:
    assert function.end_lineno is not None
    return function.end_lineno - function.lineno + 1


def function_lengths(root: Path = ROOT) -> dict[tuple[str, str], int]:
    """(file, qualified name) → length in lines, for every function of `PACKAGES` under `root`."""
    lengths: dict[tuple[str, str], int] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            for name, function in functions(ast.parse(path.read_text(), str(path))):
                lengths[(relative, name)] = length(function)
    return lengths


def test_no_function_is_longer_than_the_limit() -> None:
    too_long = sorted(
        f"{file}: {name} has {lines} lines"
        for (file, name), lines in function_lengths().items()
        if lines > LIMIT
    )
    assert too_long == [], f"split these into functions of at most {LIMIT} lines"


def test_a_long_function_is_measured_and_named(tmp_path: Path) -> None:
    """A method of `LIMIT` statements plus its ``def`` and docstring measures `LIMIT` + 2."""
    body = "\n".join(f"        line_{n} = {n}" for n in range(LIMIT))
    source = f"class Room:\n    def long(self) -> None:\n        '''Doc.'''\n{body}\n"
    for package in PACKAGES:
        (tmp_path / package).mkdir()
    (tmp_path / "robotad" / "room.py").write_text(source)
    assert function_lengths(tmp_path) == {("robotad/room.py", "Room.long"): LIMIT + 2}
