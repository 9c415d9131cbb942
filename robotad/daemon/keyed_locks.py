"""One lock per key, made on first use and forgotten once nobody holds or waits for it.

The session manager serialises the loads, closes, creates and deletes of one session id with
it, while different ids never wait for each other. Memory stays bounded by the keys in use:
a client asking about a million unknown ids leaves no lock behind.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager

import trio

__all__ = ["KeyedLocks"]


class KeyedLocks:
    """`hold(key)` is an async context manager holding that key's lock (FIFO-fair)."""

    def __init__(self) -> None:
        self._locks: dict[Hashable, trio.Lock] = {}

    def __len__(self) -> int:
        """How many keys have a lock now (held or waited for)."""
        return len(self._locks)

    @asynccontextmanager
    async def hold(self, key: Hashable) -> AsyncIterator[None]:
        lock = self._locks.setdefault(key, trio.Lock())
        try:
            async with lock:
                yield
        finally:
            unused = not lock.locked() and lock.statistics().tasks_waiting == 0
            if unused and self._locks.get(key) is lock:
                del self._locks[key]
