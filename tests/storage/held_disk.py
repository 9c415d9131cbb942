"""A spill store's disk held still: each result's write waits on its thread until let go.

`HeldDisk(monkeypatch)` (made on the event loop) replaces the spill store's writer
(`robotad.storage.spill._write_chunks`): a write on a worker thread sets `entered` (a trio
Event, set through the loop) once it has begun, then waits until `release` — no clock involved,
so a test can check what the loop did meanwhile. A write on the event loop's own thread goes
straight through (counted in `on_loop`) when it is a short result's, as the store allows, and
fails at once when it is longer: that is the stall the store must never cause, and nothing
could let it go. A write never let go fails after `HOLD_LIMIT` seconds, so a broken test ends
instead of hanging.
"""

from __future__ import annotations

import threading

import pytest
import trio

import robotad.storage.spill
from robotad.storage.spill import INLINE_MAX_CHARS

__all__ = ["HOLD_LIMIT", "HeldDisk"]

#: Seconds a held write waits for `release` before it fails.
HOLD_LIMIT = 10


class HeldDisk:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered = trio.Event()
        #: Writes held on a worker thread, and writes of short results on the loop.
        self.writes = 0
        self.on_loop = 0
        self._let_go = threading.Event()
        self._token = trio.lowlevel.current_trio_token()
        self._loop_thread = threading.current_thread()
        write = robotad.storage.spill._write_chunks

        def held(fd: int, chunks: list[bytes]) -> None:
            if threading.current_thread() is self._loop_thread:
                size = sum(len(chunk) for chunk in chunks)
                if size > 4 * INLINE_MAX_CHARS:
                    raise AssertionError(
                        f"a result of {size} bytes was written on the event loop's thread"
                    )
                self.on_loop += 1
                write(fd, chunks)
                return
            self.writes += 1
            trio.from_thread.run_sync(self.entered.set, trio_token=self._token)
            if not self._let_go.wait(HOLD_LIMIT):
                raise AssertionError("a held write was never let go")
            write(fd, chunks)

        monkeypatch.setattr(robotad.storage.spill, "_write_chunks", held)

    def release(self) -> None:
        """Let every write, waiting or to come, go on."""
        self._let_go.set()
