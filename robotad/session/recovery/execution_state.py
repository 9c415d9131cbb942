"""One recoverable execution's state, and the journal writes that make it durable.

An `Execution` is what a journaled turn knows about itself: its ids, the approval requests it
saved, the answers it got, which tool effects started and finished. It is rebuilt from the
journal after a restart (`Execution.from_records`), so everything here is derived from records;
one that neither waits nor runs is settled from them too (`Execution.settle_from`), its end mark
or — when a stop of robotad came before that mark was durable — its last reply telling how it
ended.

`JournalBarrier` is the execution's `CommitBarrier`: a reply is journaled before it enters
history, a tool result (``effect_finished``) before it is committed, compaction's summary before
it replaces history, and ``effect_started`` right before a body is admitted (G-096). A failed
write raises and the result never enters history (G-097). Each is durable, but for the one
line recovery can never use: a plain turn's answer, staged (`_recoverable_reply`).

`ParkingApprover` answers "ask" in a recoverable run: a call a person already approved is
admitted — after the current rules and hooks re-checked it (G-081) — only when its request
showed that very action: the same tool, effective arguments and reason for asking. Any other
call, or the same call whose re-check now asks for another reason (its file became a link to a
persistence path), gets a new request, journaled durably, and parks (G-075): the person
answers what is true now. Tool-call ids are unique within the history (the agent loop renames
a repeated one), so a request, an answer and an effect name one call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from msgspec import UNSET

from protocol.methods import ApprovalResponse
from protocol.shapes import ApprovalRequest, Message, ToolCall, TurnCompleted, TurnWaiting, new_id
from robotad.agent.gate import Admission, Admit, Park, Refuse
from robotad.agent.loop import open_calls
from robotad.storage.journal import (
    CompactionRecord,
    EffectFinishedRecord,
    EffectStartedRecord,
    ExecutionJournal,
    FinishedRecord,
    JournalRecord,
    ReplyRecord,
    RequestRecord,
    ResponseRecord,
    StartedRecord,
)

__all__ = ["Execution", "JournalBarrier", "ParkingApprover", "StaleAnswer", "journaled_after"]

State = Literal["running", "pending", "finished", "abandoned"]
#: How an execution ended: as its end mark says, or "stopped" — a stop of robotad cut it off
#: after its rounds settled, before its next reply, and nothing of it waits (`settle_from`).
Ending = Literal["completed", "failed", "aborted", "abandoned", "stopped"]


@dataclass(eq=False)
class Execution:
    """One recoverable execution. `result` is its latest TurnResult (for redelivery)."""

    execution_id: str
    turn_id: str
    journal: ExecutionJournal
    started: StartedRecord | None = None
    requests: dict[str, RequestRecord] = field(default_factory=dict)
    responses: dict[str, ResponseRecord] = field(default_factory=dict)
    replies: set[str] = field(default_factory=set)
    effects_started: set[str] = field(default_factory=set)
    effects_finished: dict[str, Message] = field(default_factory=dict)
    result: TurnCompleted | TurnWaiting | None = None
    state: State = "running"
    #: How a finished execution ended, when that is known.
    ending: Ending | None = None

    @classmethod
    def from_records(
        cls, execution_id: str, journal: ExecutionJournal, records: Sequence[JournalRecord]
    ) -> Execution | None:
        """The execution the records describe; None without a ``started`` record."""
        started = next((record for record in records if isinstance(record, StartedRecord)), None)
        if started is None:
            return None
        execution = cls(execution_id, started.turn_id, journal, started)
        for record in records:
            if isinstance(record, RequestRecord):
                execution.requests[record.request_id] = record
            elif isinstance(record, ResponseRecord):
                execution.responses[record.request_id] = record
            elif isinstance(record, ReplyRecord):
                execution.replies.add(record.message.id)
            elif isinstance(record, EffectStartedRecord):
                execution.effects_started.add(record.call_id)
            elif isinstance(record, EffectFinishedRecord):
                execution.effects_finished[record.call_id] = record.message
            elif isinstance(record, FinishedRecord):
                execution.state = "finished"
                execution.ending = record.status
        return execution

    # -- derived views ----------------------------------------------------------------------

    def round_limit(self, session_limit: int | None) -> int | None:
        """The turn's round limit (None: none), as its ``started`` record holds it — the
        limit it started with, `session/run`'s or the session's, in this process or after a
        restart — else `session_limit`: a journal written before the limit was recorded."""
        started = self.started
        if started is None or started.max_rounds is UNSET:
            return session_limit
        return started.max_rounds

    def record_id(self, kind: str, key: str) -> str:
        """A deterministic record id, so a retried append is recognised as the same record."""
        return f"{self.execution_id}:{kind}:{key}"

    def request_of(self, call_id: str) -> RequestRecord | None:
        """The call's latest request: the one that stands when a re-check asked again."""
        latest = None
        for request in self.requests.values():  # in journal order
            if request.call_id == call_id:
                latest = request
        return latest

    def requests_of(self, call_id: str) -> int:
        return sum(1 for request in self.requests.values() if request.call_id == call_id)

    def uncertain(self, history: Sequence[Message]) -> list[ToolCall]:
        """Open calls whose effect started but whose outcome was never recorded (G-094)."""
        return [
            call
            for call in open_calls(history)
            if call.id in self.effects_started and call.id not in self.effects_finished
        ]

    def waits(self, history: Sequence[Message]) -> list[RequestRecord]:
        """Unanswered requests of calls still open in history whose effect never started
        (a call's latest request only: an earlier one was answered, or superseded)."""
        latest = {request.call_id: request for request in self.requests.values()}
        return [
            request
            for call in open_calls(history)
            if (request := latest.get(call.id)) is not None
            and request.request_id not in self.responses
            and call.id not in self.effects_started
        ]

    def approval_requests(self, history: Sequence[Message]) -> list[ApprovalRequest]:
        return [
            ApprovalRequest(
                request_id=request.request_id,
                execution_id=self.execution_id,
                tool=request.tool,
                arguments=dict(request.arguments),
                reason=request.reason,
            )
            for request in self.waits(history)
        ]

    def denied_calls(self) -> dict[str, str]:
        """Calls a person denied (call id → reason): binding on every continuation (G-083)."""
        return {
            request.call_id: f"{request.tool} was denied by the user"
            for request in self.requests.values()
            if (answer := self.responses.get(request.request_id)) is not None
            and not answer.approved
        }

    # -- answers ----------------------------------------------------------------------------

    def fresh_answers(self, responses: Sequence[ApprovalResponse]) -> list[ApprovalResponse]:
        """The responses not recorded yet. An identical redelivery of a recorded one is
        skipped (G-084); `StaleAnswer` for an unknown request, an answer contradicting a
        recorded one, or a response id reused with other content (G-085, G-086)."""
        by_response_id = {recorded.response_id: recorded for recorded in self.responses.values()}
        fresh: dict[str, ApprovalResponse] = {}
        for answer in responses:
            if answer.request_id not in self.requests:
                raise StaleAnswer(answer.request_id, "unknown request")
            recorded = self.responses.get(answer.request_id)
            if recorded is not None or answer.response_id in by_response_id:
                same = recorded is not None and (recorded.response_id, recorded.approved) == (
                    answer.response_id,
                    answer.approved,
                )
                if not same:
                    raise StaleAnswer(answer.request_id, "the request was already answered")
                continue
            earlier = fresh.get(answer.request_id)
            if earlier is not None and earlier != answer:
                raise StaleAnswer(answer.request_id, "two different answers")
            if any(
                other.response_id == answer.response_id and other != answer
                for other in fresh.values()
            ):
                raise StaleAnswer(answer.request_id, "response id reused")
            fresh[answer.request_id] = answer
        return list(fresh.values())

    def settle_from(self, records: Sequence[JournalRecord], session_limit: int | None) -> None:
        """Settle an execution read back from its `records` that neither waits nor runs any
        more: finished, with the result its journal shows (G-084).

        With an end mark, a completed execution's last reply is its result (one that still
        asked for tools can only have ended the turn at its round limit); a failed or aborted
        one has none. Without an end mark a stop of robotad came between its last durable
        writes (the record's save and the mark, or the last reply and the save: a reply is
        journaled before it enters history, G-096, and recovery puts it back). When every call
        of its last reply has a journaled result, it completed if that reply called no tool —
        the turn's outcome was decided when the reply arrived — or if the turn made as many
        model calls as its round limit allows (`round_limit`: the one it started with, or
        `session_limit` for a journal that does not record it; nothing more could run);
        otherwise the stop cut it off on its way to its next reply ("stopped"), and there is
        no result to return."""
        self.state = "finished"
        self.result = None
        replies = [record.message for record in records if isinstance(record, ReplyRecord)]
        if not replies:
            return
        last = replies[-1]
        if self.ending is None and all(call.id in self.effects_finished for call in last.calls):
            limit = self.round_limit(session_limit)
            limited = limit is not None and len(replies) >= limit
            self.ending = "completed" if not last.calls or limited else "stopped"
        if self.ending == "completed":
            self.result = TurnCompleted(
                turn_id=self.turn_id,
                response=last.content or "",
                stop_reason="maxRounds" if last.calls else "end",
            )


