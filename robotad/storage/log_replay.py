"""Rebuilding history from a session log, and reporting what a log does not cover.

`replay_history` applies the ``history_mutation`` events in order and returns the history they
build (G-145). It is all-or-nothing: an invalid mutation or a sidecar reference left unresolved
inside a message (G-162) raises `ReplayError` and no history is returned. `replay_log` reads a
source first: a missing log is an empty replay, a nonempty malformed one is an error (G-161).

`validate_log` is ``session/log``: ``{entries, complete, problems}``. It never reports complete
while any line is undecodable (G-151) or the log leaves something open (G-163): a provider
request with no raw response (or error) and a tool call with no result (or abandonment, or a
``recovered`` entry robotad wrote on the start after a stop cut them off: `cut_off`), and a
compaction whose ``context_compact`` "started" has no end (completed, failed, aborted, or
that ``recovered`` entry's `compaction`). A call
still open when an ``approval_requested`` entry is logged is *parked* — it waits for a person
— until an ``approval_resolved`` of that execution: a log ending there is no gap, and no stop
cut such a call off (what ``daemon/log_recovery`` leaves open too). A
provider request that names its messages by reference to the history (``history_prefix``) must
find that history rebuilt by the mutations before it — as many messages, the last one's id
matching — or the request cannot be rebuilt and that is a problem too (G-144). A report
lists the first `PROBLEMS_LISTED` problems, each cut to a bounded length, and then how many
more there are (architecture decision 49).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final, Literal, NamedTuple

import msgspec

from protocol.shapes import Message
from protocol.validate import ValidationFailed, convert

from .session_log import (
    LogDecodeError,
    LogEntry,
    LogProblem,
    LogSource,
    UnresolvedLogEntry,
    decode_lines,
    decode_log,
)

__all__ = [
    "PROBLEMS_LISTED",
    "CutOff",
    "LogReport",
    "ReplayError",
    "cut_off",
    "replay_history",
    "replay_log",
    "validate_log",
]


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
        problem = _apply(history, entry.data, resolved=not isinstance(entry, UnresolvedLogEntry))
        if problem is not None:
            raise ReplayError([LogProblem(line=position, event=entry.event, message=problem)])
    return history


def _apply(history: list[Message], data: dict[str, Any], *, resolved: bool) -> str | None:
    """Apply one mutation to `history` in place, or say why it cannot apply. In a `resolved`
    payload every reference was followed: a value shaped like one is a message's content."""
    if not resolved:
        return "a message still holds an unresolved sidecar reference or literal wrapper"
    raw_messages = data.get("messages")
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


def validate_log(source: LogSource, history_ids: Sequence[str] | None = None) -> LogReport:
    """Decode every line and check coverage; a read failure is a problem, not an exception.
    With `history_ids` (the session's messages, in order), a log whose history mutations do
    not rebuild those messages (first) is incomplete too (G-145): a log removed, emptied or
    cut short is never called complete for a session that holds more."""
    try:
        numbered, problems = decode_lines(source)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        return LogReport(0, False, [LogProblem(message=f"the log cannot be read: {reason}")])
    if not problems:
        problems, history = _coverage(numbered)
        if not problems and history_ids is not None:
            problems = _rebuilds(history, history_ids)
    return LogReport(len(numbered), not problems, _listed(problems))


#: Problems a report lists one by one; past them, one more says how many are left out.
PROBLEMS_LISTED: Final = 1000
#: How much of a problem's message, and of an event name read from a bad line, a report holds.
_MESSAGE_CHARS: Final = 1000
_EVENT_CHARS: Final = 100


def _listed(problems: list[LogProblem]) -> list[LogProblem]:
    """`problems` as a report gives them: the first `PROBLEMS_LISTED`, each message and event
    name cut to a bounded length, then one saying how many more there are. A log is a file
    anyone can edit: 200,000 bad lines, or an event name of 50 MB, made a ``session/log``
    answer over the largest message a client reads, so the client got no answer at all."""
    listed = [_bounded(problem) for problem in problems[:PROBLEMS_LISTED]]
    left_out = len(problems) - len(listed)
    if left_out:
        noun = "problem" if left_out == 1 else "problems"
        listed.append(LogProblem(message=f"{left_out} more {noun} not listed"))
    return listed


def _bounded(problem: LogProblem) -> LogProblem:
    bounded = problem.copy()
    if "event" in bounded:
        bounded["event"] = _cut(bounded["event"], _EVENT_CHARS)
    if "message" in bounded:
        bounded["message"] = _cut(bounded["message"], _MESSAGE_CHARS)
    return bounded


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"


