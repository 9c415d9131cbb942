"""Helpers for the tool tests: call a tool the way the loop does, and look at processes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from robotad.tools import Tool, ToolContext, ToolResult


async def call(tool: Tool, cwd: Path, **arguments: Any) -> ToolResult:
    """Decode `arguments` with the tool's own decoder, then run it in a session rooted at
    `cwd` (as the loop does; path arguments are canonicalised by the tool itself)."""
    typed = tool.decode_arguments(arguments)
    return await tool.run(typed, ToolContext(cwd=cwd, session_id="test-session"))


def is_running(pid: int) -> bool:
    """False once `pid` has exited, reaped or not (a zombie runs no code)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return False
    state = raw[raw.rfind(b")") + 2 :].split()[0]
    return state not in (b"Z", b"X", b"x")
