"""Removals nobody waits for: files unlinked in a worker thread, a batch at a time.

A journal retires a settled execution's file with ``discard(durable=False)``: the file coming
back after a crash would do no harm, so nothing needs the unlink to have happened before the
turn's result goes out, or soon after. On ext4 an unlink right after an fsync takes a few
hundred microseconds, and its metadata rides on the next fsync of the same file system — the
next turn's. `RemovalQueue` takes both off the turns' path: names wait until `BATCH` of them
are queued, then one worker thread removes them all (one wake-up, one journal commit's worth
of unlinks), and nothing reports back to the event loop unless somebody waits.

- `remove_soon(name)` queues `name` and returns at once. Once `BATCH` names wait and no worker
  is at it, a worker thread drains the queue in order, calling the owner's blocking `remove`
  for each; names queued meanwhile join the same drain. A failure is logged and the name
  dropped (the owner's later pruning finds the file again).
- `settled()` starts a drain of whatever waits and returns once every removal asked for so
  far has run. The owner calls it before giving up what the removals use (a journal's folder
  descriptor, at close), so no unlink ever runs against a closed or reused descriptor. Up to
  `BATCH` - 1 retired files therefore stay until then, or until a crash's later pruning.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Final

import trio

__all__ = ["BATCH", "RemovalQueue"]

logger = logging.getLogger("robotad.storage")

#: Names queued before a worker removes them.
BATCH: Final = 32


class RemovalQueue:
    """Blocking removals run in a worker thread, in the order they were asked for."""

    def __init__(self, remove: Callable[[str], object], *, batch: int = BATCH) -> None:
        self._remove = remove
        self._batch = batch
        self._names: deque[str] = deque()
        self._guard = threading.Lock()
        self._draining = False
        #: Set by `settled` while it waits for the drain in progress: the drain's end sets it.
        self._waiter: tuple[trio.Event, trio.lowlevel.TrioToken] | None = None

    def remove_soon(self, name: str) -> None:
        """Queue `name`; a worker thread removes it with the batch it completes. Call from the
        trio thread."""
        with self._guard:
            self._names.append(name)
            if self._draining or len(self._names) < self._batch:
                return
            self._draining = True
        self._start()

    async def settled(self) -> None:
        """Remove what waits now, and return once every removal asked for so far has run."""
        token = trio.lowlevel.current_trio_token()
        while True:
            with self._guard:
                if not self._draining:
                    if not self._names:
                        return
                    self._draining = True
                    start = True
                else:
                    start = False
                if self._waiter is None:
                    self._waiter = (trio.Event(), token)
                done = self._waiter[0]
            if start:
                self._start()
            await done.wait()

    def _start(self) -> None:
        trio.lowlevel.start_thread_soon(self._drain, _ignore, name="removals")

    def _drain(self) -> None:
        while True:
            with self._guard:
                if not self._names:
                    self._draining = False
                    waiter, self._waiter = self._waiter, None
                    break
                name = self._names.popleft()
            try:
                self._remove(name)
            except Exception:  # the file stays; the owner's pruning finds it again
                logger.warning("removing %s failed", name, exc_info=True)
        if waiter is not None:
            done, token = waiter
            with contextlib.suppress(trio.RunFinishedError):  # nobody is left to wait
                token.run_sync_soon(done.set)


def _ignore(_: object) -> None:
    """A drain reports to nobody (`_drain` tells a waiting `settled` itself)."""
