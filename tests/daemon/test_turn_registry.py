"""The turn registry behind session/run's turnId (PROTOCOL §2, §5): turns outlive their
requesters, a known turnId attaches or returns the stored outcome, and retention is bounded."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

from protocol.errors import InternalError, TurnAborted
from robotad.daemon.turns import TurnRegistry


class GatedRunner:
    """A turn body that waits for `gate`, counts how often it was started, and returns
    `result` (or raises `error`)."""

    def __init__(self, result: str = "done", error: BaseException | None = None) -> None:
        self.gate = trio.Event()
        self.result = result
        self.error = error
        self.calls = 0
        self.finished = False

    async def __call__(self) -> str:
        self.calls += 1
        await self.gate.wait()
        self.finished = True
        if self.error is not None:
            raise self.error
        return self.result


def instant(result: str) -> Callable[[], Awaitable[str]]:
    async def run() -> str:
        return result

    return run


async def test_a_turn_continues_after_its_waiter_is_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """G-072: cancelling the request that started a turn stops only the waiting."""
    runner = GatedRunner("the answer")
    async with trio.open_nursery() as manager:
        registry: TurnRegistry[str] = TurnRegistry(manager)
        turn = registry.start("t1", runner)
        with trio.CancelScope() as request:
            request.cancel()  # $/cancelRequest, or the requester's connection closing
            await registry.wait("t1")
        assert request.cancelled_caught
        assert not turn.done
        runner.gate.set()
        with trio.fail_after(10):
            assert await registry.wait("t1") == "the answer"
    assert runner.finished
    assert runner.calls == 1


async def test_a_waiter_cancelled_mid_wait_leaves_the_turn_and_other_waiters_alone(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """G-072."""
    runner = GatedRunner("ok")
    got: list[str] = []

    async with trio.open_nursery() as manager:
        registry: TurnRegistry[str] = TurnRegistry(manager)
        registry.start("t1", runner)
        async with trio.open_nursery() as requests:

            async def patient() -> None:
                got.append(await registry.wait("t1"))

            requests.start_soon(patient)
            with trio.move_on_after(5) as impatient:
                await registry.wait("t1")
            assert impatient.cancelled_caught
            runner.gate.set()
    assert got == ["ok"]
    assert runner.calls == 1


async def test_a_second_start_with_the_same_id_attaches_to_the_running_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """G-071: the second runner never runs; both requesters get the one turn's result."""
    first, second = GatedRunner("first"), GatedRunner("second")
    results: list[str] = []
    async with trio.open_nursery() as manager:
        registry: TurnRegistry[str] = TurnRegistry(manager)
        turn = registry.start("t1", first)
        assert registry.start("t1", second) is turn
        assert registry.in_flight() == [turn]

        async def requester() -> None:
            results.append(await turn.wait())

        manager.start_soon(requester)
        manager.start_soon(requester)
        await trio.testing.wait_all_tasks_blocked()
        first.gate.set()
    assert results == ["first", "first"]
    assert (first.calls, second.calls) == (1, 0)
    assert registry.in_flight() == []


async def test_a_finished_id_returns_the_stored_result_without_running_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """G-071."""
    again = GatedRunner("never")
    async with trio.open_nursery() as manager:
        registry: TurnRegistry[str] = TurnRegistry(manager)
        registry.start("t1", instant("stored"))
        assert await registry.wait("t1") == "stored"
        turn = registry.start("t1", again)
        assert turn.done
        assert await turn.wait() == "stored"
        assert turn.outcome() == "stored"
    assert again.calls == 0


