"""`run_blocking`: the function runs on another thread and its value or exception comes back;
a cancellation that arrives while it runs never abandons it — the call finishes and returns,
and the cancellation is raised at the caller's next checkpoint; a scope cancelled before the
call starts runs nothing."""

from __future__ import annotations

import threading

import pytest
import trio
import trio.testing

from robotad.storage.handoff import run_blocking


async def test_the_value_comes_back_from_another_thread() -> None:
    with trio.fail_after(10):
        ident = await run_blocking(threading.get_ident)
    assert ident != threading.get_ident()
    with trio.fail_after(10):
        assert await run_blocking(max, 3, 7) == 7


async def test_the_exception_comes_back_as_raised() -> None:
    def fail() -> None:
        raise OSError(28, "No space left on device")

    with trio.fail_after(10), pytest.raises(OSError, match="No space left"):
        await run_blocking(fail)


async def test_a_cancellation_waits_for_the_call_to_finish() -> None:
    gate = threading.Event()
    finished: list[str] = []
    scope = trio.CancelScope()

    def write() -> None:
        gate.wait(10)
        finished.append("written")

    async def call() -> None:
        with scope:
            await run_blocking(write)
            assert finished == ["written"]
            await trio.lowlevel.checkpoint()  # the cancellation arrives here
            pytest.fail("the cancellation must be raised once the call returned")

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(call)
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
            await trio.testing.wait_all_tasks_blocked()
            assert finished == []  # still waiting for the thread, not abandoned
            gate.set()
    assert scope.cancelled_caught
    assert finished == ["written"]


async def test_nothing_runs_under_a_scope_already_cancelled() -> None:
    ran: list[int] = []
    with trio.CancelScope() as scope:
        scope.cancel()
        await run_blocking(ran.append, 1)
    assert ran == []
