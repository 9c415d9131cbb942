"""Guarantees of recoverable execution and the execution root, in-process: the turn claim
outlives pending journal writes (G-078), a resume is located by its execution id and journaled
checkpoint rather than by how the transcript attributes messages (G-090), the session log,
event sink and observers are never persistence barriers (G-098), and the session reports the
root it actually uses (G-104)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

import msgspec
import pytest
import trio
import trio.testing

from protocol.errors import ExecutionPending, SessionBusy, StaleResponse, TurnAborted
from protocol.shapes import Message, TurnCompleted, TurnWaiting
from robotad.agent.loop import open_calls
from robotad.agent.observations import Observation
from robotad.session.session import Session
from robotad.storage.journal import ExecutionJournal, JournalRecord, StartedRecord
from robotad.storage.session_log import SessionLogger
from robotad.tools import builtin_tools
from tests.journal_fakes import MemoryJournal, RecordPredicate, of_kind
from tests.session.session_harness import (
    LIMIT,
    MemoryStore,
    Recorder,
    answer,
    every_event,
    hook_recorder,
    hook_records,
    hooks_for,
    kinds,
    new_session,
    read_call,
    scripted,
    write_call,
)

# -- helpers ------------------------------------------------------------------------------------


def journaled_session(
    workspace: Path, steps: list[dict[str, Any]], **kwargs: Any
) -> tuple[Session, Recorder, MemoryStore]:
    provider = scripted(steps)
    store = MemoryStore()
    session = new_session(
        workspace, provider, tools=builtin_tools(), store=store, session_id="s-extra", **kwargs
    )
    return session, provider, store


class BlockingJournal:
    """Wraps a journal; the first append matching `block_on` stops until `release` is set.

    The wait is shielded, like a write handed to a worker thread that cannot be cancelled:
    an abort cannot cut it short. `entered` is set once the write has begun."""

    def __init__(self, inner: ExecutionJournal, block_on: RecordPredicate) -> None:
        self.inner = inner
        self.block_on = block_on
        self.entered = trio.Event()
        self.release = trio.Event()
        self.blocked: JournalRecord | None = None

    async def append(self, record: JournalRecord, *, durable: bool = True) -> None:
        if self.blocked is None and self.block_on(record):
            self.blocked = record
            self.entered.set()
            with trio.CancelScope(shield=True):
                await self.release.wait()
        await self.inner.append(record, durable=durable)

    async def read(self, execution_id: str) -> list[JournalRecord]:
        return await self.inner.read(execution_id)

    async def executions(self) -> list[str]:
        return await self.inner.executions()

    async def discard(self, execution_id: str, *, durable: bool = True) -> None:
        await self.inner.discard(execution_id, durable=durable)


@contextlib.asynccontextmanager
async def write_held(
    journal: BlockingJournal, turn: Callable[[], Awaitable[None]]
) -> AsyncIterator[None]:
    """Run `turn` until its journal write blocks; the block runs while the write is held.
    When the block ends, pass or fail, the write is released (never left blocked) and the
    turn is waited for. Bounded by LIMIT."""
    with trio.fail_after(LIMIT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(turn)
            try:
                await journal.entered.wait()
                yield
            finally:
                journal.release.set()


async def assert_busy(session: Session, turn_id: str | None) -> None:
    """Every way of starting work on `session` is refused with SessionBusy naming `turn_id`,
    and none of them changes history."""
    before = session.get_history()
    refusals: list[SessionBusy] = []
    with pytest.raises(SessionBusy) as run:
        await session.run("queued behind")
    refusals.append(run.value)
    with pytest.raises(SessionBusy) as compact:
        await session.compact()
    refusals.append(compact.value)
    with pytest.raises(SessionBusy) as journaled:
        await session.run_recoverable("queued behind", MemoryJournal())
    refusals.append(journaled.value)
    assert [r.data for r in refusals] == [{"sessionId": session.session_id, "turnId": turn_id}] * 3
    assert session.get_history() == before


# -- G-078 --------------------------------------------------------------------------------------


async def test_claim_is_held_while_the_parks_request_is_being_journaled(workspace: Path) -> None:
    """G-078: while the journal write of a parking call's request has not settled, the turn
    still holds the claim: a run or a compaction is refused with SessionBusy. Once the write
    settles, ``waiting`` comes back and the claim is free (new input then meets the pending
    execution, not a busy session)."""
    session, _, _ = journaled_session(workspace, [{"toolCalls": [write_call()]}, {"text": "done"}])
    journal = BlockingJournal(MemoryJournal(), of_kind("request"))
    results: list[TurnCompleted | TurnWaiting] = []

    async def turn() -> None:
        results.append(await session.run_recoverable("write it", journal, turn_id="t-1"))

    async with write_held(journal, turn):
        await trio.testing.wait_all_tasks_blocked()
        assert session.is_running()
        await assert_busy(session, "t-1")
        assert not results  # the turn has not answered while its write is pending
    (waiting,) = results
    assert isinstance(waiting, TurnWaiting)
    assert not session.is_running()
    assert kinds(await journal.read(waiting.execution_id)) == ["started", "reply", "request"]
    with pytest.raises(ExecutionPending):
        await session.run("more")
    with pytest.raises(ExecutionPending):
        await session.compact()
    done = await session.resume_recoverable(
        waiting.execution_id, journal, [answer(waiting.requests[0].request_id)]
    )
    assert done == TurnCompleted(turn_id="t-1", response="done")


async def test_claim_is_held_until_the_finished_record_is_journaled(workspace: Path) -> None:
    """G-078: a completed execution keeps the claim until its last journal write (the
    ``finished`` record) has settled; only then is the session free for the next run."""
    session, _, _ = journaled_session(workspace, [{"text": "first"}, {"text": "second"}])
    journal = BlockingJournal(MemoryJournal(), of_kind("finished"))
    results: list[TurnCompleted | TurnWaiting] = []

    async def turn() -> None:
        results.append(await session.run_recoverable("one", journal, turn_id="t-1"))

    async with write_held(journal, turn):
        await trio.testing.wait_all_tasks_blocked()
        assert session.is_running()
        await assert_busy(session, "t-1")
    assert results == [TurnCompleted(turn_id="t-1", response="first")]
    assert not session.is_running()
    (execution_id,) = await journal.executions()
    assert kinds(await journal.read(execution_id))[-1] == "finished"
    assert await session.run("two") == "second"


async def test_an_abort_keeps_the_claim_until_the_journal_write_settles(workspace: Path) -> None:
    """G-078: aborting a turn whose journal write is in flight does not free the claim: run
    and compact stay refused with SessionBusy until the write has settled and the turn has
    ended (aborted, the recorded result kept); then the session takes new input."""
    session, _, _ = journaled_session(workspace, [{"toolCalls": [read_call()]}, {"text": "after"}])
    journal = BlockingJournal(MemoryJournal(), of_kind("effect_finished"))
    ended: list[object] = []

    async def turn() -> None:
        try:
            ended.append(await session.run_recoverable("read it", journal, turn_id="t-1"))
        except TurnAborted as exc:
            ended.append(exc)

    async with write_held(journal, turn):
        assert session.abort()
        await trio.testing.wait_all_tasks_blocked()
        assert session.is_running()
        await assert_busy(session, "t-1")
        assert not ended
    (outcome,) = ended
    assert isinstance(outcome, TurnAborted)
    assert not session.is_running()
    (execution_id,) = await journal.executions()
    assert kinds(await journal.read(execution_id))[-2:] == ["effect_finished", "finished"]
    assert [m.role for m in session.get_history()] == ["user", "assistant", "tool"]
    assert session.get_pending_execution() is None
    assert await session.run("again") == "after"


# -- G-090 --------------------------------------------------------------------------------------


def reattributed(messages: list[Message], peer: str) -> list[Message]:
    """The same transcript with every user message attributed to the peer session `peer` and
    every assistant message stripped of its metadata — ids, roles, contents and calls kept."""
    out = []
    for message in messages:
        if message.role == "user":
            message = msgspec.structs.replace(message, metadata={"peer": {"sessionId": peer}})
        elif message.role == "assistant":
            message = msgspec.structs.replace(message, metadata=msgspec.UNSET)
        out.append(message)
    return out


def reloaded(
    workspace: Path, history: list[Message], steps: list[dict[str, Any]], session_id: str
) -> Session:
    return new_session(
        workspace,
        scripted(steps),
        tools=builtin_tools(),
        session_id=session_id,
        history=history,
        source="resume",
    )


async def test_resume_follows_the_checkpoint_not_the_transcripts_attribution(
    workspace: Path,
) -> None:
    """G-090: a session reloaded from a transcript whose messages are attributed differently
    (the user's prompt now marked as a peer session's, the assistant's metadata gone) still
    recovers the parked execution from the journal's executionId and checkpoint, offers the
    same requests, and resumes it to completion without running anything twice."""
    session, _, store = journaled_session(workspace, [{"toolCalls": [write_call()]}])
    journal = MemoryJournal()
    waiting = await session.run_recoverable("write it", journal, turn_id="t-1")
    assert isinstance(waiting, TurnWaiting)
    history = reattributed(store.last.messages, peer="s-some-peer")
    assert [m.peer for m in history if m.role == "user"] == ["s-some-peer"]

    again = reloaded(workspace, history, [{"text": "resumed"}], "s-extra")
    await again.recover(journal)
    pending = again.get_pending_execution()
    assert pending is not None
    assert pending.execution_id == waiting.execution_id
    assert pending.requests == waiting.requests
    done = await again.resume_recoverable(
        waiting.execution_id, journal, [answer(waiting.requests[0].request_id)]
    )
    assert done == TurnCompleted(turn_id="t-1", response="resumed")
    assert (workspace / "out.txt").read_text() == "hello"
    assert [m.content for m in again.get_history() if m.role == "user"] == ["write it"]
    assert kinds(await journal.read(waiting.execution_id))[-1] == "finished"


async def test_only_the_named_execution_of_this_session_resumes(workspace: Path) -> None:
    """G-090: the execution id names what resumes. Another execution's id — one that waits in
    another session sharing the journal, or one that is unknown — is StaleResponse and leaves
    the parked execution as it was; a session holding an identical transcript but another id
    cannot resume it either, since the checkpoint, not the transcript, decides."""
    session, _, store = journaled_session(workspace, [{"toolCalls": [write_call("a.txt")]}])
    other = new_session(
        workspace,
        scripted([{"toolCalls": [write_call("b.txt")]}]),
        tools=builtin_tools(),
        session_id="s-neighbour",
    )
    journal = MemoryJournal()
    mine = await session.run_recoverable("a", journal)
    theirs = await other.run_recoverable("b", journal)
    assert isinstance(mine, TurnWaiting)
    assert isinstance(theirs, TurnWaiting)

    for foreign in (theirs.execution_id, "x-never-started"):
        with pytest.raises(StaleResponse) as refused:
            await session.resume_recoverable(
                foreign, journal, [answer(theirs.requests[0].request_id)]
            )
        assert refused.value.data is not None
        assert refused.value.data["executionId"] == foreign
    pending = session.get_pending_execution()
    assert pending is not None
    assert (pending.execution_id, pending.requests) == (mine.execution_id, mine.requests)
    assert not (workspace / "b.txt").exists()

    lookalike = reloaded(workspace, list(store.last.messages), [{"text": "no"}], "s-lookalike")
    await lookalike.recover(journal)
    assert lookalike.get_pending_execution() is None
    with pytest.raises(StaleResponse):
        await lookalike.resume_recoverable(
            mine.execution_id, journal, [answer(mine.requests[0].request_id)]
        )
    assert not (workspace / "a.txt").exists()


# -- G-098 --------------------------------------------------------------------------------------


class RaisingLogSink:
    """A `LogSink` whose every write fails, counting the attempts."""

    def __init__(self) -> None:
        self.attempts = 0

    def append(self, line: bytes) -> None:
        self.attempts += 1
        raise OSError(28, "No space left on device")

    def put_payload(self, content: bytes, sha256: str) -> str:
        self.attempts += 1
        raise OSError(28, "No space left on device")

    def holds_payload(self, name: str, size: int) -> bool:
        return False


class Raising:
    """A synchronous callable (event sink or observer) that always raises, counting calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, item: dict[str, Any] | Observation) -> None:
        self.calls += 1
        raise RuntimeError("observer exploded")


