"""``abandon``: give up the execution a session has parked (PROTOCOL.md §5, §10.2).

The way out of a parked execution nobody wants to continue, and the only one out of an
execution whose approved tool was running when robotad stopped (its resume is -32015): nothing
runs; each open call closes as failed — a call whose outcome is unknown with a result starting
``outcome unknown:``, the others ``not run:`` — and the session takes new prompts again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from robotactl.cli import ClientOptions, CommandFailed, call_daemon
from robotactl.sessions import resolve_session, session_option

if TYPE_CHECKING:
    from protocol.blocking_client import BlockingClient
    from protocol.shapes import Pending

__all__ = ["abandon"]


@click.command(short_help="Give up the parked execution; its open tool calls close as failed.")
@session_option
@click.pass_obj
def abandon(options: ClientOptions, session: str | None) -> None:
    """Give up the session's parked execution: nothing runs, each of its open tool calls
    closes as failed (a call that was running when robotad stopped says its outcome is
    unknown), and the session takes new prompts again.

    With --json, prints {"sessionId", "executionId", "uncertain": [callId]}.
    """
    from protocol.methods import AbandonResult, PendingResult

    def give_up(client: BlockingClient) -> tuple[str, Pending]:
        session_id = resolve_session(client, session)
        params = {"sessionId": session_id}
        pending = client.request("session/pending", params, result_type=PendingResult).pending
        if pending is None:
            raise CommandFailed(f"nothing in session {session_id} is waiting to be abandoned")
        client.request(
            "session/abandon",
            {"sessionId": session_id, "executionId": pending.execution_id},
            result_type=AbandonResult,
        )
        return session_id, pending

    session_id, pending = call_daemon(options, give_up)
    uncertain = list(pending.uncertain) if isinstance(pending.uncertain, list) else []
    output = options.output
    if output.json_mode:
        output.json(
            {"sessionId": session_id, "executionId": pending.execution_id, "uncertain": uncertain}
        )
        return
    from robotactl.terminal_text import visible

    output.line(f"abandoned execution {visible(pending.execution_id)} of {session_id}")
    if uncertain:
        calls = visible(", ".join(uncertain))  # call ids a model may have chosen
        output.line(f"outcome unknown for {calls}: check its effect before running it again")
