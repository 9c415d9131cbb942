"""Waiting on a ``session/compact`` as a person does: it says when it starts, shows that it is
waiting, and Ctrl-C aborts it.

A compaction is a model call: it takes as long as the model does, and then replaces the
history for good. So ``robotactl compact`` treats it as ``run`` treats a turn:

- when robotad reports it started (the ``compaction`` event ``started``, which the request
  subscribes the connection to), a line on stderr says so and that Ctrl-C aborts it; on a
  terminal a waiting line (`robotactl.waiting`) then counts the seconds until the reply;
- Ctrl-C asks robotad to abort it and waits until it has stopped (`robotactl.interrupts`): the
  request then fails with -32009 (`CompactionAborted`, the history untouched) and the command
  exits 4; a second Ctrl-C stops waiting at once (exit 4 too).

Nothing of this is shown under ``--json``: stdout carries only the result, stderr only an
error. Imported only by ``compact`` (it loads trio and msgspec).
"""

from __future__ import annotations

import time
from functools import partial
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from protocol.errors import RpcError
from protocol.events import EVENT_METHOD, Compaction
from protocol.methods import CompactResult
from robotactl.interrupts import abort_on_interrupt
from robotactl.waiting import QUIET_BEFORE, TICK, WaitingLine

if TYPE_CHECKING:
    from protocol.peer import JsonRpcPeer
    from robotactl.render import Output

__all__ = ["CompactionView", "compact_following"]

#: What is waited for, as the waiting line and the abort notice name it.
WHAT = "the compaction"


class CompactionView:
    """What a person sees of one manual compaction: the notification callback of the
    connection (`__call__`), and the lines it leads to."""

    def __init__(self, output: Output, session_id: str) -> None:
        self.output = output
        self.session_id = session_id
        #: `time.monotonic()` when the compaction started; None before.
        self.started_at: float | None = None
        self._waiting = WaitingLine.for_terminal(output)

    def __call__(self, method: str, params: msgspec.Raw) -> None:
        if method != EVENT_METHOD or self.started_at is not None:
            return
        try:
            event = msgspec.json.decode(params, type=Compaction)
        except msgspec.DecodeError:
            return  # another event of the session
        if event.trigger == "manual" and event.phase == "started":
            self.started_at = time.monotonic()
            self.say(f"summarising the history of {self.session_id} (Ctrl-C aborts)")

    def say(self, text: str, *styles: str) -> None:
        """A line on stderr (none under ``--json``), after clearing the waiting line."""
        if self.output.json_mode:
            return
        self.clear_waiting()
        self.output.side(text, *styles)

    def show_waiting(self) -> None:
        if self._waiting is not None and self.started_at is not None:
            quiet = time.monotonic() - self.started_at
            if quiet >= QUIET_BEFORE:
                self._waiting.draw(quiet, "the summary")

    def clear_waiting(self) -> None:
        if self._waiting is not None:
            self._waiting.clear()


async def compact_following(
    peer: JsonRpcPeer, view: CompactionView, params: dict[str, Any]
) -> CompactResult:
    """Send ``session/compact`` with `params` and wait for its result, showing `view` and
    aborting on Ctrl-C meanwhile. Re-raises the request's `RpcError` (`CompactionAborted`
    after an abort); raises `robotactl.interrupts.StoppedWaiting` on a second Ctrl-C. `view`
    must be the connection's notification callback."""
    result: CompactResult | None = None
    failure: RpcError | None = None
    try:
        async with trio.open_nursery() as nursery:
            # Listening before the request goes out: a Ctrl-C right after robotad says it
            # started is an abort, never the interpreter's KeyboardInterrupt.
            await nursery.start(
                partial(abort_on_interrupt, what=WHAT, say=view.say), peer, view.session_id
            )
            nursery.start_soon(_show_waiting, view)
            try:
                result = await peer.request("session/compact", params, result_type=CompactResult)
            except RpcError as exc:
                failure = exc
            nursery.cancel_scope.cancel()
    finally:
        view.clear_waiting()
    if failure is not None:
        raise failure
    assert result is not None
    return result


async def _show_waiting(view: CompactionView) -> None:
    """Redraw the waiting line every `TICK`; cancelled when the reply is in."""
    while True:
        await trio.sleep(TICK)
        view.show_waiting()
