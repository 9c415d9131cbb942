"""Confined work on overlapping folders, one piece at a time, daemon-wide.

A sandboxed command's mounts are planned from paths (`layout.plan_mounts`) and bubblewrap then
looks those paths up again to bind them. A command running at the same time in the same
folders — a second Bash call of the same round, or another session's — could swap a folder
for a symlink in between, and have the link's target bound writable; a Write or Edit, checked
against the writable folders and then written by robotad itself, could be led the same way.
Nothing a command starts outlives it (its own PID namespace), so keeping confined work on
overlapping folders apart closes that window: while a command runs, or a file tool checks and
writes, no other confined work whose folders overlap its own starts.

`hold(folders)` waits until no held set overlaps `folders` (one folder within another, either
way), then holds it for the block. The registry is per trio run (a `RunVar`): one daemon, one
registry. Waiters are woken on every release and look again; nobody is served in any
particular order.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import trio

from robotad.sandbox.layout import is_within

__all__ = ["hold", "overlaps"]


class _Registry:
    def __init__(self) -> None:
        self.held: list[tuple[str, ...]] = []
        self.released = trio.Event()


_REGISTRY: trio.lowlevel.RunVar[_Registry] = trio.lowlevel.RunVar("robota_sandbox_workspaces")


def overlaps(ours: Sequence[str], theirs: Sequence[str]) -> bool:
    """Whether a folder of `ours` is one of `theirs`, or lies within one, or holds one."""
    return any(is_within(a, b) or is_within(b, a) for a in ours for b in theirs)


def _registry() -> _Registry:
    try:
        return _REGISTRY.get()
    except LookupError:
        registry = _Registry()
        _REGISTRY.set(registry)
        return registry


@asynccontextmanager
async def hold(folders: Sequence[str]) -> AsyncIterator[None]:
    """Hold `folders` (canonical paths) for the block, once no held set overlaps them."""
    registry = _registry()
    ours = tuple(folders)
    while any(overlaps(ours, theirs) for theirs in registry.held):
        await registry.released.wait()
    registry.held.append(ours)
    try:
        yield
    finally:
        registry.held.remove(ours)
        registry.released.set()
        registry.released = trio.Event()
