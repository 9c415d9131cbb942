"""Compaction through the Session: manual and automatic, failure, abort, no-op."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.errors import CompactionAborted, CompactionFailed
from robotad.agent.provider import ModelReply, ModelRequest, ProviderError, StreamObserver
from robotad.session.compaction.summary import prompt_budget
from robotad.session.errors import InvalidSetting
from robotad.session.session import Session
from tests.session.session_harness import (
    LIMIT,
    Events,
    FileLog,
    MemoryStore,
    Recorder,
    every_event,
    hook_recorder,
    hook_records,
    hooks_for,
    new_session,
    scripted,
)

BIG: dict[str, Any] = {"text": "y" * 40, "usage": {"inputTokens": 180, "outputTokens": 10}}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    cwd = tmp_path / "project"
    cwd.mkdir()
    return cwd


def crowded(
    workspace: Path, steps: list[dict[str, Any]], **kwargs: Any
) -> tuple[Session, Recorder]:
    """A session whose 200-token window is over the default threshold after its first turn
    (the BIG step reports 190 tokens used)."""
    provider = scripted([BIG, *steps], context_window=200)
    return new_session(workspace, provider, system_message="sys", **kwargs), provider


async def test_manual_compaction(workspace: Path) -> None:
    """G-172, G-174, G-175, G-176, G-055: the summary call is text-only, leaves the system
    message out and carries the instructions; history becomes the system message then the
    summary; the trigger "manual" reaches the event and the log."""
    events = Events()
    log = FileLog(workspace.parent, "s-man")
    provider = scripted([{"text": "answer"}, {"summary": "they said hi"}])
    session = new_session(
        workspace,
        provider,
        system_message="sys",
        event_sink=events,
        logger=log.logger,
        session_id="s-man",
    )
    await session.run("hi")
    outcome = await session.compact("mention greetings")
    assert outcome.compacted
    assert outcome.before != outcome.after
    (request,) = provider.compaction_requests
    assert request.tools == []
    assert request.tool_choice == "none"
    text = request.messages[0].content or ""
    assert "mention greetings" in text
    assert "sys" not in text.split("\n")[-3:]
    assert all(m.role != "system" for m in request.messages)
    history = session.get_history()
    assert [(m.role, m.content) for m in history] == [("system", "sys"), ("user", "they said hi")]
    compaction = events.of("compaction")
    assert [(e["trigger"], e["phase"], e["turnId"]) for e in compaction] == [
        ("manual", "started", None),
        ("manual", "completed", None),
    ]
    logged = [e.data for e in log.entries() if e.event == "context_compact"]
    assert [(d["trigger"], d["phase"]) for d in logged] == [
        ("manual", "started"),
        ("manual", "completed"),
    ]


async def test_auto_compaction_before_the_prompt(workspace: Path) -> None:
    """G-188, G-189, G-173, G-055: a run starting at or over the threshold compacts first —
    text-only even when the turn asks for a tool — the summary excludes the new prompt, which
    follows the summary; the event carries trigger "auto" and the turn's id."""
    events = Events()
    session, provider = crowded(workspace, [{"summary": "earlier: y"}], event_sink=events)
    await session.run("first")
    assert not provider.compaction_requests
    await session.run("second", turn_id="t-2", tool_choice="required")
    (request,) = provider.compaction_requests
    assert request.tool_choice == "none"
    assert request.tools == []
    assert "second" not in (request.messages[0].content or "")
    history = [(m.role, m.content) for m in session.get_history()]
    assert history == [
        ("system", "sys"),
        ("user", "earlier: y"),
        ("user", "second"),
        ("assistant", "echo: second"),
    ]
    compaction = [(e["trigger"], e["phase"], e["turnId"]) for e in events.of("compaction")]
    assert compaction == [("auto", "started", "t-2"), ("auto", "completed", "t-2")]
    order = events.types()
    assert order.index("compaction") > order.index("turn_started", order.index("turn_finished"))


async def test_an_auto_compaction_is_saved_before_it_is_told_completed(workspace: Path) -> None:
    """What the store holds when "completed" goes out (and the PostCompact hook starts): the
    compacted history. It was saved after the hook, so a daemon stopped during the hook had
    logged "completed" over a record that never had it; nothing of the new turn is in it."""
    store = MemoryStore()
    stored_at_completion: list[list[str | None]] = []
    events = Events()

    def sink(event: Any) -> None:
        events(event)
        if events.items[-1]["type"] == "compaction" and events.items[-1]["phase"] == "completed":
            stored_at_completion.append([m.content for m in store.last.messages])

    session, _ = crowded(workspace, [{"summary": "earlier: y"}], event_sink=sink, store=store)
    await session.run("first")
    await session.run("second")
    assert stored_at_completion == [["sys", "earlier: y"]]
    assert [m.content for m in store.last.messages][-2:] == ["second", "echo: second"]


