"""``robotactl show``: a session and its history, laid out for reading.

A header (id, working directory, provider and model, mode, sandbox, counts, context use, whether it
runs or waits, and for a fork "forked from X at M"), then one block per message: the role,
time and message id (what ``fork --at`` takes) on a line, the content indented below. User
and assistant text is shown whole; tool calls are one line each, ``→ Tool(args…)``; a tool
result is one shortened line after ``✓`` or ``✗``. ``--limit N`` shows the last N messages.

Everything a record holds may be a model's or someone else's (an imported artifact), so each
value is made visible (`robotactl.terminal_text`) before it is styled.

With ``--json`` it prints the ``session/history`` result (the same page of messages).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click

from robotactl.cli import ClientOptions, call_daemon
from robotactl.sessions import resolve_session, session_option
from robotactl.terminal_text import visible

if TYPE_CHECKING:
    from protocol.blocking_client import BlockingClient
    from protocol.methods import HistoryResult
    from protocol.shapes import Message, SessionInfo

__all__ = ["Fork", "header_lines", "message_lines", "show"]

#: Longest one-line rendering of a tool result.
RESULT_WIDTH = 100
#: ``style(text, *styles) -> text``: `robotactl.render.Output.style` for stdout.
Style = Callable[..., str]


class Fork:
    """Where a fork came from: the source session and the last message taken (if known)."""

    def __init__(self, source: str, message_id: str | None) -> None:
        self.source = source
        self.message_id = message_id

    def describe(self) -> str:
        at = f" at {self.message_id}" if self.message_id else ""
        return visible(f"forked from {self.source}{at}")


@click.command(short_help="Show a session's history, readably.")
@session_option
@click.option(
    "-n",
    "--limit",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Show only the last N messages.",
)
@click.pass_obj
def show(options: ClientOptions, session: str | None, limit: int | None) -> None:
    """Show the session's settings and its history: roles, text, tool calls and results.

    Each message's id is shown beside it (for `robotactl fork --at`). With --json, prints
    the session/history result.
    """
    from protocol.shapes import SessionInfo

    def read(client: BlockingClient) -> tuple[SessionInfo, HistoryResult, Fork | None]:
        session_id = resolve_session(client, session)
        ref = {"sessionId": session_id}
        info = client.request("session/get", ref, result_type=SessionInfo)
        offset = 0 if limit is None else max(0, info.message_count - limit)
        history = _history_from(client, session_id, offset, limit)
        fork = None if options.output.json_mode else _fork_of(client, session_id)
        return info, history, fork

    info, history, fork = call_daemon(options, read)
    output = options.output
    if output.json_mode:
        import msgspec

        output.json(msgspec.to_builtins(history))
        return
    for line in header_lines(info, fork, style=output.style):
        output.line(line)
    shown = len(history.messages)
    if shown < history.total:
        output.line(output.style(f"(the last {shown} of {history.total} messages)", "dim"))
    for message in history.messages:
        output.line()
        for line in message_lines(message, style=output.style, now=datetime.now(UTC)):
            output.line(line)


#: Messages asked for per ``session/history`` request: a long session's whole history can be
#: more than one message of the wire carries (16 MiB).
HISTORY_PAGE = 500


def _history_from(
    client: BlockingClient, session_id: str, offset: int, limit: int | None
) -> HistoryResult:
    """The history from `offset` (`limit` messages at most), read a page at a time and
    returned as one result."""
    from protocol.blocking_client import MalformedResponse
    from protocol.methods import HistoryResult
    from robotactl.cli import CommandFailed

    messages: list[Message] = []
    total = offset
    while True:
        want = HISTORY_PAGE if limit is None else min(HISTORY_PAGE, limit - len(messages))
        params = {"sessionId": session_id, "offset": offset + len(messages), "limit": want}
        try:
            page = client.request("session/history", params, result_type=HistoryResult)
        except MalformedResponse as exc:
            if "larger than" not in str(exc):
                raise
            first = offset + len(messages)
            raise CommandFailed(
                f"messages {first}–{first + want - 1} of session {session_id} are more than one "
                "reply of robotad carries (16 MiB): show fewer with --limit N, or read them "
                "one by one with `robotactl call session/history "
                f'\'{{"sessionId": "{session_id}", "offset": {first}, "limit": 1}}\'`'
            ) from None
        messages.extend(page.messages)
        total = page.total
        if not page.messages or offset + len(messages) >= total:
            break
        if limit is not None and len(messages) >= limit:
            break
    return HistoryResult(total=total, messages=messages)


def _fork_of(client: BlockingClient, session_id: str) -> Fork | None:
    """The fork origin of `session_id`: the source from ``session/list``, the message from
    the record itself (only a fork pays for reading it)."""
    from msgspec import UNSET

    from protocol.blocking_client import MalformedResponse
    from protocol.methods import ExportResult, SessionList

    listing = client.request("session/list", {}, result_type=SessionList)
    source = next((s.forked_from for s in listing.sessions if s.session_id == session_id), UNSET)
    if not isinstance(source, str):
        return None
    try:
        exported = client.request(
            "session/export", {"sessionId": session_id}, result_type=ExportResult
        )
    except MalformedResponse:  # a record too big for one message: the source alone is known
        return Fork(source, None)
    origin = exported.artifact.record.get("forkedFrom")
    message_id = origin.get("messageId") if isinstance(origin, dict) else None
    return Fork(source, message_id if isinstance(message_id, str) else None)


def header_lines(info: SessionInfo, fork: Fork | None, *, style: Style) -> list[str]:
    """The lines above the history."""
    from robotactl.formatting import format_call, format_context, home_relative

    context = info.context
    state = "running a turn" if info.running else ""
    if info.pending is not None:
        count = len(info.pending.requests)
        state = f"waiting for approval ({count} request{'s' if count != 1 else ''})"
        if count == 0:
            state = (
                "waiting, with no open approval request (robotad stopped while asking, or "
                "before an approved call started): "
                f"`robotactl approve -s {info.session_id}` goes on"
            )
        uncertain = info.pending.uncertain
        if isinstance(uncertain, list) and uncertain:
            state = (
                f"stopped while {visible(', '.join(uncertain))} ran: outcome unknown; check its "
                f"effect, then `robotactl abandon -s {info.session_id}`"
            )
    facts = [
        f"{info.message_count} message{'' if info.message_count == 1 else 's'}",
        f"{info.turn_count} turn{'' if info.turn_count == 1 else 's'}",
        "context "
        + format_context(context.used_tokens, context.max_tokens, context.used_percentage),
    ]
    settings = f"{info.provider}/{info.model}  mode {info.permission_mode}  sandbox {info.sandbox}"
    lines = [
        style(f"session {visible(info.session_id)}", "bold")
        + f"  {home_relative(info.cwd)}  {visible(settings)}",
        style(" · ".join(facts), "dim"),
    ]
    if state:
        lines.append(style(state, "yellow"))
    if info.pending is not None:
        lines.extend(
            f"  {visible(request.request_id)}  {format_call(request.tool, request.arguments)}"
            for request in info.pending.requests
        )
    if fork is not None:
        lines.append(style(fork.describe(), "cyan"))
    return lines


_ROLE_STYLES = {
    "user": ("bold", "cyan"),
    "assistant": ("bold", "green"),
    "system": ("dim",),
    "tool": ("dim",),
}


def message_lines(message: Message, *, style: Style, now: datetime) -> list[str]:
    """One message: a title line (role, time, id), then its content indented; every value
    made visible."""
    from robotactl.formatting import format_call, format_when, shorten

    role = message.role
    title: str = role
    if role == "tool":
        mark = "✓" if message.ok else "✗"
        name = message.name if isinstance(message.name, str) else "?"
        title = f"tool {visible(name)} {mark}"
    elif role == "user" and message.peer is not None:
        title = f"user (from session {visible(message.peer)})"
    if message.state == "interrupted":
        title += " (interrupted)"
    stamp = format_when(message.timestamp.isoformat(), now=now)
    lines = [
        style(title, *_ROLE_STYLES.get(role, ()))
        + style(f"  {stamp}  {visible(message.id)}", "dim")
    ]
    content = message.content or ""
    if role == "tool":
        if content:
            lines.append("  " + style(shorten(content, RESULT_WIDTH), "dim"))
    elif content:
        lines.extend(_indented(visible(content).splitlines()))
    for call in message.calls:
        lines.append("  " + style(f"→ {format_call(call.name, call.arguments)}", "dim"))
    return lines


def _indented(lines: Sequence[str]) -> list[str]:
    return [f"  {line}" if line else "" for line in lines]
