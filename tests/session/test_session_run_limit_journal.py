"""A turn's round limit, journaled with its ``started`` record (PROTOCOL §10.2, decision 60).

The limit a turn starts with — `session/run`'s ``maxRounds``, else the session's, null for none
— is the ``started`` record's ``maxRounds``, and every continuation and settling of the turn
reads it from there, in the process that ran it or after a restart. A journal written before
the member existed has none: it is read as it always was, with the session's limit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
from msgspec import UNSET

from protocol.errors import StaleResponse
from protocol.shapes import TurnCompleted, TurnWaiting
from robotad.agent.loop import open_calls
from robotad.session.recovery.execution_state import Execution
from robotad.storage.journal import (
    FinishedRecord,
    JournalCorrupt,
    JournalRecord,
    StartedRecord,
    decode_journal,
)
from robotad.storage.journal_records import encode_journal_record
from tests.journal_fakes import MemoryJournal
from tests.session.session_harness import (
    LIMIT,
    MemoryStore,
    answer,
    write_call,
)
from tests.session.test_session_redelivery_after_stop import (
    SESSION,
    answered,
    redeliveries,
    restarted,
)

EXECUTION = "x-old"

#: A ``started`` line as robotad wrote it before the turn's limit was journaled.
OLD_STARTED = {
    "kind": "started",
    "id": f"{EXECUTION}:started:0",
    "executionId": EXECUTION,
    "timestamp": "2026-11-30T09:00:00Z",
    "turnId": "t-1",
    "sessionId": SESSION,
    "cwd": "/work/project",
    "provider": "scripted",
    "model": "echo",
    "userMessageId": "m-user",
}


def line(member: Mapping[str, object]) -> bytes:
    return json.dumps(member).encode() + b"\n"


def execution_of(records: list[JournalRecord]) -> Execution:
    execution = Execution.from_records(EXECUTION, MemoryJournal(), records)
    assert execution is not None
    return execution


# -- the record -------------------------------------------------------------------------------


def test_an_old_started_line_reads_with_the_sessions_limit() -> None:
    """A journal from before the member: decoded as it is (no member, not null), and the
    execution's limit is whatever the session's is."""
    (started,) = decode_journal(EXECUTION, line(OLD_STARTED))
    assert isinstance(started, StartedRecord)
    assert started.max_rounds is UNSET
    execution = execution_of([started])
    assert (execution.round_limit(4), execution.round_limit(None)) == (4, None)


@pytest.mark.parametrize(("recorded", "expected"), [(2, 2), (7, 7), (None, None)])
def test_a_recorded_limit_is_the_turns_whatever_the_sessions_is(
    recorded: int | None, expected: int | None
) -> None:
    """Written and read back, the recorded limit wins over the session's, below or above
    it; a recorded null is "no limit", not "the session's"."""
    (old,) = decode_journal(EXECUTION, line(OLD_STARTED))
    data = encode_journal_record(msgspec.structs.replace(old, max_rounds=recorded))
    assert json.loads(data)["maxRounds"] == recorded
    (started,) = decode_journal(EXECUTION, data)
    assert execution_of([started]).round_limit(5) == expected


def test_a_limit_below_one_is_a_located_journal_error() -> None:
    with pytest.raises(JournalCorrupt) as corrupt:
        decode_journal(EXECUTION, line({**OLD_STARTED, "maxRounds": 0}))
    assert corrupt.value.issues == [{"line": 1, "message": "$.maxRounds: expected >= 1"}]


# -- settling after a stop --------------------------------------------------------------------


async def answered_with_a_run_limit(
    workspace: Path, **options: Any
) -> tuple[MemoryStore, MemoryJournal, TurnWaiting, TurnCompleted]:
    """A session (`options`) whose first turn, run with ``max_rounds=1``, parked on a Write
    and whose resume, approving it, completed at that limit."""
    steps: list[dict[str, Any]] = [
        {"text": "first I write", "toolCalls": [write_call()]},
        {"text": "never asked"},
    ]
    store, journal, waiting, _, done = await answered(workspace, steps, max_rounds=1, **options)
    assert done == TurnCompleted(turn_id="t-1", response="first I write", stop_reason="maxRounds")
    return store, journal, waiting, done


async def left_without_the_mark(
    journal: MemoryJournal, execution_id: str, *, old: bool = False
) -> MemoryJournal:
    """The journal a stop before the end mark leaves; `old`: as robotad wrote it before the
    turn's limit was journaled."""
    left = MemoryJournal()
    for record in await journal.read(execution_id):
        if isinstance(record, FinishedRecord):
            continue
        if old and isinstance(record, StartedRecord):
            record = msgspec.structs.replace(record, max_rounds=UNSET)
        await left.append(record)
    return left


async def test_a_turn_its_run_limit_ended_is_completed_when_put_back_after_a_stop(
    workspace: Path,
) -> None:
    """Stopped after the approved Write's result was journaled, before the record was saved:
    the restart puts the result back, every round settled, and the turn made as many model
    calls as its run's limit (1) allows — in a session without a limit. It counts as
    completed, and the identical answer gets its result, ``stopReason: "maxRounds"``. Read with
    the session's limit it looked cut off: not counted, and the redelivery StaleResponse."""
    store, journal, waiting, done = await answered_with_a_run_limit(workspace)
    left = await left_without_the_mark(journal, waiting.execution_id)
    parked = next(s for s in store.saved if open_calls(s.messages))  # the park's save
    session, provider, saved = await restarted(workspace, parked, left)
    assert session.get_pending_execution() is None
    assert [m.role for m in session.get_history()] == ["user", "assistant", "tool"]
    assert (session.turn_count, saved.last.turn_count) == (1, 1)
    response = answer(waiting.requests[0].request_id, True, "resp-1")
    again, refused = await redeliveries(session, left, waiting, response)
    assert again == done
    assert [e.code for e in refused] == [-32011, -32011]
    assert provider.requests == []
    assert not (workspace / "out.txt").exists()


async def test_an_old_journal_is_settled_with_the_sessions_limit(workspace: Path) -> None:
    """The same stop, its journal as robotad wrote it before the turn's limit was journaled:
    read with the session's limit, as it always was — completed in a session limited to one
    round, cut off on its way to its next reply in a session without a limit."""
    store, journal, waiting, done = await answered_with_a_run_limit(workspace, round_cap=1)
    response = answer(waiting.requests[0].request_id, True, "resp-1")
    left = await left_without_the_mark(journal, waiting.execution_id, old=True)
    started = (await left.read(waiting.execution_id))[0]
    assert isinstance(started, StartedRecord)
    assert b"maxRounds" not in encode_journal_record(started)
    limited, _, _ = await restarted(workspace, store.last, left, round_cap=1)
    again, _ = await redeliveries(limited, left, waiting, response)
    assert again == done
    unlimited, _, _ = await restarted(workspace, store.last, left)
    with trio.fail_after(LIMIT), pytest.raises(StaleResponse) as stale:
        await unlimited.resume_recoverable(waiting.execution_id, left, [response])
    assert "robotad stopped before" in stale.value.message
