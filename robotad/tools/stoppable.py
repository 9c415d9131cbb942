"""Blocking tool work in a worker thread that a cancelled call stops without waiting long.

trio cannot stop a thread: a tool's worker stops because it looks, between the steps of its
loop (a line searched, a tag parsed), whether its call was cancelled
(`trio.from_thread.check_cancelled`, which raises `trio.Cancelled` there). `run_stoppable`
waits for that at most `STOP_GRACE_S`; a step that takes longer (a regular-expression match
already underway, which nothing can interrupt) is left to end in its thread, and what the
thread makes after is dropped with it. The work must therefore write only into values of its
own call, never into anything the session or a later call reads.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TypeVar

import trio

__all__ = ["STOP_GRACE_S", "run_stoppable"]

STOP_GRACE_S = 0.5
"""Seconds a cancelled call waits for its worker thread to stop before leaving it."""

T = TypeVar("T")


async def run_stoppable(work: Callable[..., T], *args: object) -> T:
    """`work(*args)` in a worker thread. Cancelled, the call waits up to `STOP_GRACE_S` for the
    thread to stop (not at all when it has not begun) and then re-raises the cancellation,
    whether or not the thread has ended."""
    token = trio.lowlevel.current_trio_token()
    begun = False
    ended = trio.Event()

    def in_thread() -> T:
        nonlocal begun
        begun = True
        try:
            return work(*args)
        finally:
            with contextlib.suppress(trio.RunFinishedError):  # the daemon has stopped
                token.run_sync_soon(ended.set)

    try:
        return await trio.to_thread.run_sync(in_thread, abandon_on_cancel=True)
    except trio.Cancelled:
        if begun:
            with trio.move_on_after(STOP_GRACE_S, shield=True):
                await ended.wait()
        raise