async def test_the_summary_request_fits_the_sessions_window(workspace: Path) -> None:
    """A history past the window (one prompt of 20,000 characters in a 2,000-token window)
    is summarised in a request that fits it (`prompt_budget`), not one the model must refuse
    on every later run."""
    crowding = {"text": "ok", "usage": {"inputTokens": 1_900, "outputTokens": 10}}
    provider = scripted([crowding, {"summary": "they pasted a lot"}], context_window=2_000)
    session = new_session(workspace, provider, system_message="sys")
    await session.run("x" * 20_000)
    await session.run("next")
    (request,) = provider.compaction_requests
    assert len(request.messages[0].content or "") <= prompt_budget(2_000)
    assert [m.content for m in session.get_history()][:2] == ["sys", "they pasted a lot"]


async def test_threshold_rules(workspace: Path) -> None:
    """G-052, G-053, G-054, G-188: thresholds are validated; false disables automatic
    compaction (explicit still works); a change during a run applies from the next run."""
    for bad in (0, -0.5, 1.5, True, "0.5", None):
        with pytest.raises(InvalidSetting):
            new_session(workspace, auto_compact_threshold=bad)
    session, provider = crowded(workspace, [], auto_compact_threshold=False)
    await session.run("first")
    await session.run("second")
    assert not provider.compaction_requests
    assert (await session.compact()).compacted
    with pytest.raises(InvalidSetting):
        session.auto_compact_threshold = 2

    changing, provider = crowded(workspace, [], auto_compact_threshold=False)
    provider.gate = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(changing.run, "first")
        await provider.entered.wait()
        changing.auto_compact_threshold = 0.5  # applies to the next run, not this one
        provider.gate.set()
    assert not provider.compaction_requests
    await changing.run("second")
    assert len(provider.compaction_requests) == 1


async def test_never_during_a_stream(workspace: Path) -> None:
    """G-190: usage crossing the threshold mid-turn does not compact within that turn."""
    provider = scripted(
        [
            {"toolCalls": [{"name": "Missing", "arguments": {}}], **{"usage": BIG["usage"]}},
            {"text": "after the tool round", "usage": BIG["usage"]},
        ],
        context_window=200,
    )
    session = new_session(workspace, provider)
    assert await session.run("go") == "after the tool round"
    assert not provider.compaction_requests


async def test_invalid_summary_changes_nothing(workspace: Path) -> None:
    """G-177, G-178: an empty summary fails with CompactionFailed (trigger) and leaves
    history, context state and the stored record as they were."""
    store = MemoryStore()
    events = Events()
    session = new_session(
        workspace,
        scripted([{"text": "a"}, {"summary": "   "}]),
        system_message="sys",
        store=store,
        event_sink=events,
    )
    await session.run("hi")
    history, state, saves = session.get_history(), session.get_context_state(), len(store.saved)
    with pytest.raises(CompactionFailed) as failed:
        await session.compact()
    assert failed.value.data == {"sessionId": session.session_id, "trigger": "manual"}
    assert session.get_history() == history
    assert session.get_context_state() == state
    assert len(store.saved) == saves
    assert [e["phase"] for e in events.of("compaction")] == ["started", "failed"]


async def test_failed_auto_compaction_fails_the_run(workspace: Path) -> None:
    """G-179: a failed automatic compaction fails the run with CompactionFailed (trigger
    "auto"); the new prompt is never sent nor added to history."""
    events = Events()
    session, provider = crowded(workspace, [{"summary": ""}], event_sink=events)
    await session.run("first")
    history = session.get_history()
    with pytest.raises(CompactionFailed) as failed:
        await session.run("second", turn_id="t-x")
    assert failed.value.data["trigger"] == "auto"  # type: ignore[index]
    assert len(provider.turn_requests) == 1
    assert session.get_history() == history
    finished = events.of("turn_finished")[-1]
    assert finished["status"] == "failed"
    assert finished["error"]["code"] == -32008
    assert not session.is_running()


class SummaryControl:
    """Wraps a provider: compaction calls can fail, raise, wait, or abort as they return."""

    def __init__(self, inner: Recorder) -> None:
        self.inner = inner
        self.name, self.kind, self.model = inner.name, inner.kind, inner.model
        self.context_window = inner.context_window
        self.mode = "pass"
        self.entered = trio.Event()
        self.session: Session | None = None

    async def complete(self, request: ModelRequest, observer: StreamObserver) -> ModelReply:
        if request.purpose != "compaction":
            return await self.inner.complete(request, observer)
        self.entered.set()
        if self.mode == "error":
            raise ProviderError("summariser down")
        if self.mode == "crash":
            raise RuntimeError("bug")
        if self.mode == "wait":
            await trio.sleep_forever()
        while self.mode == "endless":  # a summary that never ends
            observer.on_text("x" * 65_536)
            await trio.lowlevel.checkpoint()
        reply = await self.inner.complete(request, observer)
        if self.mode == "abort-on-return":
            assert self.session is not None
            self.session.abort()
        return reply

    async def aclose(self) -> None:
        pass


