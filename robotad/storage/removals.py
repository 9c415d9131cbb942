"""Removals nobody waits for: files unlinked in a worker thread while the caller goes on.

A journal retires a settled execution's file with ``discard(durable=False)``: the file coming
back after a crash would do no harm, so nothing needs the unlink to have happened before the
turn's result goes out. On ext4 an unlink right after an fsync takes a few hundred
microseconds; `RemovalQueue` takes that and the worker-thread round trip off the turn's path.

- `remove_soon(name)` queues `name` and returns at once; one worker thread at a time drains the
  queue in order, calling the owner's blocking `remove` for each name. A failure is logged and
  the name dropped (the owner's later pruning finds the file again).
- `settled()` waits until every queued removal has run. The owner calls it before giving up
  what the removals use (a journal's folder descriptor), so no unlink ever runs against a
  closed or reused descriptor.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable

import trio

__all__ = ["RemovalQueue"]

logger = logging.getLogger("robotad.storage")


class RemovalQueue:
    """Blocking removals run in a worker thread, in the order they were asked for."""

    def __init__(self, remove: Callable[[str], object]) -> None:
        self._remove = remove
        self._names: deque[str] = deque()
        self._guard = threading.Lock()
        self._draining = False
        self._idle: trio.Event | None = None

    def remove_soon(self, name: str) -> None:
        """Queue `name`; a worker thread removes it. Call from the trio thread."""
        with self._guard:
            self._names.append(name)
            if self._draining:
                return
            self._draining = True
        idle = self._idle = trio.Event()
        token = trio.lowlevel.current_trio_token()

        def signal_idle(_: object) -> None:
            with contextlib.suppress(trio.RunFinishedError):  # nobody is left to wait
                token.run_sync_soon(idle.set)

        trio.lowlevel.start_thread_soon(self._drain, signal_idle, name="removals")

    async def settled(self) -> None:
        """Return once every removal asked for so far has run."""
        while self._idle is not None and not self._idle.is_set():
            await self._idle.wait()

    def _drain(self) -> None:
        while True:
            with self._guard:
                if not self._names:
                    self._draining = False
                    return
                name = self._names.popleft()
            try:
                self._remove(name)
            except Exception:  # the file stays; the owner's pruning finds it again
                logger.warning("removing %s failed", name, exc_info=True)
