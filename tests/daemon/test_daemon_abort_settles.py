"""``session/abort`` racing the natural end of the work it names, in process: the client that
aborted, the client that ran the turn, ``turn_finished``, the stored record and the session log
tell one story — completed or aborted, never one each (architecture decision 42)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from protocol.errors import RpcError, TurnAborted
from protocol.methods import CompactParams, CreateParams, RunParams, ScriptedToolCall, Step
from protocol.shapes import TurnCompleted, TurnWaiting
from robotad.agent.provider import ModelReply, ModelRequest, StreamObserver
from robotad.daemon.live import LiveSession
from robotad.daemon.manager import SessionManager
from robotad.daemon.operations import SessionOperations

TIMEOUT = 20.0
REPLY = "the whole reply"


class _Story:
    """What each party says of one turn: its run's answer, the abort's answer, the
    ``turn_finished`` statuses published, the stored record and the log's turn entries."""

    def __init__(self, manager: SessionManager, live: LiveSession) -> None:
        self.manager = manager
        self.live = live
        self.run: TurnCompleted | TurnWaiting | RpcError | None = None
        self.aborted: bool | None = None
        self.finished: list[str] = []
        live.hub.subscribe("watcher", self._seen)

    async def _seen(self, event: dict[str, Any]) -> None:
        if event["type"] == "turn_finished":
            self.finished.append(event["status"])

    def record(self) -> dict[str, Any]:
        path = self.manager.store.path_for(self.live.session_id)
        record: dict[str, Any] = json.loads(path.read_bytes())["record"]
        return record

    def logged_ends(self) -> list[str]:
        path = self.manager.logs_dir / f"{self.live.session_id}.jsonl"
        events = [json.loads(line)["event"] for line in path.read_text().splitlines()]
        return [e for e in events if e in ("turn_completed", "turn_aborted", "turn_failed")]


async def _run(ops: SessionOperations, story: _Story) -> None:
    try:
        story.run = await ops.run(RunParams(session_id=story.live.session_id, prompt="go"), None)
    except RpcError as exc:
        story.run = exc


def _hold_saves(
    live: LiveSession,
    reached: trio.Event,
    gate: trio.Event,
    holds: Callable[[Any], bool] = lambda snapshot: True,
) -> None:
    """Each save of `live` whose snapshot `holds` sets `reached`, then waits for `gate`."""
    save = live.writer.save

    async def held(snapshot: Any) -> None:
        if holds(snapshot):
            reached.set()
            await gate.wait()
        await save(snapshot)

    live.writer.save = held  # type: ignore[method-assign]


def _hold_the_save(live: LiveSession, reached: trio.Event, gate: trio.Event) -> None:
    """The save of the completed turn waits for `gate`."""
    _hold_saves(
        live, reached, gate, lambda snapshot: any(m.content == REPLY for m in snapshot.messages)
    )


def _hold_the_stop_hook(live: LiveSession, reached: trio.Event, gate: trio.Event) -> None:
    """The turn's Stop hook runs until `gate` (or until something stops it)."""
    lifecycle = live.session._lifecycle

    async def held(turn: Any) -> None:
        reached.set()
        await gate.wait()

    lifecycle.stop = held  # type: ignore[method-assign]


async def _abort_once_held(
    ops: SessionOperations, story: _Story, reached: trio.Event, gate: trio.Event
) -> None:
    """Run the story's turn; once it is held (`reached`), abort it, then let it go on."""
    async with trio.open_nursery() as clients:
        clients.start_soon(_run, ops, story)
        await reached.wait()
        story.aborted = await ops.abort(story.live.session_id)
        gate.set()
    await trio.testing.wait_all_tasks_blocked()


@pytest.mark.parametrize("hold", [_hold_the_save, _hold_the_stop_hook])
async def test_an_abort_as_a_turn_completes_is_no_abort(
    manager: SessionManager, tmp_path: Path, hold: Any
) -> None:
    """G-193, G-010: ``session/abort`` landing after a turn's last reply arrived — while its
    Stop hook ran or its record was being saved — answered ``aborted: true`` (robotactl
    printed "aborting the running turn", an ACP editor waited for a "cancelled" prompt) while
    the turn completed: its run answered the reply, ``turn_finished`` said "completed", the
    log ``turn_completed``. The reply decides the turn: such an abort now answers false, and
    only cuts the Stop hook short."""
    ops = SessionOperations(manager)
    with trio.fail_after(TIMEOUT):
        info = await manager.create(CreateParams(cwd=str(tmp_path), script=[Step(text=REPLY)]))
        live = await manager.session(info.session_id)
        story = _Story(manager, live)
        reached, gate = trio.Event(), trio.Event()
        hold(live, reached, gate)
        await _abort_once_held(ops, story, reached, gate)
    assert story.aborted is False
    assert isinstance(story.run, TurnCompleted)
    assert story.run.response == REPLY
    assert story.finished == ["completed"]
    assert story.logged_ends() == ["turn_completed"]
    record = story.record()
    assert [(m["content"], m["state"]) for m in record["messages"]][-1] == (REPLY, "complete")
    assert record["turnCount"] == 1
    assert not live.busy


class _LastReplyHeld:
    """A provider that streams the whole reply, then returns it once `gate` is set: the
    abort that lands in the same scheduler pass finds the turn about to complete."""

    def __init__(self, name: str, model: str) -> None:
        self.name, self.kind, self.model = name, "scripted", model
        self.context_window: int | None = None
        self.streamed = trio.Event()
        self.gate = trio.Event()

    async def complete(self, request: ModelRequest, observer: StreamObserver) -> ModelReply:
        observer.on_text(REPLY)
        self.streamed.set()
        await self.gate.wait()
        return ModelReply(REPLY, [])

    async def aclose(self) -> None:
        pass