Failing = Literal["log", "event_sink", "observer"]


def failing_session(
    workspace: Path, steps: list[dict[str, Any]], failing: Failing
) -> tuple[Session, MemoryStore, Callable[[], int]]:
    """A journaled session whose `failing` port raises on every write; the callable counts
    the writes it refused."""
    kwargs: dict[str, Any] = {}
    sink = RaisingLogSink()
    raising = Raising()
    if failing == "log":
        kwargs["logger"] = SessionLogger("s-extra", sink)
    elif failing == "event_sink":
        kwargs["event_sink"] = raising
    session, _, store = journaled_session(workspace, steps, **kwargs)
    if failing == "observer":
        session.bus.subscribe(raising)
    return session, store, (lambda: sink.attempts) if failing == "log" else (lambda: raising.calls)


@pytest.mark.parametrize("failing", ["log", "event_sink", "observer"])
async def test_a_failing_observer_neither_holds_back_nor_undoes_a_result(
    workspace: Path, failing: Failing
) -> None:
    """G-098: with the session log's sink, the event sink or a bus observer raising on every
    write, a journaled turn still completes; every result the journal recorded is in history
    and in the saved record, and nothing is rolled back."""
    steps: list[dict[str, Any]] = [{"toolCalls": [read_call()]}, {"text": "read it"}]
    session, store, refused = failing_session(workspace, steps, failing)
    journal = MemoryJournal()
    with trio.fail_after(LIMIT):
        result = await session.run_recoverable("read the notes", journal, turn_id="t-1")
    assert refused() > 0  # the failing port really was written to, and raised
    assert result == TurnCompleted(turn_id="t-1", response="read it")
    assert not session.is_running()
    history = session.get_history()
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
    assert history[2].ok
    assert "remember the milk" in (history[2].content or "")
    assert store.last.messages == history
    (execution_id,) = await journal.executions()
    records = await journal.read(execution_id)
    assert kinds(records) == [
        "started",
        "reply",
        "effect_started",
        "effect_finished",
        "reply",
        "finished",
    ]
    assert await session.run("next") == "echo: next"


