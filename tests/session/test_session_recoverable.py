"""Recoverable execution: parking on approvals, resuming, abandoning, recovering after a reload."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from protocol.errors import (
    EffectUncertain,
    ExecutionPending,
    InternalError,
    StaleResponse,
    StorageFailed,
    TurnAborted,
)
from protocol.shapes import TurnCompleted, TurnWaiting
from robotad.agent.loop import open_calls
from robotad.session.session import Session
from robotad.tools import builtin_tools
from tests.journal_fakes import FaultyJournal, MemoryJournal, of_kind, once
from tests.session.session_harness import (
    LIMIT,
    Events,
    MemoryStore,
    Recorder,
    WaitTool,
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


def recoverable(
    workspace: Path, steps: list[Any], **kwargs: Any
) -> tuple[Session, Recorder, MemoryStore, Events]:
    provider = scripted(steps)
    store, events = MemoryStore(), Events()
    session = new_session(
        workspace,
        provider,
        tools=builtin_tools(),
        store=store,
        event_sink=events,
        session_id="s-rec",
        **kwargs,
    )
    return session, provider, store, events


async def test_park_then_resume(workspace: Path, tmp_path: Path) -> None:
    """G-073, G-074, G-075, G-079, G-080, G-133, G-134: a call needing a person parks the
    run: its exact action is journaled and the record holding the open round is saved before
    "waiting" comes back; new input is refused; resuming runs it without a user message, with
    tool hooks but no UserPromptSubmit or Stop."""
    hooks = hooks_for(
        workspace,
        every_event(
            hook_recorder(tmp_path, "rec"),
            ["UserPromptSubmit", "Stop", "PreToolUse", "PostToolUse"],
        ),
    )
    session, _, store, events = recoverable(
        workspace, [{"toolCalls": [write_call()]}, {"text": "written"}], hooks=hooks
    )
    journal = MemoryJournal()
    with trio.fail_after(LIMIT):
        waiting = await session.run_recoverable("write it", journal, turn_id="t-1")
    assert isinstance(waiting, TurnWaiting)
    (request,) = waiting.requests
    assert request.tool == "Write"
    assert request.arguments == {"file_path": str(workspace / "out.txt"), "content": "hello"}
    assert request.execution_id == waiting.execution_id
    assert request.reason == "default mode asks before modify tools"  # G-074: why it asks
    assert kinds(await journal.read(waiting.execution_id)) == ["started", "reply", "request"]
    assert open_calls(store.last.messages)  # the open round is on disk
    pending = session.get_pending_execution()
    assert pending is not None
    assert pending.requests == waiting.requests
    assert events.types()[-2:] == ["approval_requested", "turn_finished"]
    assert events.of("turn_finished")[-1]["status"] == "waiting"
    before = session.get_history()
    with pytest.raises(ExecutionPending) as refused:
        await session.run("more")
    assert refused.value.data == {"sessionId": "s-rec", "executionId": waiting.execution_id}
    assert session.get_history() == before
    with trio.fail_after(LIMIT):
        done = await session.resume_recoverable(
            waiting.execution_id, journal, [answer(request.request_id, True)]
        )
    assert done == TurnCompleted(turn_id="t-1", response="written")
    assert (workspace / "out.txt").read_text() == "hello"
    users = [m.content for m in session.get_history() if m.role == "user"]
    assert users == ["write it"]
    assert session.get_pending_execution() is None
    assert session.turn_count == 1
    assert kinds(await journal.read(waiting.execution_id))[-1] == "finished"
    assert events.of("approval_resolved")[0]["approved"] is True
    fired = [r["input"]["hook_event_name"] for r in hook_records(tmp_path, "rec")]
    assert fired == ["UserPromptSubmit", "PreToolUse", "PreToolUse", "PostToolUse"]
    assert await session.run("next") == "echo: next"


async def test_redelivery_and_stale_responses(workspace: Path) -> None:
    """G-084, G-085, G-086: an identical redelivery returns the latest result and runs
    nothing twice; a reused response id with other content, an unknown request and an
    unknown or finished execution are refused as stale."""
    session, provider, _, _ = recoverable(
        workspace, [{"toolCalls": [write_call()]}, {"text": "ok"}]
    )
    journal = MemoryJournal()
    waiting = await session.run_recoverable("w", journal)
    assert isinstance(waiting, TurnWaiting)
    request_id = waiting.requests[0].request_id
    xid = waiting.execution_id
    with pytest.raises(StaleResponse):
        await session.resume_recoverable(xid, journal, [answer("req-unknown", True)])
    with pytest.raises(StaleResponse):
        await session.resume_recoverable("x-unknown", journal, [answer(request_id, True)])
    assert session.get_pending_execution() is not None  # G-087: still pending, unchanged
    done = await session.resume_recoverable(xid, journal, [answer(request_id, True, "resp-1")])
    again = await session.resume_recoverable(xid, journal, [answer(request_id, True, "resp-1")])
    assert again == done
    assert len(provider.turn_requests) == 2
    with pytest.raises(StaleResponse):
        await session.resume_recoverable(xid, journal, [answer(request_id, False, "resp-1")])
    with pytest.raises(StaleResponse):
        await session.resume_recoverable(xid, journal, [answer(request_id, True, "resp-2")])


async def test_answers_are_rechecked_and_binding(workspace: Path) -> None:
    """G-081, G-083: an approved call still meets a deny rule added since; a denied call
    stays denied after an allow rule and a more permissive mode."""
    steps = [{"toolCalls": [write_call("a.txt")]}, {"text": "one"}]
    steps += [{"toolCalls": [write_call("b.txt")]}, {"text": "two"}]
    session, _, _, _ = recoverable(workspace, steps)
    journal = MemoryJournal()

    first = await session.run_recoverable("a", journal)
    assert isinstance(first, TurnWaiting)
    session.add_rule("Write(a.txt)", "deny")
    await session.resume_recoverable(
        first.execution_id, journal, [answer(first.requests[0].request_id, True)]
    )
    assert not (workspace / "a.txt").exists()

    second = await session.run_recoverable("b", journal)
    assert isinstance(second, TurnWaiting)
    session.add_rule("Write", "allow")
    session.set_permission_mode("bypassPermissions")
    await session.resume_recoverable(
        second.execution_id, journal, [answer(second.requests[0].request_id, False)]
    )
    assert not (workspace / "b.txt").exists()
    results = [m for m in session.get_history() if m.role == "tool"]
    assert [m.ok for m in results] == [False, False]
    assert "denied by rule" in (results[0].content or "")
    assert "denied by the user" in (results[1].content or "")


async def test_approval_grants_no_consent(workspace: Path) -> None:
    """G-082: an approval answers one action; the same call with identical arguments in a
    later round asks again, and no rule was added."""
    steps = [{"toolCalls": [write_call()]}, {"text": "one"}, {"toolCalls": [write_call()]}]
    session, _, _, _ = recoverable(workspace, steps)
    journal = MemoryJournal()
    first = await session.run_recoverable("once", journal)
    assert isinstance(first, TurnWaiting)
    await session.resume_recoverable(
        first.execution_id, journal, [answer(first.requests[0].request_id, True)]
    )
    assert (workspace / "out.txt").exists()
    again = await session.run_recoverable("again", journal)
    assert isinstance(again, TurnWaiting)
    assert again.requests[0].arguments == first.requests[0].arguments
    assert session.rules()["allow"] == []


async def test_running_calls_settle_before_waiting(workspace: Path) -> None:
    """G-077: a call already running beside the parked one finishes before "waiting"; the
    calls after the parked one have not run and run on resume."""
    steps = [{"toolCalls": [read_call(), write_call(), read_call()]}, {"text": "done"}]
    session, _, _, _ = recoverable(workspace, steps)
    journal = MemoryJournal()
    waiting = await session.run_recoverable("go", journal)
    assert isinstance(waiting, TurnWaiting)
    history = session.get_history()
    assert [m.role for m in history] == ["user", "assistant", "tool"]
    assert [c.name for c in open_calls(history)] == ["Write", "Read"]
    await session.resume_recoverable(
        waiting.execution_id, journal, [answer(waiting.requests[0].request_id, True)]
    )
    tools = [(m.name, m.ok) for m in session.get_history() if m.role == "tool"]
    assert tools == [("Read", True), ("Write", True), ("Read", True)]


async def test_abort_after_a_wait_was_saved_leaves_it_pending(workspace: Path) -> None:
    """G-091, G-095: an abort that ends the turn once a wait was saved (a tool still running
    beside it) leaves the execution pending; its request can still be answered."""
    wait = WaitTool()
    steps = [{"toolCalls": [{"name": "Wait", "arguments": {"label": "w"}}, write_call()]}]
    session, _, _, _ = recoverable(workspace, [*steps, {"text": "after"}])
    session.add_tools([wait])
    journal = MemoryJournal()
    aborted: list[TurnAborted] = []

    async def turn() -> None:
        try:
            await session.run_recoverable("go", journal)
        except TurnAborted as exc:
            aborted.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(turn)
        await wait.started.wait()
        await trio.testing.wait_all_tasks_blocked()  # Write parked; Wait still runs
        (execution_id,) = await journal.executions()
        assert kinds(await journal.read(execution_id))[-1] == "request"
        assert session.abort()
    assert aborted
    pending = session.get_pending_execution()
    assert pending is not None
    assert [r.tool for r in pending.requests] == ["Write"]
    assert wait.settled == ["w"]  # cancelled, settled before the turn ended
    await session.resume_recoverable(
        pending.execution_id, journal, [answer(pending.requests[0].request_id, True)]
    )
    assert (workspace / "out.txt").exists()


async def test_journal_failure_with_open_round(workspace: Path) -> None:
    """G-092, G-094, G-097, G-099, G-100, G-101: a journal write failing after the calls were
    committed fails the turn and leaves the execution pending; an effect that started without
    a recorded outcome is never re-run (EffectUncertain); abandon closes the open calls
    as failed ("outcome unknown"), writes nothing to the journal, and new input is accepted."""
    steps = [{"toolCalls": [read_call()]}, {"text": "after abandoning"}]
    session, _, store, _ = recoverable(workspace, steps)
    journal = FaultyJournal(MemoryJournal(), fail_on=once(of_kind("effect_finished")))
    with pytest.raises(InternalError):
        await session.run_recoverable("go", journal)
    pending = session.get_pending_execution()
    assert pending is not None
    assert pending.requests == []
    (cut,) = open_calls(session.get_history())
    assert cut.name == "Read"
    assert pending.uncertain == [cut.id]  # PROTOCOL.md §10.2
    with pytest.raises(EffectUncertain):
        await session.resume_recoverable(pending.execution_id, journal, [])
    attempts = len(journal.attempts)
    await session.abandon_pending_execution(pending.execution_id)
    assert len(journal.attempts) == attempts
    last = session.get_history()[-1]
    assert last.role == "tool"
    assert not last.ok
    assert (last.content or "").startswith("outcome unknown: Read was running")  # never "not run"
    assert not open_calls(store.last.messages)
    with pytest.raises(StaleResponse):
        await session.resume_recoverable(pending.execution_id, journal, [])
    assert await session.run("fresh") == "after abandoning"


async def test_rejected_reply_never_enters_history(workspace: Path) -> None:
    """G-097, G-093: a reply the journal refused never enters history; with no round open
    the execution ends like an ordinary turn and new input is accepted."""
    session, _, _, _ = recoverable(workspace, [{"text": "unrecorded"}])
    journal = FaultyJournal(MemoryJournal(), fail_on=once(of_kind("reply")))
    with pytest.raises(InternalError):
        await session.run_recoverable("go", journal)
    assert [m.content for m in session.get_history()] == ["go"]
    assert session.get_pending_execution() is None
    assert await session.run("again") == "echo: again"


async def test_recover_after_reload(workspace: Path) -> None:
    """G-088, G-089, G-075: a session rebuilt from the saved record (same id, cwd, provider,
    model) recovers the waiting execution from the journal and can resume it; another
    session id or model cannot."""
    session, _, store, _ = recoverable(workspace, [{"toolCalls": [write_call()]}])
    journal = MemoryJournal()
    waiting = await session.run_recoverable("w", journal)
    assert isinstance(waiting, TurnWaiting)
    saved = store.last.messages

    def reloaded(session_id: str = "s-rec", model: str = "scripted") -> Session:
        return new_session(
            workspace,
            scripted([{"text": "resumed"}], model=model),
            tools=builtin_tools(),
            session_id=session_id,
            history=saved,
            source="resume",
        )

    other = reloaded(model="other-model")
    await other.recover(journal)
    assert other.get_pending_execution() is None
    stranger = reloaded(session_id="s-other")
    await stranger.recover(journal)
    assert stranger.get_pending_execution() is None
    with pytest.raises(StaleResponse):
        await stranger.resume_recoverable(waiting.execution_id, journal, [])

    again = reloaded()
    await again.recover(journal)
    pending = again.get_pending_execution()
    assert pending is not None
    assert pending.requests == waiting.requests
    done = await again.resume_recoverable(
        waiting.execution_id, journal, [answer(waiting.requests[0].request_id, True)]
    )
    assert done == TurnCompleted(turn_id=waiting.turn_id, response="resumed")


async def test_recover_puts_back_recorded_results(workspace: Path) -> None:
    """G-094: a result the journal recorded but the saved record lacks (a crash between the
    two) is put back on recovery, never produced by running the tool again."""
    session, _, store, _ = recoverable(workspace, [{"toolCalls": [write_call()]}])
    journal = MemoryJournal()
    waiting = await session.run_recoverable("w", journal)
    assert isinstance(waiting, TurnWaiting)
    saved = store.last.messages
    store.fail = True  # the crash: the resumed round is journaled but never saved
    with pytest.raises(StorageFailed):
        await session.resume_recoverable(
            waiting.execution_id, journal, [answer(waiting.requests[0].request_id, True)]
        )
    (workspace / "out.txt").unlink()
    again = new_session(
        workspace,
        scripted(),
        tools=builtin_tools(),
        session_id="s-rec",
        history=saved,
        source="resume",
    )
    await again.recover(journal)
    assert again.get_pending_execution() is None
    restored = again.get_history()
    assert not open_calls(restored)
    assert [(m.role, m.ok) for m in restored[len(saved) :]] == [("tool", True), ("assistant", True)]
    assert not (workspace / "out.txt").exists()  # not re-run


async def test_auto_compaction_is_journaled(workspace: Path) -> None:
    """G-096: a recoverable run's auto-compaction journals its summary before history
    changes."""
    provider = scripted(
        [{"text": "big", "usage": {"inputTokens": 190, "outputTokens": 5}}], context_window=200
    )
    session = new_session(workspace, provider, session_id="s-cmp")
    journal = MemoryJournal()
    await session.run_recoverable("first", journal)
    result = await session.run_recoverable("second", journal)
    assert isinstance(result, TurnCompleted)
    executions = await journal.executions()
    found = [kinds(await journal.read(x)) for x in executions]
    assert ["started", "compaction", "reply", "finished"] in found


async def test_journal_failure_while_aborting_is_a_persistence_failure(workspace: Path) -> None:
    """G-194, G-097: a journal write failing while the turn is being aborted is reported as a
    persistence failure, not an abort, and the unrecorded interrupted result never enters
    history."""
    wait = WaitTool()
    session, _, _, _ = recoverable(workspace, [{"toolCalls": [{"name": "Wait", "arguments": {}}]}])
    session.add_tools([wait])
    journal = FaultyJournal(MemoryJournal(), fail_on=of_kind("effect_finished"))
    failures: list[Exception] = []

    async def turn() -> None:
        try:
            await session.run_recoverable("go", journal)
        except (InternalError, TurnAborted) as exc:
            failures.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(turn)
        await wait.started.wait()
        session.abort()
    assert len(failures) == 1
    assert type(failures[0]) is InternalError
    assert "journal" in failures[0].message
    assert [m.role for m in session.get_history()] == ["user", "assistant"]
    assert session.get_pending_execution() is not None


async def test_redelivery_after_a_reload(workspace: Path) -> None:
    """G-084, G-088: redelivering the answer of a completed execution to a reloaded session
    returns the execution's result from the journal and runs nothing again."""
    session, _, store, _ = recoverable(
        workspace, [{"toolCalls": [write_call()]}, {"text": "wrote"}]
    )
    journal = MemoryJournal()
    waiting = await session.run_recoverable("w", journal)
    assert isinstance(waiting, TurnWaiting)
    response = answer(waiting.requests[0].request_id, True, "resp-x")
    done = await session.resume_recoverable(waiting.execution_id, journal, [response])
    (workspace / "out.txt").unlink()
    provider = scripted()
    again = new_session(
        workspace,
        provider,
        tools=builtin_tools(),
        session_id="s-rec",
        history=store.last.messages,
        source="resume",
    )
    await again.recover(journal)
    assert await again.resume_recoverable(waiting.execution_id, journal, [response]) == done
    assert not (workspace / "out.txt").exists()
    assert provider.requests == []
    with pytest.raises(StaleResponse):
        await again.resume_recoverable(
            waiting.execution_id, journal, [answer(waiting.requests[0].request_id, False)]
        )