async def test_an_abort_taken_as_the_last_reply_arrives_aborts_the_turn(
    manager: SessionManager, tmp_path: Path
) -> None:
    """G-192, G-191, G-193: an abort taken while the provider's last reply was on its way
    back to the turn (the turn's task woken with it, not yet running) answered
    ``aborted: true``, and the turn then completed as if never asked: nothing checked the
    signal between that reply and the end. It now ends aborted everywhere: TurnAborted,
    ``turn_finished`` "aborted", ``turn_aborted`` in the log, the reply kept as interrupted
    text."""
    ops = SessionOperations(manager)
    with trio.fail_after(TIMEOUT):
        info = await manager.create(CreateParams(cwd=str(tmp_path)))
        live = await manager.session(info.session_id)
        provider = _LastReplyHeld(live.session.provider_name, live.session.model)
        live.session.swap_provider(provider)
        story = _Story(manager, live)
        async with trio.open_nursery() as clients:
            clients.start_soon(_run, ops, story)
            await provider.streamed.wait()
            await trio.testing.wait_all_tasks_blocked()
            provider.gate.set()  # the turn is woken with the reply...
            story.aborted = await ops.abort(info.session_id)  # ...and the abort runs first
        await trio.testing.wait_all_tasks_blocked()
    assert story.aborted is True
    assert isinstance(story.run, TurnAborted)
    assert story.finished == ["aborted"]
    assert story.logged_ends() == ["turn_aborted"]
    record = story.record()
    assert [(m["content"], m["state"]) for m in record["messages"]][-1] == (REPLY, "interrupted")
    assert record["turnCount"] == 0
    assert not live.busy


async def test_an_abort_while_an_applied_compaction_is_saved_is_no_abort(
    manager: SessionManager, tmp_path: Path
) -> None:
    """G-193, G-180: an abort landing while a manual compaction's applied summary was being
    saved answered ``aborted: true``, yet ``session/compact`` answered ``compacted: true``
    and the history was the summary. Once the summary is applied the compaction is decided:
    the abort answers false."""
    ops = SessionOperations(manager)
    with trio.fail_after(TIMEOUT):
        script = [Step(text="first"), Step(summary="the summary")]
        info = await manager.create(CreateParams(cwd=str(tmp_path), script=script))
        await ops.run(RunParams(session_id=info.session_id, prompt="go"), None)
        live = await manager.session(info.session_id)
        reached, gate = trio.Event(), trio.Event()
        _hold_saves(live, reached, gate)
        told: dict[str, Any] = {}

        async def compact() -> None:
            told["compact"] = await ops.compact(CompactParams(session_id=info.session_id), None)

        async with trio.open_nursery() as clients:
            clients.start_soon(compact)
            await reached.wait()
            told["abort"] = await ops.abort(info.session_id)
            gate.set()
    assert told["abort"] is False
    assert told["compact"].compacted is True
    assert [m.content for m in live.session.get_history()][-1] == "the summary"


async def test_an_abort_as_a_turn_parks_is_no_abort(
    manager: SessionManager, tmp_path: Path
) -> None:
    """G-193, G-075: an abort landing while a turn that asked for approval saved its open
    round answered ``aborted: true`` while the run answered "waiting" and ``turn_finished``
    said "waiting". The park decides the turn: the abort answers false, the execution
    waits."""
    ops = SessionOperations(manager)
    write = ScriptedToolCall(name="Write", arguments={"file_path": "out.txt", "content": "x"})
    with trio.fail_after(TIMEOUT):
        info = await manager.create(
            CreateParams(cwd=str(tmp_path), script=[Step(tool_calls=[write])])
        )
        live = await manager.session(info.session_id)
        story = _Story(manager, live)
        reached, gate = trio.Event(), trio.Event()
        _hold_saves(live, reached, gate, lambda snap: any(m.calls for m in snap.messages))
        await _abort_once_held(ops, story, reached, gate)
    assert story.aborted is False
    assert isinstance(story.run, TurnWaiting)
    assert story.finished == ["waiting"]
    assert live.pending() is not None


async def test_an_abort_while_an_abandon_is_saved_is_no_abort(
    manager: SessionManager, tmp_path: Path
) -> None:
    """G-193, G-099: ``session/abandon`` holds the session while it saves the closed calls,
    and an abort landing then answered ``aborted: true``, though an abandon cannot be
    stopped and went on to answer ``abandoned: true``. It answers false."""
    ops = SessionOperations(manager)
    write = ScriptedToolCall(name="Write", arguments={"file_path": "out.txt", "content": "x"})
    with trio.fail_after(TIMEOUT):
        info = await manager.create(
            CreateParams(cwd=str(tmp_path), script=[Step(tool_calls=[write])])
        )
        waiting = await ops.run(RunParams(session_id=info.session_id, prompt="go"), None)
        assert isinstance(waiting, TurnWaiting)
        live = await manager.session(info.session_id)
        reached, gate = trio.Event(), trio.Event()
        _hold_saves(live, reached, gate)
        told: dict[str, Any] = {}
        async with trio.open_nursery() as clients:
            clients.start_soon(ops.abandon, info.session_id, waiting.execution_id)
            await reached.wait()
            told["abort"] = await ops.abort(info.session_id)
            gate.set()
    assert told["abort"] is False
    assert live.pending() is None