async def test_failing_observers_do_not_block_a_park_or_its_resume(workspace: Path) -> None:
    """G-098: with the log sink, the event sink and an observer all raising, a call needing a
    person still parks once its request is durable, and the resume runs it and records its
    result in the journal, history and the saved record."""
    sink, events, observer = RaisingLogSink(), Raising(), Raising()
    session, _, store = journaled_session(
        workspace,
        [{"toolCalls": [write_call()]}, {"text": "written"}],
        logger=SessionLogger("s-extra", sink),
        event_sink=events,
    )
    session.bus.subscribe(observer)
    journal = MemoryJournal()
    with trio.fail_after(LIMIT):
        waiting = await session.run_recoverable("write it", journal, turn_id="t-1")
        assert isinstance(waiting, TurnWaiting)
        assert open_calls(store.last.messages)
        done = await session.resume_recoverable(
            waiting.execution_id, journal, [answer(waiting.requests[0].request_id)]
        )
    assert sink.attempts > 0
    assert events.calls > 0
    assert observer.calls > 0
    assert done == TurnCompleted(turn_id="t-1", response="written")
    assert (workspace / "out.txt").read_text() == "hello"
    tools = [(m.name, m.ok) for m in session.get_history() if m.role == "tool"]
    assert tools == [("Write", True)]
    assert store.last.messages == session.get_history()
    assert kinds(await journal.read(waiting.execution_id))[-2:] == ["reply", "finished"]


