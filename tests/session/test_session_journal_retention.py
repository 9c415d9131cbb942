"""Journal retention when the host lets the session retire journals (robotad does:
``discard_settled_journals=True``): a long-lived session's journal stays bounded, yet nothing a
redelivery or a recovery needs is ever discarded (G-084, G-099)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from protocol.errors import StaleResponse, StorageFailed
from protocol.shapes import TurnCompleted, TurnWaiting
from robotad.session.recovery import recoverable
from robotad.session.recovery import retention as journal_retention
from robotad.session.session import Session
from robotad.storage.journal import JournalRecord, StartedRecord
from robotad.tools import builtin_tools
from tests.journal_fakes import MemoryJournal, of_kind
from tests.session.session_harness import (
    LIMIT,
    MemoryStore,
    answer,
    kinds,
    new_session,
    read_call,
    scripted,
    write_call,
)
from tests.session.test_session_guarantees_extra import BlockingJournal


def retiring(
    workspace: Path, steps: list[dict[str, Any]], store: MemoryStore | None = None, **kw: Any
) -> Session:
    return new_session(
        workspace,
        scripted(steps),
        tools=builtin_tools(),
        store=store or MemoryStore(),
        session_id="s-retire",
        discard_settled_journals=True,
        **kw,
    )


async def approve_one(session: Session, journal: MemoryJournal, turn: str) -> TurnWaiting:
    """Run a turn that waits for one approval and answer it; the waiting result."""
    waiting = await session.run_recoverable(f"write {turn}", journal, turn_id=turn)
    assert isinstance(waiting, TurnWaiting)
    done = await session.resume_recoverable(
        waiting.execution_id, journal, [answer(waiting.requests[0].request_id)]
    )
    assert isinstance(done, TurnCompleted)
    return waiting


async def test_a_turn_that_asked_nothing_leaves_no_journal_once_saved(workspace: Path) -> None:
    """A completed turn without approvals — text only, or with a tool the rules allow — has
    its journal discarded once the saved record holds its outcome; the library default keeps
    it, marked finished (the journal is the host's, G-099)."""
    steps: list[dict[str, Any]] = [
        {"text": "plain"},
        {"toolCalls": [read_call()]},
        {"text": "read it"},
    ]
    session = retiring(workspace, steps)
    journal = MemoryJournal()
    first = await session.run_recoverable("one", journal, turn_id="t-1")
    assert first == TurnCompleted(turn_id="t-1", response="plain")
    second = await session.run_recoverable("two", journal, turn_id="t-2")
    assert second == TurnCompleted(turn_id="t-2", response="read it")
    assert await journal.executions() == []

    keeping = new_session(workspace, scripted([{"text": "plain"}]), store=MemoryStore())
    kept = MemoryJournal()
    await keeping.run_recoverable("one", kept)
    (execution_id,) = await kept.executions()
    assert [type(r).__name__ for r in await kept.read(execution_id)][-1] == "FinishedRecord"


async def test_a_turn_whose_save_failed_keeps_its_journal(workspace: Path) -> None:
    """When the record could not be saved, the journal is the only durable account of the
    turn: it stays, marked finished, and the turn fails StorageFailed instead of claiming a
    completion nothing holds."""
    store = MemoryStore()
    session = retiring(workspace, [{"text": "plain"}], store=store)
    store.fail = True
    journal = MemoryJournal()
    with pytest.raises(StorageFailed):
        await session.run_recoverable("one", journal)
    (execution_id,) = await journal.executions()
    assert [type(r).__name__ for r in await journal.read(execution_id)][-1] == "FinishedRecord"


async def test_answered_executions_stay_redeliverable_within_the_window(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """G-084: an execution that had requests keeps its journal while it is among the
    `JOURNALS_KEPT` most recently settled — a redelivered answer returns its result, read back
    from the journal once the execution left the in-memory `SETTLED_KEPT` — and is discarded
    once pushed out; a redelivery to it is then StaleResponse, and runs nothing."""
    monkeypatch.setattr(journal_retention, "JOURNALS_KEPT", 2)
    monkeypatch.setattr(recoverable, "SETTLED_KEPT", 1)
    steps: list[dict[str, Any]] = []
    for name in ("a", "b", "c"):
        steps += [{"toolCalls": [write_call(f"out/{name}.txt")]}, {"text": f"wrote {name}"}]
    session = retiring(workspace, steps)
    journal = MemoryJournal()
    first = await approve_one(session, journal, "t-a")
    second = await approve_one(session, journal, "t-b")
    third = await approve_one(session, journal, "t-c")
    assert await journal.executions() == [second.execution_id, third.execution_id]
    again = await session.resume_recoverable(
        third.execution_id, journal, [answer(third.requests[0].request_id)]
    )
    assert again == TurnCompleted(turn_id="t-c", response="wrote c")
    from_journal = await session.resume_recoverable(
        second.execution_id, journal, [answer(second.requests[0].request_id)]
    )
    assert from_journal == TurnCompleted(turn_id="t-b", response="wrote b")
    with pytest.raises(StaleResponse):
        await session.resume_recoverable(
            first.execution_id, journal, [answer(first.requests[0].request_id)]
        )
    assert (workspace / "out" / "a.txt").read_text() == "hello"


async def test_recovery_prunes_leftovers_but_never_the_pending_execution(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At load, a journal holding more than `JOURNALS_KEPT` executions (earlier daemon runs)
    keeps the pending one, however old, and the most recently written others; the window then
    goes on from there."""
    monkeypatch.setattr(journal_retention, "JOURNALS_KEPT", 2)
    store = MemoryStore()
    session = retiring(workspace, [{"toolCalls": [write_call("out/p.txt")]}], store=store)
    journal = MemoryJournal()
    waiting = await session.run_recoverable("park", journal, turn_id="t-p")
    assert isinstance(waiting, TurnWaiting)
    strays = [f"x-old-{n}" for n in range(5)]
    for stray in strays:
        await journal.append(
            StartedRecord(
                id="started:0",
                execution_id=stray,
                turn_id="t-gone",
                session_id="s-retire",
                cwd=str(workspace),
                provider="scripted",
                model="scripted",
                user_message_id="m-gone",
            )
        )
    reloaded = retiring(
        workspace,
        [{"text": "resumed"}],
        history=store.last.messages,
        source="resume",
    )
    await reloaded.recover(journal)
    pending = reloaded.get_pending_execution()
    assert pending is not None
    assert pending.execution_id == waiting.execution_id
    assert await journal.executions() == [waiting.execution_id, *strays[-2:]]
    done = await reloaded.resume_recoverable(
        waiting.execution_id, journal, [answer(waiting.requests[0].request_id)]
    )
    assert done == TurnCompleted(turn_id="t-p", response="resumed")
    assert await journal.executions() == [strays[-1], waiting.execution_id]


class CheckpointingJournal(MemoryJournal):
    """A memory journal whose appends pass a cancellable checkpoint first, as the file
    journal's do (its lock): a cancellation arriving there drops the record."""

    def __init__(self, inner: MemoryJournal) -> None:
        super().__init__()
        self._records = inner._records

    async def append(self, record: JournalRecord, *, durable: bool = True) -> None:
        await trio.lowlevel.checkpoint()
        await super().append(record, durable=durable)


async def test_a_cancellation_while_a_saved_turn_finishes_changes_nothing(workspace: Path) -> None:
    """A turn whose outcome is saved finishes its journal work even when its caller is
    cancelled meanwhile (a shutdown's grace running out): the finished mark is written and the
    window goes on, instead of the completed turn ending half-settled."""
    session = new_session(
        workspace, scripted([{"text": "done"}, {"text": "next"}]), store=MemoryStore()
    )
    journal = BlockingJournal(CheckpointingJournal(MemoryJournal()), of_kind("finished"))
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                await session.run_recoverable("go", journal, turn_id="t-1")

            nursery.start_soon(run)
            try:
                await journal.entered.wait()
                await trio.testing.wait_all_tasks_blocked()
                nursery.cancel_scope.cancel()
            finally:  # never leave the shielded write blocked, pass or fail
                journal.release.set()
        (execution_id,) = await journal.executions()
        assert kinds(await journal.read(execution_id))[-1] == "finished"
        assert not session.is_running()
        assert await session.run("again") == "next"
