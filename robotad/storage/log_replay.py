"""Rebuilding history from a session log, and reporting what a log does not cover.

`replay_history` applies the ``history_mutation`` events in order and returns the history they
build (G-145). It is all-or-nothing: an invalid mutation or a sidecar reference left unresolved
inside a message (G-162) raises `ReplayError` and no history is returned. `replay_log` reads a
source first: a missing log is an empty replay, a nonempty malformed one is an error (G-161).

`validate_log` is ``session/log``: ``{entries, complete, problems}``. It never reports complete
while any line is undecodable (G-151) or the log leaves something open (G-163): a provider
request with no raw response (or error) and a tool call with no result (or abandonment). A
provider request that names its messages by reference to the history (``history_prefix``) must
find that history rebuilt by the mutations before it — as many messages, the last one's id
matching — or the request cannot be rebuilt and that is a problem too (G-144).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from protocol.shapes import Message
from protocol.validate import ValidationFailed, convert

from .session_log import LogDecodeError, LogEntry, LogProblem, LogSource, decode_lines, decode_log
from .sidecars import contains_reference

__all__ = ["LogReport", "ReplayError", "replay_history", "replay_log", "validate_log"]


class ReplayError(LogDecodeError):
    """The log's history mutations cannot be replayed; `problems` says where."""


class LogReport(msgspec.Struct, frozen=True):
    """The ``session/log`` result: lines decoded, whether the log is complete, every problem."""

    entries: int
    complete: bool
    problems: list[LogProblem]


def replay_log(source: LogSource) -> list[Message]:
    """The history a log rebuilds; ``[]`` for a missing log. Raises `LogDecodeError` (a bad
    line) or `ReplayError` (a bad mutation); never returns a partial history."""
    return replay_history(decode_log(source))


def replay_history(entries: Iterable[LogEntry]) -> list[Message]:
    """Apply every ``history_mutation`` in order; `ReplayError` on the first one that cannot
    apply (there is no partial result to keep)."""
    history: list[Message] = []
    for position, entry in enumerate(entries, start=1):
        if entry.event != "history_mutation":
            continue
        problem = _apply(history, entry.data)
        if problem is not None:
            raise ReplayError([LogProblem(line=position, event=entry.event, message=problem)])
    return history


def _apply(history: list[Message], data: dict[str, Any]) -> str | None:
    """Apply one mutation to `history` in place, or say why it cannot apply."""
    raw_messages = data.get("messages")
    if contains_reference(raw_messages):
        return "a message still holds an unresolved sidecar reference"
    try:
        messages = convert(raw_messages, list[Message])
    except ValidationFailed as exc:
        return f"messages do not decode: {exc}"
    op = data.get("op")
    if op == "append":
        history.extend(messages)
    elif op == "replace":
        history[:] = messages
    elif op == "set":
        index = data.get("index")
        if type(index) is not int or not 0 <= index < len(history) or len(messages) != 1:
            return "a set mutation needs one message and an index inside history"
        history[index] = messages[0]
    else:
        return "unknown mutation operation"
    return None


def validate_log(source: LogSource) -> LogReport:
    """Decode every line and check coverage; a read failure is a problem, not an exception."""
    try:
        numbered, problems = decode_lines(source)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        return LogReport(0, False, [LogProblem(message=f"the log cannot be read: {reason}")])
    if not problems:
        problems = _coverage(numbered)
    return LogReport(len(numbered), not problems, problems)


def _coverage(numbered: list[tuple[int, LogEntry]]) -> list[LogProblem]:
    problems: list[LogProblem] = []
    requests: dict[str, int] = {}
    answered: set[str] = set()
    calls: dict[str, int] = {}
    closed: set[str] = set()
    history: list[Message] = []
    for line, entry in numbered:
        data = entry.data
        if entry.event == "provider_request":
            requests.setdefault(data["requestId"], line)
            problem = _unrebuildable(data.get("request"), history)
            if problem is not None:
                problems.append(_gap(line, entry, problem))
        elif entry.event == "provider_response":
            if contains_reference(data.get("normalized")):
                problems.append(_gap(line, entry, "normalized response holds a sidecar reference"))
            if "nativeRaw" in data or "raw" in data or "error" in data:
                answered.add(data["requestId"])
        elif entry.event == "tool_call":
            calls.setdefault(data["callId"], line)
        elif entry.event == "tool_result":
            closed.add(data["callId"])
        elif entry.event == "execution_abandoned":
            closed.update(data["callIds"])
        elif entry.event == "history_mutation":
            problem = _apply(history, data)
            if problem is not None:
                problems.append(_gap(line, entry, problem))
    for request_id, line in requests.items():
        if request_id not in answered:
            problems.append(
                LogProblem(
                    line=line,
                    event="provider_request",
                    message="provider request has no raw response or stream payload",
                )
            )
    for call_id, line in calls.items():
        if call_id not in closed:
            problems.append(
                LogProblem(line=line, event="tool_call", message="tool call has no result")
            )
    problems.sort(key=lambda p: p.get("line", 0))
    return problems


def _unrebuildable(request: Any, history: list[Message]) -> str | None:
    """Why a request's messages cannot be rebuilt from `history` (as replayed so far), if so."""
    if not isinstance(request, dict) or "history_prefix" not in request:
        return None
    prefix = request["history_prefix"]
    count = prefix.get("count") if isinstance(prefix, dict) else None
    if type(count) is not int or count < 0:
        return "provider request has a malformed history reference"
    last = prefix.get("last_message_id")
    if count > len(history) or (count and history[count - 1].id != last):
        return "provider request refers to history the log does not rebuild"
    return None


def _gap(line: int, entry: LogEntry, message: str) -> LogProblem:
    return LogProblem(line=line, event=entry.event, message=message)
