"""Sample journal records of every kind, for the journal tests."""

from __future__ import annotations

from datetime import UTC, datetime

from protocol.shapes import Message, ToolCall
from robotad.storage.journal import (
    CompactionRecord,
    EffectFinishedRecord,
    EffectStartedRecord,
    FinishedRecord,
    JournalRecord,
    ReplyRecord,
    RequestRecord,
    ResponseRecord,
    StartedRecord,
)

SESSION = "s-journal"
FIXED_TIME = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)


def started(execution_id: str, *, session_id: str = SESSION) -> StartedRecord:
    return StartedRecord(
        id=f"{execution_id}:started",
        execution_id=execution_id,
        turn_id="t-1",
        session_id=session_id,
        cwd="/work/project",
        provider="scripted",
        model="echo",
        user_message_id="m-user",
    )


def request(execution_id: str, request_id: str, *, path: str = "a.txt") -> RequestRecord:
    return RequestRecord(
        id=f"{execution_id}:request:{request_id}",
        execution_id=execution_id,
        request_id=request_id,
        call_id=f"call-{request_id}",
        tool="Write",
        arguments={"file_path": path, "content": "x"},
        reason="writing needs approval",
    )


def response(execution_id: str, request_id: str, response_id: str, approved: bool) -> JournalRecord:
    return ResponseRecord(
        id=f"{execution_id}:response:{response_id}",
        execution_id=execution_id,
        request_id=request_id,
        response_id=response_id,
        approved=approved,
    )


def every_kind(execution_id: str) -> list[JournalRecord]:
    """One record of each kind, in a plausible order, with unique ids."""
    call = ToolCall("call-1", "Write", {"file_path": "a.txt", "content": "x"})
    reply = Message.assistant("writing", [call])
    result = Message.tool("call-1", "Write", "wrote a.txt", ok=True)
    summary = Message.user("summary of the conversation")
    return [
        started(execution_id),
        ReplyRecord(id=f"{execution_id}:reply:1", execution_id=execution_id, message=reply),
        request(execution_id, "r-1"),
        response(execution_id, "r-1", "resp-1", True),
        EffectStartedRecord(
            id=f"{execution_id}:effect_started:call-1", execution_id=execution_id, call_id="call-1"
        ),
        EffectFinishedRecord(
            id=f"{execution_id}:effect_finished:call-1",
            execution_id=execution_id,
            call_id="call-1",
            message=result,
        ),
        CompactionRecord(
            id=f"{execution_id}:compaction:1",
            execution_id=execution_id,
            message=summary,
            trigger="auto",
        ),
        FinishedRecord(
            id=f"{execution_id}:finished", execution_id=execution_id, status="completed"
        ),
    ]


def bulky(execution_id: str, number: int, size: int) -> ReplyRecord:
    """A reply record of roughly `size` bytes (writes span many pages); its content depends on
    its arguments only."""
    content = f"{number}:" + "z" * size
    message = Message(f"m-{number}", "assistant", content, "complete", FIXED_TIME)
    return ReplyRecord(
        id=f"{execution_id}:reply:{number}", execution_id=execution_id, message=message
    )
