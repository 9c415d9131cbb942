"""``run``, ``approve``, ``deny`` and ``abort``: turns as a person drives them (PROTOCOL.md §9).

``run`` sends a prompt and streams the turn (see `robotactl.turn_stream`); ``approve`` and
``deny`` answer a waiting turn's requests and stream the rest of it the same way. Whichever
started it, a turn that stops waiting for approval is then handled alike (`conduct`):

- on a terminal (stdin and stderr are TTYs) each request is asked ``y/N`` and the turn resumes
  with the answers, until it completes;
- otherwise each request id is printed with its tool and arguments and the command exits 3,
  leaving the turn parked in robotad for ``robotactl approve``/``deny`` (from any terminal,
  any time later: approvals are checkpointed).

Exit statuses: 0 completed, 1 error, 3 waiting for approval, 4 aborted (Ctrl-C while
streaming sends ``session/abort`` once and waits for the turn to stop). With ``--json``,
stdout carries only the final ``TurnResult`` (the completed one, or the waiting one before
exit 3); model text is not streamed.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from robotactl.cli import (
    ClientOptions,
    CommandFailed,
    RpcFailed,
    TurnAbortedFailed,
    call_daemon,
    run_with_daemon,
)
from robotactl.exit_codes import ExitCode
from robotactl.sessions import resolve_session, resolve_session_streaming, session_option

if TYPE_CHECKING:
    from protocol.blocking_client import BlockingClient
    from protocol.methods import RunResult
    from protocol.peer import JsonRpcPeer
    from protocol.shapes import ApprovalRequest
    from robotactl.turn_stream import TurnView

__all__ = ["TurnWasAborted", "abort", "approve", "conduct", "deny", "read_prompt", "run"]

#: Starts (or resumes) a turn on the resolved session id; returns the request's result.
TurnStart = Callable[["JsonRpcPeer", str], Awaitable["RunResult"]]


class TurnWasAborted(CommandFailed):
    """The turn ended aborted (-32006): exit 4."""

    exit_code = ExitCode.ABORTED

    def __init__(self, session_id: str | None, *, text_received: bool = True) -> None:
        where = f" in session {session_id}" if session_id else ""
        if text_received:
            said = "its partial reply stays in the history"
        else:
            said = "it was stopped before the model sent any text"
        super().__init__(f"the turn{where} was aborted; {said}")
        self.session_id = session_id

    def document(self) -> dict[str, Any]:
        """As ``--json`` prints it: with the code every other aborted turn carries (-32006)."""
        data = {"sessionId": self.session_id} if self.session_id else None
        error: dict[str, Any] = {"code": -32006, "message": self.format_message()}
        if data:
            error["data"] = data
        return {"error": error}


def read_prompt(words: Sequence[str]) -> str:
    """The prompt: the words joined by spaces, or stdin for a lone ``-`` (its final newline
    dropped). An empty prompt is a usage error."""
    text = sys.stdin.read().rstrip("\n") if list(words) == ["-"] else " ".join(words)
    if not text.strip():
        raise click.UsageError("the prompt is empty")
    return text


@click.command(short_help="Send a prompt; stream the reply, asking for approvals.")
@session_option
@click.option(
    "--turn-id",
    metavar="ID",
    callback=lambda ctx, param, value: _non_empty(value, ctx, param),
    help="Idempotency key: a retry with the same id attaches to that turn (or returns its "
    "result) instead of starting another.",
)
@click.option(
    "--max-rounds",
    type=click.IntRange(min=1),
    metavar="N",
    help="Stop the turn after N model calls (its tool calls all answered) instead of the "
    "session's round limit.",
)
@click.argument("prompt", nargs=-1, required=True)
@click.pass_obj
def run(
    options: ClientOptions,
    session: str | None,
    turn_id: str | None,
    max_rounds: int | None,
    prompt: Sequence[str],
) -> None:
    """Send PROMPT to the session and stream the reply as it comes (`-` reads stdin).

    Tool calls and permission decisions appear as dim lines on stderr. When a tool needs
    approval: on a terminal you are asked y/N for each request; otherwise each request id is
    printed (with tool and arguments) and robotactl exits 3 — answer later with
    `robotactl approve` or `robotactl deny`. Ctrl-C aborts the turn (exit 4); at a y/N
    question it leaves the turn waiting for approval instead (exit 3).

    With --json, prints only the final TurnResult object.
    """
    from protocol.methods import RunResult

    text = read_prompt(prompt)
    turn = turn_id or uuid.uuid4().hex

    async def start(peer: JsonRpcPeer, session_id: str) -> RunResult:
        params: dict[str, Any] = {"sessionId": session_id, "prompt": text, "turnId": turn}
        if max_rounds is not None:
            params["maxRounds"] = max_rounds
        result: RunResult = await peer.request("session/run", params, result_type=RunResult)
        return result

    conduct(options, session, start, turn_id=turn, replay=turn_id is not None)


@click.command(short_help="Approve pending tool calls (all, or the ids given); continue.")
@session_option
@click.argument("request_ids", nargs=-1, metavar="[REQUEST_ID]...")
@click.pass_obj
def approve(options: ClientOptions, session: str | None, request_ids: Sequence[str]) -> None:
    """Approve the waiting turn's requests — the REQUEST_IDs given, or all of them — and
    stream the rest of the turn like `run` does. An approval allows that exact action once.

    With --json, prints only the final TurnResult object.
    """
    _answer(options, session, request_ids, approved=True)


@click.command(short_help="Deny pending tool calls (all, or the ids given); continue.")
@session_option
@click.argument("request_ids", nargs=-1, metavar="[REQUEST_ID]...")
@click.pass_obj
def deny(options: ClientOptions, session: str | None, request_ids: Sequence[str]) -> None:
    """Deny the waiting turn's requests — the REQUEST_IDs given, or all of them — and stream
    the rest of the turn like `run` does (the model is told each call was denied).

    With --json, prints only the final TurnResult object.
    """
    _answer(options, session, request_ids, approved=False)


def _answer(
    options: ClientOptions, session: str | None, request_ids: Sequence[str], *, approved: bool
) -> None:
    from protocol.methods import PendingResult, RunResult
    from robotactl.approvals import responses
    from robotactl.formatting import format_call

    verb = "approving" if approved else "denying"

    async def start(peer: JsonRpcPeer, session_id: str) -> RunResult:
        pending = (
            await peer.request(
                "session/pending", {"sessionId": session_id}, result_type=PendingResult
            )
        ).pending
        if pending is None:
            message = f"nothing in session {session_id} is waiting for approval"
            if session is None:  # the folder's latest session: another one here may wait
                others = await _waiting_here(peer, session_id)
                if others:
                    message += (
                        f"; in this folder {', '.join(others)} "
                        f"{'waits' if len(others) == 1 else 'wait'}: robotactl approve -s "
                        f"{others[0]}"
                    )
            raise CommandFailed(message)
        if isinstance(pending.uncertain, list) and pending.uncertain:
            # What robotad answers a resume here (-32015), said without asking it to.
            raise RpcFailed(
                -32015,
                f"session {session_id} stopped while {', '.join(pending.uncertain)} ran, so "
                "its outcome is unknown and it cannot be approved or denied",
                {
                    "sessionId": session_id,
                    "executionId": pending.execution_id,
                    "calls": list(pending.uncertain),
                },
                hint=f"check its effect, then `robotactl abandon -s {session_id}`",
            )
        chosen = select_requests(pending.requests, request_ids)
        if not pending.requests:
            # robotad stopped after the model's reply and before its request was on record
            # (going on asks, for the person to answer what they see), or after an answer was
            # on record and before its call started (going on runs it, checked again).
            options.output.notice(
                f"session {session_id} waits with no open approval request (robotad stopped "
                "while asking, or before an approved call started): going on"
            )
        for request in chosen:
            options.output.notice(f"{verb} {format_call(request.tool, request.arguments)}")
        params = {
            "sessionId": session_id,
            "executionId": pending.execution_id,
            "responses": responses(chosen, approved),
        }
        result: RunResult = await peer.request("session/resume", params, result_type=RunResult)
        return result

    conduct(options, session, start)


async def _waiting_here(peer: JsonRpcPeer, skip: str) -> list[str]:
    """The sessions of the current folder that wait for approval, newest first, but `skip`."""
    import os

    from protocol.methods import SessionList

    listing = await peer.request("session/list", {}, result_type=SessionList)
    here = os.getcwd()
    return [
        s.session_id
        for s in listing.sessions
        if s.waiting and s.cwd == here and s.session_id != skip
    ]


def select_requests(
    pending: Sequence[ApprovalRequest], request_ids: Sequence[str]
) -> list[ApprovalRequest]:
    """The pending requests named by `request_ids` (all of them when none is named), in the
    order given; an id that names no pending request fails the command, listing the ones
    that do."""
    if not request_ids:
        return list(pending)
    by_id = {request.request_id: request for request in pending}
    unknown = [rid for rid in dict.fromkeys(request_ids) if rid not in by_id]
    if unknown:
        known = ", ".join(by_id) or "none"
        raise CommandFailed(f"not pending: {', '.join(unknown)} (pending requests: {known})")
    return [by_id[rid] for rid in dict.fromkeys(request_ids)]


def conduct(
    options: ClientOptions,
    session: str | None,
    start: TurnStart,
    *,
    turn_id: str | None = None,
    replay: bool = False,
) -> None:
    """Stream the turn `start` begins; ask for approvals on a terminal or exit 3 without one;
    end with the completed turn (exit 0) or `TurnWasAborted` (exit 4). `replay`: the turn
    may be running already (a given ``--turn-id``): its buffered events are shown first."""
    import msgspec

    from protocol.shapes import TurnCompleted, TurnWaiting
    from robotactl.approvals import ask_person, can_prompt, report_waiting
    from robotactl.turn_stream import TurnView

    output = options.output
    from robotactl.waiting import WaitingLine

    view = TurnView(
        output, show_text=not output.json_mode, waiting=WaitingLine.for_terminal(output)
    )
    session_id, result = _stream(options, session, start, view, turn_id, replay=replay)
    while isinstance(result, TurnWaiting):
        view.end_line()
        if not can_prompt():
            report_waiting(result, session_id, output)
            raise click.exceptions.Exit(ExitCode.WAITING)
        answers = ask_person(result.requests, output, session_id)
        resume = _resumer(result.execution_id, answers.responses, answers.rules)
        session_id, result = _stream(options, session_id, resume, view, None)
    view.end_line()
    if isinstance(result, TurnCompleted) and result.stop_reason == "maxRounds":
        output.notice(
            "the turn stopped at its round limit (maxRounds): send another prompt to go on"
        )
    if output.json_mode:
        output.json(msgspec.to_builtins(result))
    elif isinstance(result, TurnCompleted) and (view.lost_events or not view.streamed):
        from robotactl.terminal_text import visible

        if view.lost_events and view.streamed:
            output.notice("the reply, whole:")
        # A retry that found its turn finished; or a reply shown with a gap (events lost).
        output.line(visible(result.response))


def _resumer(
    execution_id: str, answers: list[dict[str, Any]], rules: Sequence[tuple[str, str]] = ()
) -> TurnStart:
    """Resume with `answers`, after adding the allow `rules` (rule, scope) an "always" asked
    for, so the approval and every later matching call are admitted."""
    from protocol.methods import PermissionRules, RunResult

    async def resume(peer: JsonRpcPeer, session_id: str) -> RunResult:
        for rule, scope in rules:
            added = {"sessionId": session_id, "rule": rule, "kind": "allow", "scope": scope}
            await peer.request("session/addRule", added, result_type=PermissionRules)
        params = {"sessionId": session_id, "executionId": execution_id, "responses": answers}
        result: RunResult = await peer.request("session/resume", params, result_type=RunResult)
        return result

    return resume


def _stream(
    options: ClientOptions,
    session: str | None,
    start: TurnStart,
    view: TurnView,
    turn_id: str | None,
    *,
    replay: bool = False,
) -> tuple[str, RunResult]:
    """One connection: resolve the session, follow the turn `start` begins, return both."""
    from robotactl.turn_stream import EventRelay, follow_turn

    relay = EventRelay()
    resolved: list[str] = []

    async def body(peer: JsonRpcPeer) -> RunResult:
        session_id = await resolve_session_streaming(peer, session)
        resolved.append(session_id)
        return await follow_turn(
            peer,
            relay,
            session_id,
            lambda: start(peer, session_id),
            view,
            turn_id=turn_id,
            replay=replay,
        )

    try:
        result = run_with_daemon(options, body, on_notification=relay)
    except TurnAbortedFailed:
        view.end_line()
        raise TurnWasAborted(
            resolved[0] if resolved else session, text_received=view.received_text
        ) from None
    except BaseException:
        view.end_line()  # the error gets a line of its own, not the end of streamed text
        raise
    return resolved[0], result


@click.command(short_help="Abort the running turn or compaction.")
@session_option
@click.pass_obj
def abort(options: ClientOptions, session: str | None) -> None:
    """Abort the session's running turn (or compaction). Its `run` then exits 4; the partial
    reply stays in the history. Says so, and exits 0, when nothing was running.

    With --json, prints the session/abort result ({"aborted": bool}).
    """
    from protocol.methods import AbortResult

    def stop(client: BlockingClient) -> tuple[str, AbortResult]:
        session_id = resolve_session(client, session)
        params = {"sessionId": session_id}
        return session_id, client.request("session/abort", params, result_type=AbortResult)

    session_id, result = call_daemon(options, stop)
    if options.output.json_mode:
        options.output.json({"aborted": result.aborted})
    elif result.aborted:
        options.output.line(f"aborting the running turn of {session_id}")
    else:
        options.output.line(f"nothing is running in {session_id}")


def _non_empty(value: str | None, ctx: click.Context, param: click.Parameter) -> str | None:
    """`--turn-id` as given; an empty one is a usage error, never "no id" (a retry with an
    unset ``$TID`` would start a new turn each time)."""
    if value is not None and not value.strip():
        raise click.BadParameter("is empty: give the id of the turn to attach to", ctx, param)
    return value
