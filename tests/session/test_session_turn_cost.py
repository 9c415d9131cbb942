"""What one turn costs in durable writes and log volume, with every guarantee kept.

- A plain journaled turn makes no journal write durable: ``started``, its answer (journaled
  before it enters history, G-096) and the end mark are staged, since recovery can never put a
  plain answer back; a reply that calls tools, and every reply after it, is durable.
- A request's history is logged by reference (``history_prefix``) so a turn's
  ``provider_request`` line does not grow with the conversation; the log still rebuilds exactly
  what was sent (G-144), and ``session/log`` reports a reference the log cannot resolve.
- A tool's schema is read once per session, not on every provider call and save.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

import msgspec
import pytest
import trio
from msgspec import Struct

from protocol.errors import ProviderFailed
from protocol.methods import ApprovalResponse
from protocol.shapes import Message, TurnCompleted, TurnWaiting
from robotad.agent.provider import ModelRequest, ToolSchema
from robotad.agent.tool import ToolContext, ToolProfile, ToolResult, TypedTool
from robotad.session.reporting import logged_request
from robotad.storage.journal import FileExecutionJournal
from robotad.storage.log_files import FileLogSource
from robotad.storage.log_replay import replay_history, validate_log
from robotad.tools import builtin_tools
from tests.journal_fakes import FaultyJournal, MemoryJournal
from tests.session.session_harness import (
    LIMIT,
    FileLog,
    MemoryStore,
    Recorder,
    new_session,
    scripted,
)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    cwd = tmp_path / "project"
    cwd.mkdir()
    return cwd


def kinds(records: list[Any]) -> list[str]:
    return [str(type(r).__struct_config__.tag) for r in records]


# -- journal durability per turn ---------------------------------------------------------------


async def test_a_plain_turn_journals_its_answer_before_history_and_syncs_nothing(
    workspace: Path,
) -> None:
    """G-096: the answer is journaled before it enters history. A plain turn's answer — a first
    reply that calls no tool — is staged like ``started`` and the end mark: recovery only ever
    puts back what follows an open round of the saved record, and this execution never saved
    one (`test_recovery_never_puts_back_a_plain_answer`); the record's save is the turn's one
    durable write."""
    journal = FaultyJournal(MemoryJournal())
    history_when_journaled: list[int] = []
    session = new_session(workspace, scripted([{"text": "hi"}]), store=MemoryStore())
    append = journal.append

    async def watching(record: Any, *, durable: bool = True) -> None:
        history_when_journaled.append(len(session.get_history()))
        await append(record, durable=durable)

    journal.append = watching  # type: ignore[method-assign]
    with trio.fail_after(LIMIT):
        result = await session.run_recoverable("hello", journal)
    assert isinstance(result, TurnCompleted)
    assert kinds(journal.attempts) == ["started", "reply", "finished"]
    assert kinds(journal.staged) == ["started", "reply", "finished"]
    assert history_when_journaled[1] == 1  # the user's message only: the answer came after
    assert [m.role for m in session.get_history()] == ["user", "assistant"]


async def test_a_reply_that_calls_tools_and_every_later_reply_are_durable(
    workspace: Path,
) -> None:
    """G-094, G-096: a reply with tool calls is durable before any call runs, and so is every
    reply after it (its round may be in the saved record, and recovery puts back what the
    journal holds after it)."""
    (workspace / "notes.txt").write_text("x")
    steps: list[dict[str, Any]] = [
        {"toolCalls": [{"name": "Read", "arguments": {"file_path": "notes.txt"}}]},
        {"text": "read it"},
    ]
    journal = FaultyJournal(MemoryJournal())
    session = new_session(workspace, scripted(steps), tools=builtin_tools(), store=MemoryStore())
    with trio.fail_after(LIMIT):
        result = await session.run_recoverable("read notes", journal)
    assert isinstance(result, TurnCompleted)
    assert kinds(journal.attempts).count("reply") == 2
    assert "reply" not in kinds(journal.staged)


async def test_recovery_never_puts_back_a_plain_answer(workspace: Path) -> None:
    """Why a plain answer's line need not be synced: a crash after it was journaled and before
    the record was saved leaves a journal holding it, and a reloaded session's recovery keeps
    the saved history as it is (the turn is lost either way, as one cut off before its reply
    is) and leaves nothing pending. Should recovery ever learn to put such an answer back,
    this fails, and the answer must become durable again (`_recoverable_reply`)."""
    store = MemoryStore()
    first = new_session(workspace, scripted([{"text": "one"}]), store=store, session_id="s-1")
    journal = MemoryJournal()
    with trio.fail_after(LIMIT):
        await first.run_recoverable("first", journal)
    saved = list(store.last.messages)
    crashed = new_session(workspace, scripted([{"text": "two"}]), session_id="s-1")
    with trio.fail_after(LIMIT):
        await crashed.run_recoverable("second", journal)
        first_run, second_run = await journal.executions()
        left = MemoryJournal()  # what the crash left: the second turn journaled up to its answer
        for record in await journal.read(first_run):
            await left.append(record)
        records = await journal.read(second_run)
        assert kinds(records) == ["started", "reply", "finished"]
        for record in records[:2]:
            await left.append(record)
    reloaded = new_session(workspace, scripted(), session_id="s-1", history=saved, source="resume")
    with trio.fail_after(LIMIT):
        await reloaded.recover(left)
    assert reloaded.get_history() == saved
    assert reloaded.get_pending_execution() is None


async def test_an_execution_with_requests_marks_its_end_durably(workspace: Path) -> None:
    """G-075, G-084: requests are durable before "waiting" comes back, and the end mark of an
    execution a person answered is durable too (a redelivered answer after a restart reads
    it); only ``started`` is staged — the durable request right after it covers it."""
    steps: list[dict[str, Any]] = [
        {"toolCalls": [{"name": "Write", "arguments": {"file_path": "o.txt", "content": "x"}}]},
        {"text": "written"},
    ]
    journal = FaultyJournal(MemoryJournal())
    session = new_session(workspace, scripted(steps), tools=builtin_tools(), store=MemoryStore())
    with trio.fail_after(LIMIT):
        waiting = await session.run_recoverable("write it", journal)
        assert isinstance(waiting, TurnWaiting)
        (request,) = waiting.requests
        answer = ApprovalResponse(request.request_id, "r-1", True)
        done = await session.resume_recoverable(waiting.execution_id, journal, [answer])
    assert isinstance(done, TurnCompleted)
    assert kinds(journal.staged) == ["started"]
    assert kinds(journal.attempts)[-1] == "finished"


async def test_a_plain_turn_fsyncs_no_journal_file(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the file journal a plain turn makes no file and syncs nothing: its lines
    (``started``, its answer, the end mark) are held, and its one durable write is the
    record's. A library host, keeping its journals, finds them written at close."""
    synced: list[str] = []
    real = os.fsync

    def spy(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    session = new_session(workspace, scripted([{"text": "hi"}]), store=MemoryStore())
    async with FileExecutionJournal(tmp_path / "state", session.session_id) as journal:
        monkeypatch.setattr(os, "fsync", spy)
        with trio.fail_after(LIMIT):
            await session.run_recoverable("hello", journal)
        monkeypatch.undo()
        (execution_id,) = await journal.executions()
        assert synced == []
        assert os.listdir(journal.directory) == []
    async with FileExecutionJournal(tmp_path / "state", session.session_id) as reopened:
        records = await reopened.read(execution_id)
    assert kinds(records) == ["started", "reply", "finished"]


# -- provider requests in the log --------------------------------------------------------------


def _rebuilt(entries: list[Any], request: dict[str, Any], line: int) -> list[Message]:
    """The messages a logged request names, rebuilt from the mutations logged before it."""
    history = replay_history(entries[:line])
    prefix = request["history_prefix"]
    messages = history[: prefix["count"]]
    if "system_context" in request:
        context = request["system_context"]
        messages.insert(context["index"], msgspec.convert(context["message"], Message))
    return messages


async def test_requests_are_logged_by_reference_and_rebuild_exactly(workspace: Path) -> None:
    """G-144, G-145: each provider request's messages are named by reference to the history
    the log rebuilds at that line (with a turn's system context inserted where it was); that
    rebuild equals what the provider received, and the log validates as complete."""
    provider = scripted([{"text": "one"}, {"text": "two"}, {"text": "three"}])
    log = FileLog(workspace.parent, "s-log")
    session = new_session(
        workspace, provider, logger=log.logger, session_id="s-log", system_message="Be brief."
    )
    with trio.fail_after(LIMIT):
        await session.run("first")
        await session.run("second", system_context="It is Tuesday.")
        await session.run("third")
    entries = log.entries()
    logged = [(i, e) for i, e in enumerate(entries) if e.event == "provider_request"]
    assert len(logged) == len(provider.turn_requests) == 3
    for (line, entry), sent in zip(logged, provider.turn_requests, strict=True):
        request = entry.data["request"]
        assert "messages" not in request
        assert _rebuilt(entries, request, line) == sent.messages
        assert request["tools"] == msgspec.to_builtins(sent.tools)
    assert "system_context" in logged[1][1].data["request"]
    report = validate_log(FileLogSource(log.path))
    assert report.complete, report.problems


async def test_a_request_line_does_not_grow_with_the_history(workspace: Path) -> None:
    """The scale target: the 20th turn's request line is as long as the first one's (give or
    take the digits of its count) and repeats none of the earlier prompts."""
    provider = scripted([{"text": f"reply {i}"} for i in range(20)])
    log = FileLog(workspace.parent, "s-grow")
    session = new_session(workspace, provider, logger=log.logger, session_id="s-grow")
    with trio.fail_after(LIMIT):
        for index in range(20):
            await session.run(f"needle-{index:02d} " + "words " * 50)
    lines = [
        line for line in log.path.read_bytes().splitlines() if b'"event":"provider_request"' in line
    ]
    assert len(lines) == 20
    assert abs(len(lines[-1]) - len(lines[0])) <= 8
    assert b"needle-00" not in lines[-1]


async def test_a_reference_the_log_cannot_rebuild_is_reported(workspace: Path) -> None:
    """G-144, G-163: with a history mutation missing from the log, a request naming that
    history can no longer be rebuilt, and ``session/log`` says so instead of "complete"."""
    log = FileLog(workspace.parent, "s-gap")
    session = new_session(
        workspace, scripted([{"text": "a"}, {"text": "b"}]), logger=log.logger, session_id="s-gap"
    )
    with trio.fail_after(LIMIT):
        await session.run("first")
        await session.run("second")
    lines = log.path.read_bytes().splitlines(keepends=True)
    first_mutation = next(i for i, line in enumerate(lines) if b"history_mutation" in line)
    log.path.write_bytes(b"".join(lines[:first_mutation] + lines[first_mutation + 1 :]))
    report = validate_log(FileLogSource(log.path))
    assert not report.complete
    assert any(
        p.get("event") == "provider_request" and "does not rebuild" in p.get("message", "")
        for p in report.problems
    )


def test_messages_that_are_not_the_history_are_logged_in_full() -> None:
    """A request whose messages are not a prefix of the session's history (plus the system
    context where the loop puts it) is logged with every message, as sent."""
    history = [Message.system("sys"), Message.user("hi")]
    tools = [ToolSchema("T", "a tool", {"type": "object"})]
    stranger = ModelRequest([Message.user("summarise this")], tools, purpose="compaction")
    assert logged_request(stranger, history, None) == msgspec.to_builtins(stranger)
    misplaced = ModelRequest([Message.system("ctx"), *history], tools)
    assert logged_request(misplaced, history, "ctx") == msgspec.to_builtins(misplaced)
    inserted = ModelRequest([history[0], Message.system("ctx"), history[1]], tools)
    form = logged_request(inserted, history, "ctx")
    assert form["history_prefix"] == {"count": 2, "last_message_id": history[1].id}
    assert form["system_context"]["index"] == 1
    assert "messages" not in form


# -- tool schemas ------------------------------------------------------------------------------


class _NoArgs(Struct, forbid_unknown_fields=True):
    pass


class _CountingTool(TypedTool[_NoArgs]):
    """Counts how often its schema is built."""

    name: ClassVar[str] = "Count"
    description: ClassVar[str] = "Counts schema builds."
    profile: ClassVar[ToolProfile] = ToolProfile(risk="inspect")
    Arguments: ClassVar[type[Struct]] = _NoArgs

    def __init__(self) -> None:
        self.built = 0

    @property
    def schema(self) -> ToolSchema:
        self.built += 1
        return super().schema

    async def run(self, arguments: _NoArgs, ctx: ToolContext) -> ToolResult:
        return ToolResult(True, "counted")


class _LateTool(_CountingTool):
    name: ClassVar[str] = "Late"


async def test_a_tool_schema_is_built_once_per_session(workspace: Path) -> None:
    """Turns, tool calls and saves all show the model and the record the same schema, built
    once; a tool added later is registered the same way."""
    counting, late = _CountingTool(), _LateTool()
    steps: list[dict[str, Any]] = [
        {"toolCalls": [{"name": "Count", "arguments": {}}]},
        {"text": "done"},
        {"text": "ok"},
        {"text": "late"},
    ]
    provider = scripted(steps)
    store = MemoryStore()
    session = new_session(workspace, provider, tools=[counting], store=store)
    with trio.fail_after(LIMIT):
        await session.run("count")
        await session.run("again")
        assert counting.built == 1
        assert [s.name for s in store.last.tool_schemas] == ["Count"]
        session.add_tools([late])
        await session.run("with the late tool")
    assert [s.name for s in store.last.tool_schemas] == ["Count", "Late"]
    assert [s.name for s in provider.turn_requests[-1].tools] == ["Count", "Late"]
    assert (counting.built, late.built) == (1, 1)


async def test_a_request_is_logged_while_it_is_on_its_way(workspace: Path) -> None:
    """The ``provider_request`` line — a turn's biggest, the tools' schemas in it — is not in
    the provider's way: when the call begins it is not written yet, and it is written before
    any of the request's deltas, its response, or the failure that ends it."""
    provider = Recorder(scripted([{"text": "one two three", "chunks": 3}, {"error": "boom"}]))
    log = FileLog(workspace.parent, "s-soon")
    seen: list[list[str]] = []
    provider.on_call = lambda request: seen.append(log.events() if log.path.exists() else [])
    session = new_session(workspace, provider, logger=log.logger, session_id="s-soon")
    with trio.fail_after(LIMIT):
        await session.run("first")
        with pytest.raises(ProviderFailed):
            await session.run("second")
    assert [events.count("provider_request") for events in seen] == [0, 1]
    events = log.events()
    requests = [i for i, event in enumerate(events) if event == "provider_request"]
    responses = [i for i, event in enumerate(events) if event == "provider_response"]
    deltas = [i for i, event in enumerate(events) if event == "text_delta"]
    assert len(requests) == len(responses) == 2
    assert requests[0] < min(deltas)
    assert max(deltas) < responses[0] < requests[1] < responses[1]
    assert validate_log(FileLogSource(log.path)).complete