class StaleAnswer(Exception):
    """A response that cannot apply to the execution; `reason` says why."""

    def __init__(self, request_id: str, reason: str) -> None:
        super().__init__(reason)
        self.request_id = request_id
        self.reason = reason


def journaled_after(records: Sequence[JournalRecord], anchor: str) -> list[Message]:
    """The replies and tool results journaled after the reply `anchor`, in order — what a
    crash kept out of the saved record. Stops at a compaction (never after a reply within one
    execution) rather than guess."""
    messages: list[Message] = []
    after = False
    for record in records:
        if isinstance(record, ReplyRecord) and record.message.id == anchor:
            after = True
        elif after and isinstance(record, ReplyRecord | EffectFinishedRecord):
            messages.append(record.message)
        elif after and isinstance(record, CompactionRecord):
            break
    return messages


class JournalBarrier:
    """Journals what an execution is about to change, before it changes (see module doc)."""

    def __init__(self, execution: Execution) -> None:
        self._execution = execution

    async def before_append(self, message: Message) -> None:
        execution = self._execution
        if message.role == "assistant":
            record: JournalRecord = ReplyRecord(
                id=execution.record_id("reply", message.id),
                execution_id=execution.execution_id,
                message=message,
            )
            await execution.journal.append(record, durable=_recoverable_reply(execution, message))
            execution.replies.add(message.id)
        elif message.role == "tool" and isinstance(message.tool_call_id, str):
            call_id = message.tool_call_id
            record = EffectFinishedRecord(
                id=execution.record_id("effect_finished", call_id),
                execution_id=execution.execution_id,
                call_id=call_id,
                message=message,
            )
            await execution.journal.append(record)
            execution.effects_finished[call_id] = message

    async def before_compaction(self, summary: Message, trigger: Literal["manual", "auto"]) -> None:
        execution = self._execution
        await execution.journal.append(
            CompactionRecord(
                id=execution.record_id("compaction", summary.id),
                execution_id=execution.execution_id,
                message=summary,
                trigger=trigger,
            )
        )

    async def before_effect(self, call: ToolCall) -> None:
        execution = self._execution
        await execution.journal.append(
            EffectStartedRecord(
                id=execution.record_id("effect_started", call.id),
                execution_id=execution.execution_id,
                call_id=call.id,
            )
        )
        execution.effects_started.add(call.id)


