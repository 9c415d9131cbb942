"""The turn registry behind ``session/run``'s idempotency key (G-071, G-072).

One `TurnRegistry` per session maps a ``turnId`` to its `Turn`: in flight while its runner
runs, then settled with a result or an `RpcError`. `TurnRegistry.start` runs the runner as a
task in a nursery the caller owns (the session manager's), so the turn outlives whoever asked
for it: cancelling a `Turn.wait` — a ``$/cancelRequest`` or a closed connection — stops only
that waiting. Starting a known ``turnId`` again attaches to the same `Turn`, whether it still
runs or has settled, and never calls the new runner.

Settled turns are kept for the `retain` most recently settled ids per registry; an id evicted
from that window is unknown again. Turns in flight are never evicted.

The registry knows nothing of sessions: a runner is any ``async () -> result`` callable, and
whatever checks must refuse a run before it starts (busy, pending execution) happen before
`start`, so a refused run leaves no outcome behind for its id.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Final, Generic, TypeVar

import trio

from protocol.errors import InternalError, RpcError
from robotad.log import fields

__all__ = ["DEFAULT_RETAINED_TURNS", "Runner", "Turn", "TurnRegistry"]

log = logging.getLogger("robotad.daemon.turns")

#: Settled turns a registry remembers, most recently settled first: far more than any retry of
#: a lost reply needs, and bounded so a session running for days holds a fixed amount.
DEFAULT_RETAINED_TURNS: Final = 256

R = TypeVar("R")

#: The body of a turn: returns its result or raises an `RpcError` (e.g. TurnAborted).
Runner = Callable[[], Awaitable[R]]


class Turn(Generic[R]):
    """One turn's slot: in flight until its runner returns or raises, then its outcome.

    A registry keeps hundreds of settled turns per session, so a settled one holds its outcome
    and nothing else: the event its waiters waited on is dropped once set."""

    __slots__ = ("_error", "_result", "_settled", "turn_id")

    def __init__(self, turn_id: str) -> None:
        self.turn_id = turn_id
        self._settled: trio.Event | None = trio.Event()
        self._result: tuple[R] | None = None
        self._error: RpcError | None = None

    @property
    def done(self) -> bool:
        """True once the turn has settled."""
        return self._settled is None

    @property
    def error(self) -> RpcError | None:
        """The error the turn settled with (None while in flight or when it succeeded)."""
        return self._error

    async def wait(self) -> R:
        """Wait for the outcome: the result, or the turn's error raised (a fresh copy per
        waiter). Cancelling the wait leaves the turn running."""
        await self.settled()
        return self.outcome()

    async def settled(self) -> None:
        """Wait until the turn has settled, whatever its outcome; never raises it."""
        event = self._settled
        if event is None:
            await trio.lowlevel.checkpoint()
        else:
            await event.wait()

    def outcome(self) -> R:
        """The result of a settled turn, or its error raised. RuntimeError while in flight."""
        if self._error is not None:
            raise _copy_error(self._error) from self._error
        if self._result is None:
            raise RuntimeError(f"turn {self.turn_id} has not settled")
        return self._result[0]

    def _succeed(self, result: R) -> None:
        self._result = (result,)
        self._settle()

    def _fail(self, error: RpcError) -> None:
        self._error = error
        self._settle()

    def _settle(self) -> None:
        event, self._settled = self._settled, None
        if event is not None:
            event.set()


def _copy_error(error: RpcError) -> RpcError:
    """The same error (class, code, message, data) as a new exception object, so waiters never
    share one instance's traceback and context."""
    cls = type(error)
    copy = cls.__new__(cls)
    RpcError.__init__(copy, error.message, None if error.data is None else dict(error.data))
    if "code" in vars(error):  # an RpcError rebuilt with a code no class has
        copy.code = error.code  # type: ignore[misc]
    return copy


class TurnRegistry(Generic[R]):
    """``turnId`` → `Turn` for one session. Turns run in `nursery`, which the caller owns and
    which must outlive every requester (the session manager's)."""

    def __init__(self, nursery: trio.Nursery, *, retain: int = DEFAULT_RETAINED_TURNS) -> None:
        if retain < 1:
            raise ValueError(f"retain must be at least 1, not {retain}")
        self._nursery = nursery
        self._retain = retain
        self._in_flight: dict[str, Turn[R]] = {}
        self._settled: OrderedDict[str, Turn[R]] = OrderedDict()

    def get(self, turn_id: str) -> Turn[R] | None:
        """The turn known by `turn_id`, in flight or settled and retained; None otherwise."""
        return self._in_flight.get(turn_id) or self._settled.get(turn_id)

    def start(self, turn_id: str, runner: Runner[R]) -> Turn[R]:
        """Run `runner` as turn `turn_id` in the registry's nursery and return its `Turn` at
        once. When `turn_id` is already known, `runner` is never called and the known turn
        comes back (attach to it, or read its stored outcome)."""
        known = self.get(turn_id)
        if known is not None:
            return known
        turn: Turn[R] = Turn(turn_id)
        self._in_flight[turn_id] = turn
        self._nursery.start_soon(self._drive, turn, runner, name=f"turn {turn_id}")
        return turn

    async def wait(self, turn_id: str) -> R:
        """Wait for turn `turn_id`'s outcome (see `Turn.wait`). KeyError when it is unknown."""
        turn = self.get(turn_id)
        if turn is None:
            raise KeyError(turn_id)
        return await turn.wait()

    def in_flight(self) -> list[Turn[R]]:
        """The turns still running, oldest first (for a shutdown drain)."""
        return list(self._in_flight.values())

    async def _drive(self, turn: Turn[R], runner: Runner[R]) -> None:
        # Nothing may escape into the caller's nursery: that would cancel every other turn.
        try:
            result = await runner()
        except RpcError as exc:
            turn._fail(exc)
        except Exception:
            log.exception("turn failed unexpectedly", extra=fields(turn_id=turn.turn_id))
            turn._fail(InternalError("the turn failed unexpectedly"))
        else:
            turn._succeed(result)
        finally:
            if not turn.done:  # cancelled from outside: the daemon is shutting down
                turn._fail(InternalError("the turn was cancelled before it finished"))
            self._remember(turn)

    def _remember(self, turn: Turn[R]) -> None:
        del self._in_flight[turn.turn_id]
        self._settled[turn.turn_id] = turn
        while len(self._settled) > self._retain:
            self._settled.popitem(last=False)
