"""Turns end to end on the scripted provider: events, requests, abort, failure, persistence."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.errors import ProviderFailed, SessionBusy, TurnAborted
from protocol.events import (
    ContextUpdated,
    SessionEvent,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnFinished,
)
from protocol.shapes import Message, ToolCall
from robotad.agent.provider import ModelReply, ModelRequest, StreamObserver
from robotad.session.errors import InvalidSetting
from robotad.storage.log_files import FileLogSource
from robotad.storage.log_replay import replay_log, validate_log
from robotad.storage.record import Valid, decode_record, encode_record
from robotad.tools import builtin_tools
from tests.session.session_harness import (
    Events,
    FileLog,
    MemoryStore,
    new_session,
    scripted,
)

TOOL_THEN_TEXT: list[dict[str, Any]] = [
    {
        "toolCalls": [{"name": "Read", "arguments": {"file_path": "notes.txt"}}],
        "usage": {"inputTokens": 50, "outputTokens": 5},
    },
    {"text": "the milk", "chunks": 2, "usage": {"inputTokens": 80, "outputTokens": 3}},
]


async def test_turn_events_in_order(workspace: Path) -> None:
    """G-045, G-128, G-042, G-043: a tool turn emits PROTOCOL §6 events (decoded strictly once the
    manager's members are stamped): context estimated before and exact after each provider
    call, the permission decision, the tool's start and finish, deltas, turn_finished."""
    events = Events()
    observations: list[Any] = []
    session = new_session(
        workspace, scripted(TOOL_THEN_TEXT), tools=builtin_tools(), event_sink=events
    )
    session.bus.subscribe(observations.append)

    def broken(observation: Any) -> None:
        raise RuntimeError("observer bug")

    session.bus.subscribe(broken)  # G-043: cannot change a result or fail the turn
    assert await session.run("what to remember?", turn_id="t-1") == "the milk"
    assert events.types() == [
        "turn_started",
        "context_updated",
        "context_updated",
        "permission_decided",
        "tool_started",
        "tool_finished",
        "context_updated",
        "text_delta",
        "text_delta",
        "context_updated",
        "turn_finished",
    ]
    typed = events.typed(session.session_id)
    assert all(e.turn_id == "t-1" for e in typed)  # type: ignore[union-attr]
    phases = [(e.phase, e.used_tokens) for e in typed if isinstance(e, ContextUpdated)]
    assert [p for p, _ in phases] == ["estimated", "exact", "estimated", "exact"]
    assert phases[1][1] == 55
    assert phases[3][1] == 83
    started = next(e for e in typed if isinstance(e, ToolStarted))
    assert started.arguments == {"file_path": str(workspace / "notes.txt")}
    finished = next(e for e in typed if isinstance(e, ToolFinished))
    assert finished.ok
    assert "remember the milk" in finished.preview
    last = typed[-1]
    assert isinstance(last, TurnFinished)
    assert last.status == "completed"
    assert last.response == "the milk"
    assert {o.round for o in observations} == {1, 2}
    assert session.turn_count == 1


async def test_request_holds_only_what_the_session_was_given(workspace: Path) -> None:
    """G-217, G-048, G-049, G-057: a turn's request is the system message, history and the
    prompt, plus that turn's systemContext right after the system message; the context never
    enters history or a later request; a per-turn tool choice applies to that turn only."""
    provider = scripted()
    session = new_session(workspace, provider, system_message="You are terse.")
    await session.run("one", system_context="today is Tuesday", tool_choice="none")
    await session.run("two")
    first, second = provider.turn_requests
    assert [(m.role, m.content) for m in first.messages] == [
        ("system", "You are terse."),
        ("system", "today is Tuesday"),
        ("user", "one"),
    ]
    assert first.tool_choice == "none"
    assert second.tool_choice == "auto"
    assert all("Tuesday" not in (m.content or "") for m in second.messages)
    assert all("Tuesday" not in (m.content or "") for m in session.get_history())
    assert [(m.role, m.content) for m in second.messages] == [
        ("system", "You are terse."),
        ("user", "one"),
        ("assistant", "echo: one"),
        ("user", "two"),
    ]


async def test_abort_keeps_partial_reply_interrupted(workspace: Path) -> None:
    """G-191, G-192: aborting a streaming turn keeps the text already streamed as an
    interrupted assistant message; the run raises TurnAborted once stopped and turn_finished
    says "aborted"."""
    provider = scripted([{"text": "abcdefgh", "chunks": 4, "delayMs": 1}])
    store = MemoryStore()

    def sink(event: SessionEvent) -> None:
        events(event)
        if isinstance(event, TextDelta) and len(events.of("text_delta")) == 2:
            session.abort()

    events = Events()
    session = new_session(workspace, provider, event_sink=sink, store=store)
    with pytest.raises(TurnAborted) as aborted:
        await session.run("stream", turn_id="t-ab")
    assert aborted.value.data == {"sessionId": session.session_id, "turnId": "t-ab"}
    last = session.get_history()[-1]
    assert last.role == "assistant"
    assert last.state == "interrupted"
    assert last.content == "abcd"
    finished = events.of("turn_finished")[0]
    assert finished["status"] == "aborted"
    assert finished["error"]["code"] == -32006
    assert store.last.messages[-1].state == "interrupted"
    assert session.turn_count == 0


async def test_provider_failure_keeps_history_and_session(workspace: Path) -> None:
    """G-206, G-207, G-208, G-209: a provider failure after a completed round is logged with
    its detail, history up to it (the user message and the round) is kept and saved, the run
    raises ProviderFailed with the session's ids, and the next run completes."""
    provider = scripted(
        [
            {"toolCalls": [{"name": "Read", "arguments": {"file_path": "notes.txt"}}]},
            {"error": "rate limited (429)"},
        ]
    )
    store = MemoryStore()
    events = Events()
    log = FileLog(workspace.parent, "s-fail")
    session = new_session(
        workspace,
        provider,
        tools=builtin_tools(),
        store=store,
        event_sink=events,
        logger=log.logger,
        session_id="s-fail",
    )
    with pytest.raises(ProviderFailed) as failed:
        await session.run("read", turn_id="t-f")
    assert failed.value.data == {
        "sessionId": "s-fail",
        "turnId": "t-f",
        "provider": "scripted",
        "reason": "rate limited (429)",
    }
    roles = [m.role for m in session.get_history()]
    assert roles == ["user", "assistant", "tool"]
    assert [m.role for m in store.last.messages] == roles
    entries = log.entries()
    failure = [e.data for e in entries if e.event == "turn_failed"]
    assert failure == [{"turnId": "t-f", "error": "rate limited (429)"}]
    responses = [e.data for e in entries if e.event == "provider_response"]
    assert responses[-1]["error"] == "rate limited (429)"
    assert events.of("turn_finished")[0]["error"]["code"] == -32007
    assert not session.is_running()
    assert await session.run("again") == "echo: again"


async def test_idle_timeout_fails_the_turn(workspace: Path, autojump_clock: Any) -> None:
    """G-039: a provider silent for longer than the idle timeout fails with ProviderFailed
    giving an idle-timeout reason."""
    provider = scripted([{"text": "late", "delayMs": 5000}])
    session = new_session(workspace, provider, idle_timeout=1.0)
    with pytest.raises(ProviderFailed) as failed:
        await session.run("wait")
    assert "idle timeout" in failed.value.data["reason"]  # type: ignore[index]


async def test_errors_are_failed_results(workspace: Path) -> None:
    """G-202, G-204, G-205: a permission denial, an unknown tool and argument text that is
    not JSON each come back as a failed result paired with its call; the turn completes."""

    class RawProvider:
        name, kind, model = "raw", "scripted", "raw"
        context_window: int | None = None

        def __init__(self) -> None:
            self.calls = 0

        async def complete(self, request: ModelRequest, observer: StreamObserver) -> ModelReply:
            self.calls += 1
            await trio.lowlevel.checkpoint()
            if self.calls > 1:
                return ModelReply("done", [])
            return ModelReply(
                "",
                [
                    ToolCall("c1", "Write", {"file_path": "x.txt", "content": "x"}),
                    ToolCall("c2", "Teleport", {}),
                    ToolCall("c3", "Read", {}, raw_arguments='{"file_path": '),
                ],
            )

        async def aclose(self) -> None:
            pass

    events = Events()
    session = new_session(
        workspace, RawProvider(), tools=builtin_tools(), permission_mode="plan", event_sink=events
    )
    assert await session.run("try") == "done"
    # Calls that could not run at all still reach clients: finished, failed, never started.
    finished = {e["callId"]: e for e in events.of("tool_finished")}
    assert {call: (e["tool"], e["ok"]) for call, e in finished.items()} == {
        "c2": ("Teleport", False),
        "c3": ("Read", False),
    }
    assert "unknown tool" in finished["c2"]["preview"]
    assert events.of("tool_started") == []
    results = {m.tool_call_id: m for m in session.get_history() if m.role == "tool"}
    assert set(results) == {"c1", "c2", "c3"}
    assert all(not m.ok for m in results.values())
    assert "plan mode denies" in (results["c1"].content or "")
    assert "unknown tool" in (results["c2"].content or "")
    assert "not valid JSON" in (results["c3"].content or "")
    assert not (workspace / "x.txt").exists()


async def test_persistence_with_and_without_store(workspace: Path, tmp_path: Path) -> None:
    """G-010, G-212: with a store, a completed run leaves the settled history in the saved
    snapshot (which makes a valid record); without one, turns and shutdown write no file."""
    store = MemoryStore()
    session = new_session(workspace, store=store, session_id="s-kept")
    await session.run("keep me")
    snapshot = store.last
    assert [m.content for m in snapshot.messages] == ["keep me", "echo: keep me"]
    assert snapshot.turn_count == 1
    assert snapshot.cwd == str(workspace)
    record = snapshot.to_record(
        created_at="2025-01-01T00:00:00Z", updated_at="2025-01-01T00:00:01Z"
    )
    decoded = decode_record(encode_record(record))
    assert isinstance(decoded, Valid)
    assert decoded.record.messages == snapshot.messages
    assert decoded.record.settings.script == []
    before = sorted(p for p in tmp_path.rglob("*"))
    bare = new_session(workspace)
    await bare.run("nothing stored")
    await bare.shutdown()
    assert sorted(p for p in tmp_path.rglob("*")) == before
    state = Path(os.environ["XDG_STATE_HOME"])
    assert list(state.rglob("*")) == []


async def test_log_replays_to_history(workspace: Path) -> None:
    """G-144, G-145, G-149: the session log of tool turns and a compaction decodes
    completely, records each request with its response, and replays to the same history."""
    log = FileLog(workspace.parent, "s-log")
    session = new_session(
        workspace,
        scripted(TOOL_THEN_TEXT),
        tools=builtin_tools(),
        logger=log.logger,
        session_id="s-log",
        system_message="sys",
    )
    await session.run("one")
    await session.compact()
    await session.run("two")
    await session.shutdown()
    source = FileLogSource(log.path)
    assert replay_log(source) == session.get_history()
    report = validate_log(source)
    assert report.complete, report.problems
    names = log.events()
    assert names[0] == "session_start"
    assert names[-1] == "session_end"
    assert names.count("provider_request") == names.count("provider_response") == 3
    calls = [e.data for e in log.entries() if e.event == "tool_call"]
    assert calls[0]["arguments"] == {"file_path": str(workspace / "notes.txt")}  # G-117


async def test_history_edits_refused_while_running(workspace: Path) -> None:
    """G-064: injecting a message, clearing history or swapping the provider while a turn
    runs is refused; between turns they work."""
    provider = scripted()
    provider.gate = trio.Event()
    session = new_session(workspace, provider, system_message="sys")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(session.run, "hello")
        await provider.entered.wait()
        with pytest.raises(SessionBusy):
            session.inject_message(Message.user("sneaky"))
        with pytest.raises(SessionBusy):
            session.clear_history()
        with pytest.raises(SessionBusy):
            session.swap_provider(scripted())
        provider.gate.set()
    session.inject_message(Message.user("note"))
    assert session.get_history()[-1].content == "note"
    session.clear_history()
    assert [m.role for m in session.get_history()] == ["system"]
    other = scripted(context_window=1000)
    session.swap_provider(other)
    assert session.get_provider() is other
    assert session.get_context_state().max_tokens == 1000


async def test_runtime_options(workspace: Path) -> None:
    """G-037, G-038, G-050, G-056, G-102: ids are generated or kept; a relative cwd is
    refused; effort reads "auto" when unset; preset id and subagent flag are pure state."""
    generated = new_session(workspace)
    assert generated.session_id
    assert generated.cwd == workspace
    assert new_session(workspace).session_id != generated.session_id
    assert new_session(workspace, session_id="mine-1").session_id == "mine-1"
    with pytest.raises(InvalidSetting):
        new_session(Path("relative/dir"))
    with pytest.raises(InvalidSetting):
        new_session(workspace, session_id="../escape")
    assert generated.get_model_effort() == "auto"
    mode, rules = generated.permission_mode, generated.rules()
    generated.active_preset = "reviewer"
    generated.parallel_subagents = True
    assert generated.permission_mode == mode
    assert generated.rules() == rules
    assert generated.model == "scripted"