def _recoverable_reply(execution: Execution, message: Message) -> bool:
    """Whether a crash could need `message`'s journal line: a reply that calls tools, or one
    of an execution that has replied before (its open round may be in the saved record, and
    recovery puts back what the journal holds after it). A first reply that calls nothing —
    a plain turn's answer — can never be put back: recovery starts from an open round of the
    saved history and there is none, so its line is written (before history changes, G-096)
    but not synced, and the turn's one durable write is the record's (decision 21)."""
    return bool(message.calls) or bool(execution.replies)


class ParkingApprover:
    """The approver of a recoverable run: a call runs on an approval of exactly what the
    person was shown; the rest park (module doc)."""

    def __init__(self, execution: Execution) -> None:
        self._execution = execution

    async def approve(
        self, call: ToolCall, arguments: dict[str, Any], reason: str, *, rules_reason: bool = True
    ) -> Admission:
        """`Admit` when the call's latest request shows this tool, these effective arguments
        and — when the re-check's reason is the rules' own — this reason, and was approved;
        `Refuse` when it was denied. Otherwise the person was never asked this — no request,
        or the call's arguments or the rules' reason changed since (a file that became a link
        to a persistence path asks for another reason) — and a new request is journaled; the
        call parks. A hook's or the classifier's words may differ on every check (a time, a
        count): they are not compared, or an approved call would ask again forever."""
        execution = self._execution
        request = execution.request_of(call.id)
        if request is not None and _shows(
            request, call, arguments, reason if rules_reason else None
        ):
            answer = execution.responses.get(request.request_id)
            if answer is None:
                return Park(reason)
            if answer.approved:
                return Admit(dict(arguments))
            return Refuse(f"{call.name} was denied by the user")
        asked = execution.requests_of(call.id)
        request = RequestRecord(
            id=execution.record_id("request", call.id if not asked else f"{call.id}:{asked}"),
            execution_id=execution.execution_id,
            request_id=new_id("req-"),
            call_id=call.id,
            tool=call.name,
            arguments=dict(arguments),
            reason=reason,
        )
        await execution.journal.append(request)
        execution.requests[request.request_id] = request
        return Park(reason)


def _shows(
    request: RequestRecord, call: ToolCall, arguments: dict[str, Any], reason: str | None
) -> bool:
    """Whether `request` showed the person exactly this action, and this reason for asking
    (unless `reason` is None: words that are not compared)."""
    shown = (request.tool, request.arguments) == (call.name, arguments)
    return shown and (reason is None or request.reason == reason)
