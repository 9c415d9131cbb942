"""A wait held back by a worker thread stuck at a gate: checked to be still waiting, then let go.

`held_back(gate, wait)` runs `wait()` in the background until every task is blocked, checks it
has not returned (and runs `meanwhile`, the caller's own checks of that moment), then opens
`gate` and returns once `wait()` has. Bounded by `LIMIT`.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable

import trio
import trio.testing

__all__ = ["LIMIT", "held_back"]

#: Seconds a held-back wait may take once its gate is open.
LIMIT = 10


async def held_back(
    gate: threading.Event,
    wait: Callable[[], Awaitable[object]],
    meanwhile: Callable[[], None] = lambda: None,
) -> None:
    done = trio.Event()

    async def waiting() -> None:
        await wait()
        done.set()

    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(waiting)
            await trio.testing.wait_all_tasks_blocked()
            assert not done.is_set(), "the wait returned while its gate was still shut"
            meanwhile()
            gate.set()