@pytest.mark.parametrize("mode", ["error", "crash"])
async def test_provider_failure_is_compaction_failed(workspace: Path, mode: str) -> None:
    """G-210, G-178: a provider error (or an unexpected exception) while summarising is
    CompactionFailed, never ProviderFailed, and history is untouched."""
    control = SummaryControl(scripted([{"text": "a"}]))
    session = new_session(workspace, control)
    await session.run("hi")
    history = session.get_history()
    control.mode = mode
    with pytest.raises(CompactionFailed):
        await session.compact()
    assert session.get_history() == history


async def test_a_summary_that_never_ends_is_stopped_at_the_reply_bound(workspace: Path) -> None:
    """A summary is a reply like any other: past its bound the compaction fails, naming it,
    instead of filling memory; history is untouched."""
    control = SummaryControl(scripted([{"text": "a"}]))
    session = new_session(workspace, control)
    await session.run("hi")
    history = session.get_history()
    control.mode = "endless"
    with trio.fail_after(60), pytest.raises(CompactionFailed) as caught:
        await session.compact()
    assert "the reply passed 2 Mi characters without ending" in str(caught.value)
    assert session.get_history() == history


@pytest.mark.parametrize("mode", ["wait", "abort-on-return"])
async def test_abort_during_compaction(workspace: Path, mode: str) -> None:
    """G-180, G-181, G-182, G-193: an abort while the summary call is in flight, or after it
    returned but before it was applied, ends the compaction as CompactionAborted with phase
    "aborted" and history untouched."""
    control = SummaryControl(scripted([{"text": "a"}]))
    events = Events()
    session = new_session(workspace, control, event_sink=events)
    control.session = session
    await session.run("hi")
    history = session.get_history()
    control.mode = mode
    caught: list[CompactionAborted] = []

    async def compact() -> None:
        try:
            await session.compact()
        except CompactionAborted as exc:
            caught.append(exc)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(compact)
        if mode == "wait":
            await control.entered.wait()
            assert session.abort() is True
    assert caught
    assert caught[0].data == {"sessionId": session.session_id, "trigger": "manual"}
    assert session.get_history() == history
    assert [e["phase"] for e in events.of("compaction")] == ["started", "aborted"]
    assert not session.is_running()


async def test_aborted_auto_compaction_aborts_the_turn(workspace: Path) -> None:
    """G-182: a turn whose auto-compaction was aborted finishes "aborted", not "failed"."""
    events = Events()
    control = SummaryControl(scripted([BIG], context_window=200))
    session = new_session(workspace, control, event_sink=events)
    await session.run("first")
    control.mode = "wait"

    async def second() -> None:
        with pytest.raises(CompactionAborted):
            await session.run("second")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(second)
        await control.entered.wait()
        session.abort()
    finished = events.of("turn_finished")[-1]
    assert finished["status"] == "aborted"
    assert events.of("compaction")[-1]["phase"] == "aborted"
    assert "second" not in [m.content for m in session.get_history()]


async def test_nothing_to_summarise_is_a_noop(workspace: Path, tmp_path: Path) -> None:
    """G-183, G-184: a fresh session (only its system message) compacts to compacted:false
    with history unchanged, and no event, log entry or compaction hook is written or fired."""
    events = Events()
    log = FileLog(workspace.parent, "s-noop")
    provider = scripted()
    hookdir = tmp_path / "hooks"
    hookdir.mkdir()
    hooks = hooks_for(
        workspace, every_event(hook_recorder(hookdir, "rec"), ["PreCompact", "PostCompact"])
    )
    session = new_session(
        workspace,
        provider,
        system_message="sys",
        event_sink=events,
        logger=log.logger,
        session_id="s-noop",
        hooks=hooks,
    )
    with trio.fail_after(LIMIT):
        outcome = await session.compact()
    assert not outcome.compacted
    assert outcome.before == outcome.after
    assert [m.role for m in session.get_history()] == ["system"]
    assert events.items == []
    assert provider.requests == []
    assert "context_compact" not in log.events()
    assert hook_records(hookdir, "rec") == []


async def test_idle_summary_call_fails_compaction(workspace: Path, autojump_clock: Any) -> None:
    """G-039, G-210: the idle timeout applies to the summary call too; a silent summariser
    fails the compaction with CompactionFailed, history untouched."""
    session = new_session(
        workspace, scripted([{"text": "a"}, {"summary": "late", "delayMs": 5000}]), idle_timeout=1.0
    )
    await session.run("hi")
    history = session.get_history()
    with pytest.raises(CompactionFailed) as failed:
        await session.compact()
    assert "idle timeout" in failed.value.message
    assert session.get_history() == history
