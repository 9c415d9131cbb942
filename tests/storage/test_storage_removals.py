"""`RemovalQueue`: removals run in a worker thread, in order, while the caller goes on; a
failure is logged and does not stop the others; `settled` returns only once every removal asked
for has run (a journal closes its folder only then)."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
import trio
import trio.testing

from robotad.storage.removals import RemovalQueue

from .gates import held_back


async def test_removals_run_in_order_and_settled_waits_for_all_of_them() -> None:
    gate = threading.Event()
    removed: list[str] = []

    def remove(name: str) -> None:
        gate.wait(10)
        removed.append(name)

    queue = RemovalQueue(remove)
    queue.remove_soon("a")
    queue.remove_soon("b")  # queued while the worker waits on "a": the same worker takes it

    def nothing_removed_yet() -> None:
        assert removed == []

    await held_back(gate, queue.settled, nothing_removed_yet)
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


async def test_names_wait_for_a_whole_batch_then_one_worker_removes_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Below a batch no worker starts (the unlinks stay off the turns that follow); the name
    that completes the batch starts one drain, nobody waiting for it."""
    drained = threading.Event()
    removed: list[str] = []
    workers: list[str | None] = []
    start = trio.lowlevel.start_thread_soon

    def counted(*args: Any, name: str | None = None) -> None:
        workers.append(name)
        start(*args, name=name)

    monkeypatch.setattr(trio.lowlevel, "start_thread_soon", counted)

    def remove(name: str) -> None:
        removed.append(name)
        if len(removed) == 3:
            drained.set()

    queue = RemovalQueue(remove, batch=3)
    queue.remove_soon("a")
    queue.remove_soon("b")
    assert workers == []
    queue.remove_soon("c")
    assert workers == ["removals"]
    with trio.fail_after(10):
        while not drained.is_set():
            await trio.sleep(0.001)
    assert removed == ["a", "b", "c"]
    queue.remove_soon("d")  # the next batch starts empty again
    assert workers == ["removals"]
    with trio.fail_after(10):
        await queue.settled()
    assert removed == ["a", "b", "c", "d"]


async def test_settled_while_a_batch_drains_waits_for_it_and_what_joined_it() -> None:
    gate = threading.Event()
    removed: list[str] = []

    def remove(name: str) -> None:
        gate.wait(10)
        removed.append(name)

    queue = RemovalQueue(remove, batch=2)
    queue.remove_soon("a")
    queue.remove_soon("b")  # a batch: its drain waits at the gate
    queue.remove_soon("c")  # joins the drain in progress
    await held_back(gate, queue.settled)
    assert removed == ["a", "b", "c"]
