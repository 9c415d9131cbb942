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

`validate_log` and `cut_off` read the log as it is decoded (`decode_each`): each line is
checked and let go, and what stays is what the check needs — the history the mutations
rebuild, the ids of requests and calls open and closed, and the problems a report lists (those
past `PROBLEMS_LISTED` are only counted). ``session/log`` held the file, its lines and every
decoded entry at once: 707 MB for a log of 200,000 lines of 1 KB (architecture decision 55).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final, Literal, NamedTuple

import msgspec

from protocol.log_report import left_out_message
from protocol.shapes import Message
from protocol.validate import ValidationFailed, convert

from .session_log import (
    LogDecodeError,
    LogEntry,
    LogProblem,
    LogSource,
    UnresolvedLogEntry,
    decode_each,
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
    cut short is never called complete for a session that holds more, nor one that, past
    them, tells a message a second time (`_repeated`). A log with a bad line
    is reported by its bad lines alone. Read line by line (module doc)."""
    entries = 0
    bad = _Listing()
    coverage: _Coverage | None = _Coverage()
    try:
        for line, decoded in decode_each(source):
            if not isinstance(decoded, LogEntry):
                bad.add(decoded)
                coverage = None  # no gap is reported beside a bad line: let it go
            else:
                entries += 1
                if coverage is not None:
                    coverage.see(line, decoded)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        return LogReport(0, False, [LogProblem(message=f"the log cannot be read: {reason}")])
    if coverage is None:
        return LogReport(entries, False, bad.report())
    found = coverage.problems()
    if not found.count and history_ids is not None:
        for problem in _rebuilds(coverage.history, history_ids):
            found.add(problem)
    return LogReport(entries, not found.count, found.report())


#: Problems a report lists one by one; past them, one more says how many are left out.
PROBLEMS_LISTED: Final = 1000
#: How much of a problem's message, and of an event name read from a bad line, a report holds.
_MESSAGE_CHARS: Final = 1000
_EVENT_CHARS: Final = 100


class _Listing:
    """Problems as a report gives them: the first `PROBLEMS_LISTED`, each message and event
    name cut to a bounded length when added, then one saying how many more there are. Only
    the listed ones are kept; the others are counted. A log is a file anyone can edit: 200,000
    bad lines, or an event name of 50 MB, made a ``session/log`` answer over the largest
    message a client reads, so the client got no answer at all."""

    def __init__(self) -> None:
        self.listed: list[LogProblem] = []
        #: Every problem added, listed or not.
        self.count = 0

    def add(self, problem: LogProblem) -> None:
        self.count += 1
        if len(self.listed) < PROBLEMS_LISTED:
            self.listed.append(_bounded(problem))

    def report(self) -> list[LogProblem]:
        left_out = self.count - len(self.listed)
        if not left_out:
            return list(self.listed)
        return [*self.listed, LogProblem(message=left_out_message(left_out))]


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
    record right) — unless what it tells more repeats a message it told already (`_repeated`).
    """
    rebuilt = [message.id for message in history]
    if rebuilt[: len(history_ids)] == list(history_ids):
        return _repeated(rebuilt, len(history_ids))
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


def _repeated(rebuilt: list[str], held: int) -> list[LogProblem]:
    """A problem when a message the log rebuilds past the session's `held` ones has the id
    of one before it: every message robotad adds is new, so that one was logged twice (a
    recovery putting back what the log had already, architecture decision 57), and the log
    claims it happened twice. The session's own messages are not judged: a stored record
    loads as it is."""
    seen = set(rebuilt[:held])
    for position, message_id in enumerate(rebuilt[held:], start=held + 1):
        if message_id in seen:
            told = f"its message {position} is message {rebuilt.index(message_id) + 1} again"
            noun = "message" if held == 1 else "messages"
            what = f"the log rebuilds {len(rebuilt)}; {told} (id {message_id!r}), logged twice"
            return [LogProblem(message=f"the session holds {held} {noun}; {what}")]
        seen.add(message_id)
    return []


class _Openings:
    """What a log leaves open so far: provider requests without a response (or error) and
    tool calls without a result (or abandonment, or a ``recovered`` closing), by first line;
    calls parked on an approval (see the module doc) are not open. A request or call closed
    leaves `requests` or `calls` (the ids closed stay: a closing may come before its
    opening, and what is closed stays closed), so an approval looks at the open calls
    only, not at every call of the log."""

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
                self._answer([data["requestId"]])
        elif entry.event == "tool_call":
            self.calls.setdefault(data["callId"], line)
        elif entry.event == "tool_result":
            self._close([data["callId"]])
        elif entry.event == "execution_abandoned":
            self._close(data["callIds"])
        elif entry.event == "recovered":
            self._answer(data["requestIds"])
            self._close([call["callId"] for call in data["calls"]])
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

    def _answer(self, request_ids: Iterable[str]) -> None:
        for request_id in request_ids:
            self.answered.add(request_id)
            self.requests.pop(request_id, None)

    def _close(self, call_ids: Iterable[str]) -> None:
        for call_id in call_ids:
            self.closed.add(call_id)
            self.calls.pop(call_id, None)

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
    lines are skipped: `validate_log` reports them; sidecars are not read. Read line by
    line, as `validate_log` reads."""
    openings = _Openings()
    for line, decoded in decode_each(source, resolve_sidecars=False):
        if isinstance(decoded, LogEntry):
            openings.see(line, decoded)
    compaction = openings.compaction[1] if openings.compaction is not None else None
    return CutOff(list(openings.open_requests()), list(openings.open_calls()), compaction)


class _Coverage:
    """The coverage check of a log fed one entry at a time (`see`): its gaps, and the history
    its mutations rebuild. Of the gaps found on the way (a request whose history cannot be
    rebuilt, a mutation that cannot apply) it keeps the first `PROBLEMS_LISTED` and counts
    the rest: no later one can be among the first a report lists."""

    def __init__(self) -> None:
        self.openings = _Openings()
        self.history: list[Message] = []
        self.gaps: list[LogProblem] = []
        self.gaps_left_out = 0

    def see(self, line: int, entry: LogEntry) -> None:
        data = entry.data
        self.openings.see(line, entry)
        problem = None
        if entry.event == "provider_request":
            problem = _unrebuildable(data.get("request"), self.history)
        elif entry.event == "history_mutation":
            problem = _apply(self.history, data, resolved=True)
        if problem is None:
            return
        if len(self.gaps) < PROBLEMS_LISTED:
            self.gaps.append(_gap(line, entry, problem))
        else:
            self.gaps_left_out += 1

    def problems(self) -> _Listing:
        """Every gap, found on the way or left open at the log's end, in line order (a gap
        found on the way first on a line that also leaves a request open), as sorting them
        all would give: each of the merged runs is in line order already (gaps as found,
        open requests and calls as first seen)."""
        found = _Listing()
        ordered = heapq.merge(
            self.gaps,
            self._open_requests(),
            self._open_calls(),
            self._open_compaction(),
            key=lambda problem: problem.get("line", 0),
        )
        for problem in ordered:
            found.add(problem)
        found.count += self.gaps_left_out
        return found

    def _open_requests(self) -> Iterator[LogProblem]:
        message = "provider request has no raw response or stream payload"
        for line in self.openings.open_requests().values():
            yield LogProblem(line=line, event="provider_request", message=message)

    def _open_calls(self) -> Iterator[LogProblem]:
        for line in self.openings.open_calls().values():
            yield LogProblem(line=line, event="tool_call", message="tool call has no result")

    def _open_compaction(self) -> Iterator[LogProblem]:
        if self.openings.compaction is not None:
            message = "compaction started and never completed, failed or was aborted"
            line = self.openings.compaction[0]
            yield LogProblem(line=line, event="context_compact", message=message)


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
