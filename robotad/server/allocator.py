"""Keeping the daemon's resident memory close to what it holds (glibc only).

A long-running CPython process on glibc keeps the high-water mark of its transient
allocations. robotad makes large transient ones all day: every save encodes the session's whole
record, reads the stored one back and hashes it, in worker threads — megabytes for a long
session. Left alone, glibc raises its mmap threshold to the largest block ever freed (so later
record-sized buffers come from the heap and fragment it), gives each worker thread an arena of
its own, and returns little of either to the kernel. Measured over the soak (bench/soak.py)
that tripled resident growth over live objects.

So at start-up `tune` fixes the mmap threshold at `MMAP_THRESHOLD` (a block that large is mapped
on its own and unmapped when freed) and caps the arenas at `ARENA_MAX`; `trim_periodically`
then calls ``malloc_trim(0)``, in a worker thread, which hands the free pages inside the heaps
back: every `TRIM_INTERVAL` seconds in which the daemon used any CPU time (an idle daemon has
freed nothing since the last trim, so it is not trimmed again). Elsewhere than glibc (musl,
macOS) both do nothing.

The cyclic garbage collector has a cost of its own: a full collection walks every container
object alive, most of them the modules and start-up state that live as long as the process
(17 ms a pause, measured in a daemon after 1,000 turns). `settle`, called once the daemon is
ready to serve, moves them to the collector's permanent generation (``gc.freeze``), so later
collections walk only what the sessions made.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import platform
import time
from typing import Final

import trio

__all__ = [
    "ARENA_MAX",
    "MMAP_THRESHOLD",
    "TRIM_INTERVAL",
    "settle",
    "trim",
    "trim_periodically",
    "tune",
]

log = logging.getLogger("robotad.server.allocator")

#: Blocks at least this large are mmapped on their own (glibc's initial default, kept fixed).
MMAP_THRESHOLD: Final = 128 * 1024
#: Malloc arenas shared by every thread.
ARENA_MAX: Final = 2
#: Seconds between two trims.
TRIM_INTERVAL: Final = 5.0

#: CPU time below which an interval counts as idle (the trim itself costs about this much).
_IDLE_CPU_SECONDS: Final = 0.005
_M_MMAP_THRESHOLD: Final = -3
_M_ARENA_MAX: Final = -8


def _glibc() -> ctypes.CDLL | None:
    if platform.libc_ver()[0] != "glibc":
        return None
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        return None


_libc = _glibc()


def tune() -> bool:
    """Fix the mmap threshold and cap the arenas; True when glibc took both settings."""
    if _libc is None:
        return False
    ok = bool(_libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    ok = bool(_libc.mallopt(_M_ARENA_MAX, ARENA_MAX)) and ok
    if not ok:
        log.warning("glibc refused the allocator settings; memory may grow with load")
    return ok


def settle() -> int:
    """Exempt every object alive now from later collections (module doc); how many there
    are. Collections still free the cycles that anything made afterwards leaves behind."""
    gc.freeze()
    return gc.get_freeze_count()


def trim() -> bool:
    """Return free heap pages to the kernel; True when glibc released any."""
    return _libc is not None and bool(_libc.malloc_trim(0))


async def trim_periodically(interval: float = TRIM_INTERVAL) -> None:
    """Trim every `interval` seconds that saw work, until cancelled (returns at once off
    glibc)."""
    if _libc is None:
        return
    trimmed_at = time.process_time()
    while True:
        await trio.sleep(interval)
        if time.process_time() - trimmed_at < _IDLE_CPU_SECONDS:
            continue
        await trio.to_thread.run_sync(trim)
        trimmed_at = time.process_time()