def _rebuilds(history: list[Message], history_ids: Sequence[str]) -> list[LogProblem]:
    """A problem when the replayed `history` does not begin with the session's messages
    `history_ids`. A log that tells more is no gap in the log: a turn logged while it was
    read, or one a crash cut off before its record was saved (loading the session puts the
    record right)."""
    rebuilt = [message.id for message in history]
    if rebuilt[: len(history_ids)] == list(history_ids):
        return []
    same = next(
        (i for i, (a, b) in enumerate(zip(rebuilt, history_ids, strict=False)) if a != b),
        min(len(rebuilt), len(history_ids)),
    )
    total = len(history_ids)
    if not rebuilt:
        what = "the log rebuilds none of them: its file was removed, emptied or replaced"
    else:
        what = f"the log rebuilds {len(rebuilt)}, the first {same} of them as the session has them"
    noun = "message" if total == 1 else "messages"
    return [LogProblem(message=f"the session holds {total} {noun}; {what}")]


class _Openings:
    """What a log leaves open so far: provider requests without a response (or error) and
    tool calls without a result (or abandonment, or a ``recovered`` closing), by first line;
    calls parked on an approval (see the module doc) are not open."""

    def __init__(self) -> None:
        self.requests: dict[str, int] = {}
        self.answered: set[str] = set()
        self.calls: dict[str, int] = {}
        self.closed: set[str] = set()
        #: Parked calls, by call id: the execution whose approval they wait for.
        self.parked: dict[str, str] = {}
        #: The compaction started and not ended yet: its line and trigger.
        self.compaction: tuple[int, Literal["manual", "auto"]] | None = None

    def see(self, line: int, entry: LogEntry) -> None:
        data = entry.data
        if entry.event == "provider_request":
            self.requests.setdefault(data["requestId"], line)
        elif entry.event == "provider_response":
            if "nativeRaw" in data or "raw" in data or "error" in data:
                self.answered.add(data["requestId"])
        elif entry.event == "tool_call":
            self.calls.setdefault(data["callId"], line)
        elif entry.event == "tool_result":
            self.closed.add(data["callId"])
        elif entry.event == "execution_abandoned":
            self.closed.update(data["callIds"])
        elif entry.event == "recovered":
            self.answered.update(data["requestIds"])
            self.closed.update(call["callId"] for call in data["calls"])
            if "compaction" in data:
                self.compaction = None
        elif entry.event == "context_compact":
            started = data["phase"] == "started"
            self.compaction = (line, data["trigger"]) if started else None
        elif entry.event == "approval_requested":
            waiting = [c for c in self.calls if c not in self.closed and c not in self.parked]
            self.parked.update(dict.fromkeys(waiting, data["executionId"]))
        elif entry.event == "approval_resolved":
            execution = data["executionId"]
            self.parked = {c: e for c, e in self.parked.items() if e != execution}

    def open_requests(self) -> dict[str, int]:
        return {r: line for r, line in self.requests.items() if r not in self.answered}

    def open_calls(self) -> dict[str, int]:
        return {
            c: line
            for c, line in self.calls.items()
            if c not in self.closed and c not in self.parked
        }


class CutOff(NamedTuple):
    """What a log leaves open (`cut_off`): provider request ids and tool call ids in log
    order, and the trigger of a compaction that never ended (None when there is none)."""

    requests: list[str]
    calls: list[str]
    compaction: Literal["manual", "auto"] | None


def cut_off(source: LogSource) -> CutOff:
    """What `source` leaves open (what a stop of robotad may have cut off). Undecodable
    lines are skipped: `validate_log` reports them; sidecars are not read."""
    numbered, _ = decode_lines(source, resolve_sidecars=False)
    openings = _Openings()
    for line, entry in numbered:
        openings.see(line, entry)
    compaction = openings.compaction[1] if openings.compaction is not None else None
    return CutOff(list(openings.open_requests()), list(openings.open_calls()), compaction)


def _coverage(numbered: list[tuple[int, LogEntry]]) -> tuple[list[LogProblem], list[Message]]:
    """The log's gaps, and the history its mutations rebuild."""
    problems: list[LogProblem] = []
    openings = _Openings()
    history: list[Message] = []
    for line, entry in numbered:
        data = entry.data
        openings.see(line, entry)
        if entry.event == "provider_request":
            problem = _unrebuildable(data.get("request"), history)
            if problem is not None:
                problems.append(_gap(line, entry, problem))
        elif entry.event == "history_mutation":
            problem = _apply(history, data, resolved=True)
            if problem is not None:
                problems.append(_gap(line, entry, problem))
    for line in openings.open_requests().values():
        message = "provider request has no raw response or stream payload"
        problems.append(LogProblem(line=line, event="provider_request", message=message))
    for line in openings.open_calls().values():
        problems.append(LogProblem(line=line, event="tool_call", message="tool call has no result"))
    if openings.compaction is not None:
        message = "compaction started and never completed, failed or was aborted"
        problems.append(
            LogProblem(line=openings.compaction[0], event="context_compact", message=message)
        )
    problems.sort(key=lambda p: p.get("line", 0))
    return problems, history


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