# -- G-104 --------------------------------------------------------------------------------------


@pytest.mark.parametrize("spelling", ["direct", "symlink"])
async def test_the_root_the_session_uses_is_the_one_it_reports(
    workspace: Path, tmp_path: Path, spelling: str
) -> None:
    """G-104, G-103: the cwd given at construction is the root the session reports
    (``cwd``, its snapshot, the saved record, the journal's ``started`` record) and the one
    every hook input carries — as given, never the daemon process's own directory nor a
    re-derived spelling of it."""
    if spelling == "symlink":
        root = tmp_path / "alias"
        root.symlink_to(workspace)
    else:
        root = workspace
    assert os.getcwd() != str(root)
    hooks = hooks_for(
        tmp_path,
        every_event(hook_recorder(tmp_path, "hooks"), ["SessionStart", "PreToolUse"]),
    )
    glob = {"name": "Glob", "arguments": {"pattern": "*.txt"}}
    steps: list[dict[str, Any]] = [{"toolCalls": [glob]}, {"text": "ok"}]
    session, _, store = journaled_session(root, steps, hooks=hooks)
    journal = MemoryJournal()
    with trio.fail_after(LIMIT):
        result = await session.run_recoverable("look", journal)
    assert isinstance(result, TurnCompleted)
    assert str(session.cwd) == str(root)
    assert session.snapshot().cwd == str(root)
    assert store.last.cwd == str(root)
    (execution_id,) = await journal.executions()
    started = (await journal.read(execution_id))[0]
    assert isinstance(started, StartedRecord)
    assert started.cwd == str(root)
    inputs = [r["input"] for r in hook_records(tmp_path, "hooks")]
    assert [i["hook_event_name"] for i in inputs] == ["SessionStart", "PreToolUse"]
    assert {i["cwd"] for i in inputs} == {str(root)}
    found = next(m for m in session.get_history() if m.role == "tool")
    assert found.ok
    assert "notes.txt" in (found.content or "")
