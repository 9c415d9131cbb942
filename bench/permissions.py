"""Decisions per second of the permission evaluator with 200 rules.

Run: ``.venv/bin/python bench/permissions.py``. Prints figures; asserts nothing.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from robotad.agent.tool import ToolProfile
from robotad.session.permissions.enforcer import PermissionEnforcer

PROFILES = {
    "Read": ToolProfile("inspect", "file_path", "path"),
    "Write": ToolProfile("modify", "file_path", "path"),
    "Edit": ToolProfile("modify", "file_path", "path"),
    "Bash": ToolProfile("execute", "command", "command"),
    "WebFetch": ToolProfile("network", "url", "url"),
}


def rules() -> dict[str, list[str]]:
    allow, ask, deny = [], [], []
    for n in range(60):
        allow.append(f"Write(src/module_{n}/**/*.py)")
        allow.append(f"Bash(tool{n} run:*)")
    for n in range(40):
        ask.append(f"Edit(config/{n}/*)")
    for n in range(20):
        deny.append(f"WebFetch(domain:blocked{n}.example.com)")
        deny.append(f"Read(secrets/{n}/**)")
    total = len(allow) + len(ask) + len(deny)
    assert total == 200, total
    return {"allow": allow, "ask": ask, "deny": deny}


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("Write", {"file_path": "src/module_59/deep/er/file.py", "content": ""}),
    ("Write", {"file_path": "docs/readme.md", "content": ""}),
    ("Bash", {"command": "tool30 run --fast && tool31 run"}),
    ("Bash", {"command": "make all"}),
    ("Edit", {"file_path": "config/39/app.toml"}),
    ("WebFetch", {"url": "https://api.blocked19.example.com/x"}),
    ("Read", {"file_path": "secrets/19/key"}),
    ("Read", {"file_path": "README.md"}),
]


def measure(label: str, gate: PermissionEnforcer, rounds: int) -> None:
    for tool, args in CALLS:  # warm the compiled-rule cache
        gate.evaluate(tool, args)
    start = time.perf_counter()
    for _ in range(rounds):
        for tool, args in CALLS:
            gate.evaluate(tool, args)
    elapsed = time.perf_counter() - start
    decisions = rounds * len(CALLS)
    print(
        f"{label:<34} {decisions / elapsed:>10,.0f} decisions/s"
        f"  ({elapsed / decisions * 1e6:.1f} µs each)"
    )


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        print("permission evaluator, 200 rules, 8-call mix (allow/ask/deny/mode outcomes)")
        gate = PermissionEnforcer(cwd, profiles=PROFILES, rules=rules())
        measure("default (symlinks resolved)", gate, 5_000)
        lexical = PermissionEnforcer(
            cwd, profiles=PROFILES, rules=rules(), resolve_links=lambda path: path
        )
        measure("lexical only (no filesystem)", lexical, 5_000)
        start = time.perf_counter()
        for _ in range(100):
            PermissionEnforcer(cwd, profiles=PROFILES, rules=rules())
        print(f"{'construct (parse 200 rules)':<34} {(time.perf_counter() - start) * 10:.2f} ms")


if __name__ == "__main__":
    main()
