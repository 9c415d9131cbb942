"""Ctrl-C while robotad works on a session for this command (a turn, a compaction).

The work is robotad's, not this process's: leaving would stop nothing. So the first Ctrl-C
asks robotad to abort it (``session/abort``, once) and the command keeps waiting until it has
stopped — the request then fails with its "aborted" error (-32006 for a turn, -32009 for a
compaction), exit 4. A second Ctrl-C stops waiting at once (`StoppedWaiting`, exit 4); robotad
still finishes the abort on its own.

`abort_on_interrupt` is the task that does it, started (``nursery.start``) in the command's
nursery before the request goes out and cancelled once the request is done. It says what
happens through the caller's `say` (a line on stderr, none under ``--json``). Imported only
by the commands that wait on such work (it loads trio and msgspec).
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from protocol.errors import RpcError
from protocol.methods import AbortResult
from robotactl.cli import CommandFailed
from robotactl.exit_codes import ExitCode

if TYPE_CHECKING:
    from protocol.peer import JsonRpcPeer

__all__ = ["Say", "StoppedWaiting", "abort_on_interrupt"]

#: Shows one line of activity: its text, then the styles it is drawn in.
Say = Callable[..., None]


class StoppedWaiting(CommandFailed):
    """A second Ctrl-C: stop following; the daemon completes the abort already asked for."""

    exit_code = ExitCode.ABORTED

    def __init__(self, what: str = "the turn") -> None:
        super().__init__(f"stopped waiting; robotad is still aborting {what}")


async def abort_on_interrupt(
    peer: JsonRpcPeer,
    session_id: str,
    *,
    what: str,
    say: Say,
    before_stopping: Callable[[], None] | None = None,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """First Ctrl-C: ask robotad to abort `what` (once) and keep waiting; second: raise
    `StoppedWaiting` (after `before_stopping`, which ends a line left open). Runs until
    cancelled; started (``nursery.start``) once Ctrl-C is its to handle, so the caller sends
    its request only then."""
    with trio.open_signal_receiver(signal.SIGINT) as interrupts:
        task_status.started()
        asked = False
        async for _ in interrupts:
            if asked:
                if before_stopping is not None:
                    before_stopping()
                raise StoppedWaiting(what)
            asked = True
            say(f"^C aborting {what}… (Ctrl-C again to stop waiting)", "yellow")
            try:
                result = await peer.request(
                    "session/abort", {"sessionId": session_id}, result_type=AbortResult
                )
            except RpcError as exc:
                say(f"abort failed: {exc.message}", "red")
                continue
            if not result.aborted:
                say("nothing was running to abort", "yellow")