async def test_a_finished_id_raises_the_stored_error_to_every_waiter(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """G-071: a failed turn's error comes back (same class, code and data) on every retry."""
    failing = GatedRunner(error=TurnAborted("s1", "t1"))
    raised: list[TurnAborted] = []
    async with trio.open_nursery() as manager:
        registry: TurnRegistry[str] = TurnRegistry(manager)
        turn = registry.start("t1", failing)

        async def requester() -> None:
            with pytest.raises(TurnAborted) as caught:
                await turn.wait()
            raised.append(caught.value)

        manager.start_soon(requester)
        manager.start_soon(requester)
        await trio.testing.wait_all_tasks_blocked()
        failing.gate.set()
    retry = GatedRunner()
    assert registry.start("t1", retry) is turn
    with pytest.raises(TurnAborted) as later:
        await registry.wait("t1")
    raised.append(later.value)
    assert retry.calls == 0
    assert [e.to_wire() for e in raised] == [TurnAborted("s1", "t1").to_wire()] * 3
    assert len({id(e) for e in raised}) == 3  # each waiter gets its own exception object
    assert isinstance(turn.error, TurnAborted)


async def test_an_unexpected_exception_becomes_an_internal_error_and_harms_nothing_else(
    autojump_clock: trio.testing.MockClock,
) -> None:
    secret = "sk-live-abcdef0123456789"
    other = GatedRunner("fine")
    async with trio.open_nursery() as manager:
        registry: TurnRegistry[str] = TurnRegistry(manager)
        registry.start("other", other)
        broken = GatedRunner(error=ValueError(f"bad key {secret}"))
        registry.start("broken", broken)
        broken.gate.set()
        with pytest.raises(InternalError) as caught:
            await registry.wait("broken")
        assert secret not in caught.value.message
        assert secret not in repr(caught.value.to_wire())
        other.gate.set()
        assert await registry.wait("other") == "fine"


async def test_settled_turns_are_retained_up_to_the_bound_and_running_ones_always(
    autojump_clock: trio.testing.MockClock,
) -> None:
    long_running = GatedRunner("slow")
    async with trio.open_nursery() as manager:
        registry: TurnRegistry[str] = TurnRegistry(manager, retain=3)
        registry.start("long", long_running)
        for n in range(5):
            registry.start(f"t{n}", instant(f"r{n}"))
            assert await registry.wait(f"t{n}") == f"r{n}"
        assert [registry.get(f"t{n}") is not None for n in range(5)] == [
            False,
            False,
            True,
            True,
            True,
        ]
        assert registry.get("long") is not None  # in flight: never evicted
        with pytest.raises(KeyError):
            await registry.wait("t0")
        rerun = GatedRunner("again")
        rerun.gate.set()
        registry.start("t0", rerun)  # evicted, so unknown: it runs anew
        assert await registry.wait("t0") == "again"
        long_running.gate.set()
        assert await registry.wait("long") == "slow"
        # t0 and long settled last, pushing out the two oldest settled
        assert [registry.get(t) is not None for t in ("t2", "t3", "t4", "t0", "long")] == [
            False,
            False,
            True,
            True,
            True,
        ]
    assert rerun.calls == 1


async def test_a_turn_cancelled_by_its_nursery_settles_with_an_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """When the manager's nursery is cancelled (daemon shutdown) no waiter hangs forever."""
    runner = GatedRunner()
    async with trio.open_nursery() as manager:
        registry: TurnRegistry[str] = TurnRegistry(manager)
        turn = registry.start("t1", runner)
        await trio.testing.wait_all_tasks_blocked()
        manager.cancel_scope.cancel()
    assert turn.done
    assert not runner.finished
    with pytest.raises(InternalError, match="cancelled"):
        turn.outcome()


def test_retain_must_be_positive() -> None:
    with pytest.raises(ValueError, match="retain"):
        TurnRegistry(None, retain=0)  # type: ignore[arg-type]


async def test_outcome_of_a_running_turn_is_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    runner = GatedRunner()
    async with trio.open_nursery() as manager:
        registry: TurnRegistry[str] = TurnRegistry(manager)
        turn = registry.start("t1", runner)
        with pytest.raises(RuntimeError, match="not settled"):
            turn.outcome()
        assert turn.error is None
        runner.gate.set()
