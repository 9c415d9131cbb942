"""G-084 after a stop of robotad between two durable writes of an answered execution.

A resume that completes its turn makes three durable writes after the answer's: the turn's
last reply to the journal (before it enters history, G-096), the record (acknowledged means
saved), the execution's end mark to the journal. A stop between two of them leaves the journal
without its end mark; the client, whose reply died with robotad, sends the identical answer
again. It was told StaleResponse, as if its answer were not the one on record. These tests make
the disk state each stop leaves (the record and journal lines written before it, nothing after)
and load a new Session on it, as a restarted daemon does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.errors import ProviderFailed, StaleResponse
from protocol.methods import ApprovalResponse
from protocol.shapes import TurnCompleted, TurnWaiting
from robotad.agent.loop import open_calls
from robotad.session.ports import SessionSnapshot
from robotad.session.session import Session
from robotad.storage.journal import FinishedRecord, ReplyRecord
from robotad.storage.log_files import FileLogSource
from robotad.storage.log_replay import replay_log
from robotad.storage.session_log import LogEntry
from robotad.tools import builtin_tools
from tests.journal_fakes import MemoryJournal
from tests.session.session_harness import (
    LIMIT,
    FileLog,
    MemoryStore,
    Recorder,
    answer,
    kinds,
    new_session,
    scripted,
    write_call,
)

SESSION = "s-stop"


async def answered(
    workspace: Path,
    steps: list[dict[str, Any]],
    *,
    max_rounds: int | None = None,
    **options: Any,
) -> tuple[MemoryStore, MemoryJournal, TurnWaiting, ApprovalResponse, TurnCompleted]:
    """A session (`options`) whose first turn, run with `max_rounds`, parked on a Write and
    whose resume, approving it, completed: (its store, its journal, the wait, the answer, the
    resume's result)."""
    store, journal = MemoryStore(), MemoryJournal()
    session = new_session(
        workspace,
        scripted(steps),
        tools=builtin_tools(),
        store=store,
        session_id=SESSION,
        discard_settled_journals=True,
        **options,
    )
    with trio.fail_after(LIMIT):
        waiting = await session.run_recoverable(
            "write it", journal, turn_id="t-1", max_rounds=max_rounds
        )
        assert isinstance(waiting, TurnWaiting)
        response = answer(waiting.requests[0].request_id, True, "resp-1")
        done = await session.resume_recoverable(waiting.execution_id, journal, [response])
    assert isinstance(done, TurnCompleted)
    assert (workspace / "out.txt").read_text() == "hello"
    (workspace / "out.txt").unlink()  # a second run of the Write would bring it back
    return store, journal, waiting, response, done


async def left_by_a_stop(journal: MemoryJournal, execution_id: str, written: int) -> MemoryJournal:
    """The journal a stop leaves: the execution's first `written` lines, none after."""
    left = MemoryJournal()
    for record in (await journal.read(execution_id))[:written]:
        await left.append(record)
    return left


async def restarted(
    workspace: Path,
    record: SessionSnapshot,
    journal: MemoryJournal,
    log: FileLog | None = None,
    **options: Any,
) -> tuple[Session, Recorder, MemoryStore]:
    """A Session loaded from the saved `record` after a restart, its execution recovered;
    with `log`, logging to it and reading it back as the daemon does."""
    provider, store = scripted([{"text": "must never be asked"}]), MemoryStore()
    session = new_session(
        workspace,
        provider,
        tools=builtin_tools(),
        store=store,
        session_id=SESSION,
        history=record.messages,
        turn_count=record.turn_count,
        source="resume",
        discard_settled_journals=True,
        **options,
        **({"logger": FileLog(log.path.parent, SESSION).logger} if log is not None else {}),
    )
    with trio.fail_after(LIMIT):
        await session.recover(journal, FileLogSource(log.path) if log is not None else None)
    return session, provider, store


async def redeliveries(
    session: Session, journal: MemoryJournal, waiting: TurnWaiting, response: ApprovalResponse
) -> tuple[TurnCompleted | TurnWaiting, list[StaleResponse]]:
    """The identical answer's result, then the refusals of the same responseId with other
    content and of another answer to the answered request (G-085)."""
    xid = waiting.execution_id
    with trio.fail_after(LIMIT):
        again = await session.resume_recoverable(xid, journal, [response])
        refused = []
        for other in (
            ApprovalResponse(response.request_id, response.response_id, False),
            ApprovalResponse(response.request_id, "resp-2", True),
        ):
            with pytest.raises(StaleResponse) as stale:
                await session.resume_recoverable(xid, journal, [other])
            refused.append(stale.value)
    return again, refused


async def test_stopped_after_the_last_reply_was_journaled_before_the_save(
    workspace: Path,
) -> None:
    """G-084, G-085, G-096: stopped once the turn's last reply was journaled, before the record
    was saved. The restart puts the reply back from the journal, and the turn it completes
    counts; the identical answer gets that completed result and runs nothing; another answer
    is still StaleResponse."""
    steps = [{"toolCalls": [write_call()]}, {"text": "wrote"}]
    store, journal, waiting, response, done = await answered(workspace, steps)
    records = await journal.read(waiting.execution_id)
    assert kinds(records)[-2:] == ["reply", "finished"]
    left = await left_by_a_stop(journal, waiting.execution_id, len(records) - 1)
    parked = next(s for s in store.saved if open_calls(s.messages))  # the park's save
    session, provider, saved = await restarted(workspace, parked, left)
    assert session.get_pending_execution() is None
    assert [m.role for m in session.get_history()] == ["user", "assistant", "tool", "assistant"]
    assert (session.turn_count, saved.last.turn_count) == (1, 1)
    again, refused = await redeliveries(session, left, waiting, response)
    assert again == done == TurnCompleted(turn_id="t-1", response="wrote")
    assert [e.code for e in refused] == [-32011, -32011]
    assert provider.requests == []
    assert not (workspace / "out.txt").exists()


def completions(log: FileLog) -> list[str]:
    """The turns the log says completed, one per ``turn_completed`` "completed" line."""
    return [
        entry.data["turnId"]
        for entry in log.entries()
        if entry.event == "turn_completed" and entry.data["status"] == "completed"
    ]


async def test_a_turn_the_restart_completes_is_logged_completed_once(workspace: Path) -> None:
    """G-084, G-145: stopped once the turn's last reply was journaled, before its Stop hook,
    ``turn_completed`` line and save. The restart that completes the turn writes the line the
    turn would have (the log claimed less than happened), before its save; a restart again
    from the same record (a refused save, another stop before it) finds it and writes none."""
    log = FileLog(workspace.parent, SESSION)
    steps = [{"toolCalls": [write_call()]}, {"text": "wrote"}]
    store, journal, waiting, _, _ = await answered(workspace, steps, logger=log.logger)
    lines = log.path.read_bytes().splitlines(keepends=True)
    (end,) = [i for i, line in enumerate(lines) if b'"status":"completed"' in line]
    log.path.write_bytes(b"".join(lines[:end]))  # what a stop before the line leaves
    assert completions(log) == []
    records = await journal.read(waiting.execution_id)
    left = await left_by_a_stop(journal, waiting.execution_id, len(records) - 1)
    parked = next(s for s in store.saved if open_calls(s.messages))
    session, _, saved = await restarted(workspace, parked, left, log)
    assert (session.turn_count, saved.last.turn_count) == (1, 1)
    assert completions(log) == ["t-1"]
    assert log.entries()[-1].data == {"turnId": "t-1", "status": "completed"}
    again, _, _ = await restarted(workspace, parked, left, log)
    assert again.turn_count == 1
    assert completions(log) == ["t-1"]


async def test_a_turn_logged_completed_before_the_stop_is_not_logged_again(
    workspace: Path,
) -> None:
    """G-084: stopped while the completed turn's record was being saved, after its
    ``turn_completed`` line was written: the restart completes the turn from the journal and
    leaves the log's one line alone."""
    log = FileLog(workspace.parent, SESSION)
    steps = [{"toolCalls": [write_call()]}, {"text": "wrote"}]
    store, journal, waiting, _, _ = await answered(workspace, steps, logger=log.logger)
    assert completions(log) == ["t-1"]
    records = await journal.read(waiting.execution_id)
    left = await left_by_a_stop(journal, waiting.execution_id, len(records) - 1)
    parked = next(s for s in store.saved if open_calls(s.messages))
    session, _, _ = await restarted(workspace, parked, left, log)
    assert session.turn_count == 1
    assert completions(log) == ["t-1"]


def appended(log: FileLog) -> list[str]:
    """The ids of the messages the log's ``history_mutation`` appends added, in order."""
    return [
        message["id"]
        for entry in log.entries()
        if entry.event == "history_mutation" and entry.data["op"] == "append"
        for message in entry.data["messages"]
    ]


def stopped_before(log: FileLog, stop: str) -> None:
    """Leave the log of `answered`'s turn as a stop before `stop` leaves it: the lines before
    the result's ``history_mutation``, the last reply's, or the ``turn_completed`` line."""
    entries = log.entries()

    def adds(entry: LogEntry, role: str) -> bool:
        return entry.event == "history_mutation" and entry.data["messages"][-1]["role"] == role

    lines = {
        "result": [i for i, e in enumerate(entries) if adds(e, "tool")],
        "reply": [i for i, e in enumerate(entries) if adds(e, "assistant")][-1:],
        "completion": [
            i
            for i, e in enumerate(entries)
            if e.event == "turn_completed" and e.data["status"] == "completed"
        ],
    }
    (end,) = lines[stop]
    kept = log.path.read_bytes().splitlines(keepends=True)[:end]
    log.path.write_bytes(b"".join(kept))


@pytest.mark.parametrize(
    ("stop", "journaled", "roles", "completed"),
    [
        ("result", "effect_finished", ["user", "assistant", "tool"], []),
        ("reply", "reply", ["user", "assistant", "tool", "assistant"], ["t-1"]),
        ("completion", "reply", ["user", "assistant", "tool", "assistant"], ["t-1"]),
    ],
)
async def test_the_log_replays_to_the_history_after_every_restart(
    workspace: Path, stop: str, journaled: str, roles: list[str], completed: list[str]
) -> None:
    """G-145, G-084: stopped once the journal had the turn's tool result (`journaled` is its
    last record) and before the log had it, once the journal had the last reply and before
    the log had it, or once the log had both, before the ``turn_completed`` line. A restart
    puts back what the journal holds and logs only what the log lacks: the log replays to
    the history the restart made, each message appended once — after one restart and after
    a second from the same record and journal (the first one's save refused, or cut off by
    another stop). It logged the put-back again on each restart: six messages replayed
    where the session holds four, eight after the second."""
    log = FileLog(workspace.parent, SESSION)
    steps = [{"toolCalls": [write_call()]}, {"text": "wrote"}]
    store, journal, waiting, _, _ = await answered(workspace, steps, logger=log.logger)
    stopped_before(log, stop)
    records = await journal.read(waiting.execution_id)
    written = max(i for i, kind in enumerate(kinds(records)) if kind == journaled) + 1
    left = await left_by_a_stop(journal, waiting.execution_id, written)
    parked = next(s for s in store.saved if open_calls(s.messages))
    for _ in range(2):
        session, provider, _ = await restarted(workspace, parked, left, log)
        history = session.get_history()
        assert [m.role for m in history] == roles
        assert replay_log(FileLogSource(log.path)) == history
        assert appended(log) == [m.id for m in history]
        assert completions(log) == completed
        assert provider.requests == []


async def test_stopped_after_the_save_before_the_end_mark(workspace: Path) -> None:
    """G-084, G-085: stopped once the completed turn's record was saved, while its end mark
    was being written to the journal (the one fsync between the two). The identical answer
    gets the completed result the record holds, and runs nothing; another answer is still
    StaleResponse."""
    steps = [{"toolCalls": [write_call()]}, {"text": "wrote"}]
    store, journal, waiting, response, done = await answered(workspace, steps)
    records = await journal.read(waiting.execution_id)
    left = await left_by_a_stop(journal, waiting.execution_id, len(records) - 1)
    assert not any(isinstance(r, FinishedRecord) for r in await left.read(waiting.execution_id))
    session, provider, _ = await restarted(workspace, store.last, left)
    assert session.turn_count == store.last.turn_count == 1  # counted once, by the record
    again, refused = await redeliveries(session, left, waiting, response)
    assert again == done
    assert [e.code for e in refused] == [-32011, -32011]
    assert provider.requests == []
    assert not (workspace / "out.txt").exists()


async def test_a_turn_ended_by_its_round_limit_is_completed_after_the_stop(
    workspace: Path,
) -> None:
    """G-084, PROTOCOL §10.2: a turn whose round limit ended it after the approved call
    completes with ``stopReason: "maxRounds"``, its last reply still asking for a tool; stopped
    before its end mark, the identical answer gets that result, not StaleResponse."""
    steps = [{"text": "first I write", "toolCalls": [write_call()]}]
    store, journal, waiting, response, done = await answered(workspace, steps, round_cap=1)
    assert done == TurnCompleted(turn_id="t-1", response="first I write", stop_reason="maxRounds")
    records = await journal.read(waiting.execution_id)
    left = await left_by_a_stop(journal, waiting.execution_id, len(records) - 1)
    session, provider, _ = await restarted(workspace, store.last, left, round_cap=1)
    again, _ = await redeliveries(session, left, waiting, response)
    assert again == done
    assert provider.requests == []


async def test_stopped_before_a_second_wait_was_saved_gets_that_wait(workspace: Path) -> None:
    """G-084, G-075: the approved call ran and the model's next reply asked for another
    approval; stopped once that request was journaled, before the record holding the new
    round was saved. The restart puts the result and the reply back and the execution waits
    for the new request: the identical first answer gets that wait, and nothing runs twice."""
    steps = [{"toolCalls": [write_call()]}, {"toolCalls": [write_call("b.txt")]}]
    store, journal = MemoryStore(), MemoryJournal()
    session = new_session(
        workspace, scripted(steps), tools=builtin_tools(), store=store, session_id=SESSION
    )
    with trio.fail_after(LIMIT):
        waiting = await session.run_recoverable("write both", journal)
        assert isinstance(waiting, TurnWaiting)
        response = answer(waiting.requests[0].request_id, True, "resp-1")
        second = await session.resume_recoverable(waiting.execution_id, journal, [response])
    assert isinstance(second, TurnWaiting)
    (workspace / "out.txt").unlink()
    records = await journal.read(waiting.execution_id)
    assert kinds(records)[-1] == "request"  # all of it: the stop came at the record's save
    left = await left_by_a_stop(journal, waiting.execution_id, len(records))
    before = store.saved[-2]  # the record as the first park saved it
    (cut,) = open_calls(before.messages)
    assert cut.arguments["file_path"].endswith("out.txt")
    session, provider, _ = await restarted(workspace, before, left)
    pending = session.get_pending_execution()
    assert pending is not None
    assert pending.requests == second.requests
    with trio.fail_after(LIMIT):
        again = await session.resume_recoverable(waiting.execution_id, left, [response])
    assert again == second
    assert provider.requests == []
    assert not (workspace / "out.txt").exists()


async def test_stopped_on_the_way_to_the_next_reply_is_stale_and_says_why(
    workspace: Path,
) -> None:
    """G-084, G-086: stopped after the approved call's result was journaled, while the model
    was being asked for the next reply: the turn never got its last reply, so the execution
    has no TurnResult; nothing waits, the identical answer is StaleResponse saying robotad
    stopped before that reply, and nothing runs again."""
    steps = [{"toolCalls": [write_call()]}, {"text": "wrote"}]
    store, journal, waiting, response, _ = await answered(workspace, steps)
    records = await journal.read(waiting.execution_id)
    cut = max(i for i, r in enumerate(records) if isinstance(r, ReplyRecord))
    left = await left_by_a_stop(journal, waiting.execution_id, cut)
    assert kinds(await left.read(waiting.execution_id))[-1] == "effect_finished"
    parked = next(s for s in store.saved if open_calls(s.messages))
    session, provider, _ = await restarted(workspace, parked, left)
    assert session.get_pending_execution() is None
    assert session.turn_count == 0  # the turn never completed
    with trio.fail_after(LIMIT), pytest.raises(StaleResponse) as stale:
        await session.resume_recoverable(waiting.execution_id, left, [response])
    assert "robotad stopped before" in stale.value.message
    assert provider.requests == []
    assert not (workspace / "out.txt").exists()


async def test_a_redelivery_after_a_failed_continuation_is_not_waiting(workspace: Path) -> None:
    """G-084, G-086, G-093: a continuation that failed after its call ran ends the execution
    like a turn; the identical answer then came back as "waiting" for the request it had
    answered, though nothing waited. It is StaleResponse naming the failure, as after a
    restart, and nothing runs again."""
    steps = [{"toolCalls": [write_call()]}, {"error": "model gone"}]
    provider = scripted(steps)
    session = new_session(workspace, provider, tools=builtin_tools(), session_id=SESSION)
    journal = MemoryJournal()
    with trio.fail_after(LIMIT):
        waiting = await session.run_recoverable("write it", journal)
        assert isinstance(waiting, TurnWaiting)
        response = answer(waiting.requests[0].request_id, True, "resp-1")
        with pytest.raises(ProviderFailed):
            await session.resume_recoverable(waiting.execution_id, journal, [response])
        assert session.get_pending_execution() is None
        (workspace / "out.txt").unlink()
        with pytest.raises(StaleResponse) as stale:
            await session.resume_recoverable(waiting.execution_id, journal, [response])
    assert "failed" in stale.value.message
    assert len(provider.turn_requests) == 2
    assert not (workspace / "out.txt").exists()
