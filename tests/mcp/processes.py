"""Finding the MCP server processes a test started, by a marker in their environment."""

from __future__ import annotations

import os
from pathlib import Path


def processes_with(marker: str, *, parent: int | None = None) -> list[int]:
    """Pids of live (not zombie) processes whose environment holds `marker` (``NAME=value``),
    only the children of `parent` when given."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        state, parent_pid = stat[stat.rfind(")") + 2 :].split()[:2]
        if state == "Z" or (parent is not None and int(parent_pid) != parent):
            continue
        if marker.encode() in environ.split(b"\0"):
            found.append(int(entry))
    return found
