"""`RemovalQueue`: removals run in a worker thread, in order, while the caller goes on; a
failure is logged and does not stop the others; `settled` returns only once every removal asked
for has run (a journal closes its folder only then)."""

from __future__ import annotations

import logging
import threading

import pytest
import trio
import trio.testing

from robotad.storage.removals import RemovalQueue


async def test_removals_run_in_order_and_settled_waits_for_all_of_them() -> None:
    gate = threading.Event()
    removed: list[str] = []

    def remove(name: str) -> None:
        gate.wait(10)
        removed.append(name)

    queue = RemovalQueue(remove)
    queue.remove_soon("a")
    queue.remove_soon("b")  # queued while the worker waits on "a": the same worker takes it
    settled = trio.Event()

    async def wait() -> None:
        await queue.settled()
        settled.set()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait)
            await trio.testing.wait_all_tasks_blocked()
            assert not settled.is_set()
            assert removed == []
            gate.set()
    assert removed == ["a", "b"]
    queue.remove_soon("c")  # a new batch after the first settled
    with trio.fail_after(10):
        await queue.settled()
    assert removed == ["a", "b", "c"]


async def test_a_failed_removal_is_logged_and_the_rest_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    removed: list[str] = []

    def remove(name: str) -> None:
        if name == "bad":
            raise PermissionError(13, "Permission denied")
        removed.append(name)

    queue = RemovalQueue(remove)
    with caplog.at_level(logging.WARNING, logger="robotad.storage"):
        for name in ("one", "bad", "two"):
            queue.remove_soon(name)
        with trio.fail_after(10):
            await queue.settled()
    assert removed == ["one", "two"]
    assert any("removing bad failed" in record.getMessage() for record in caplog.records)


async def test_settled_with_nothing_asked_returns_at_once() -> None:
    queue = RemovalQueue(lambda name: None)
    with trio.fail_after(10):
        await queue.settled()
