"""A provider request's tool set is stored off the event loop (architecture decision 62).

The first ``provider_request`` of a session names a sidecar not stored yet (its tools'
schemas): creating it takes two fsyncs, which ran on the event loop and held every other
session, RPC and event for their length. Now the sidecar is stored on a worker thread before
its line is written, and whatever the session logs meanwhile (the request's deltas, its
response, the turn's other lines) is written after it, so the log reads in the order it always
did and no line ever names a sidecar that is not there. The same holds for the whole history a
loaded session logs when it starts, whose sidecar a long history needs.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.shapes import Message
from robotad.agent.provider import ModelReply, ModelRequest, StreamObserver
from robotad.storage.log_files import FileLogSink, FileLogSource
from robotad.storage.log_replay import validate_log
from robotad.storage.session_log import SessionLogger, decode_log
from tests.session.session_harness import LIMIT, Recorder, ShoutTool, new_session, scripted

SID = "s-offloop"

#: A session's log for a turn with one tool round, streamed in pieces: the order it always had.
TURN_ORDER = [
    "session_start",
    "turn_started",
    "history_mutation",  # the user's prompt
    "user_message",
    "context_update",  # estimated
    "provider_request",
    "text_delta",
    "text_delta",
    "history_mutation",  # the reply calling Shout
    "provider_response",
    "context_update",  # exact
    "tool_call",
    "permission_decision",
    "history_mutation",  # Shout's result
    "tool_result",
    "context_update",
    "provider_request",
    "text_delta",
    "text_delta",
    "history_mutation",
    "provider_response",
    "context_update",
    "turn_completed",
]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    cwd = tmp_path / "project"
    cwd.mkdir()
    return cwd


def _script() -> list[dict[str, Any]]:
    shout = {"name": "Shout", "arguments": {"text": "hi"}}
    return [
        {"text": "calling it", "chunks": 2, "toolCalls": [shout]},
        {"text": "all done", "chunks": 2},
    ]


def _payload_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool]]:
    """Every fsync of a file or folder of a session's sidecars from now on: (its path, whether
    it ran on the thread this test (and its trio loop) runs on)."""
    real = os.fsync
    loop_thread = threading.get_ident()
    seen: list[tuple[str, bool]] = []

    def fsync(fd: Any) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}") if isinstance(fd, int) else str(fd)
        if ".payloads" in path:
            seen.append((path, threading.get_ident() == loop_thread))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return seen


async def test_a_new_tool_set_is_stored_off_the_loop_and_the_log_reads_as_before(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fsyncs = _payload_fsyncs(monkeypatch)
    path = workspace.parent / f"{SID}.jsonl"
    session = new_session(
        workspace,
        scripted(_script()),
        tools=[ShoutTool()],
        permissions={"allow": ["Shout"]},
        logger=SessionLogger(SID, FileLogSink(path)),
        session_id=SID,
    )
    with trio.fail_after(LIMIT):
        assert await session.run("shout") == "all done"

    assert fsyncs, "the tool set's sidecar was stored"
    assert [path for path, on_loop in fsyncs if on_loop] == []
    entries = decode_log(FileLogSource(path))
    assert [entry.event for entry in entries] == TURN_ORDER
    tools = [e.data["request"]["tools"] for e in entries if e.event == "provider_request"]
    assert [[tool["name"] for tool in logged] for logged in tools] == [["Shout"], ["Shout"]]
    assert validate_log(FileLogSource(path)).complete


class _HeldSink(FileLogSink):
    """A log sink whose sidecar creation waits for `release` once it has begun (`entered`,
    set on the loop), so a test can log while a sidecar is being stored."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.entered = trio.Event()
        self.release = threading.Event()
        self.stored_on: list[bool] = []
        self._token = trio.lowlevel.current_trio_token()
        self._loop_thread = threading.get_ident()

    def put_payload(self, content: bytes, sha256: str) -> str:
        self.stored_on.append(threading.get_ident() == self._loop_thread)
        self._token.run_sync_soon(self.entered.set)
        # Bounded: with the sidecar stored on the loop (the fault this guards against) the
        # loop would wait here, and the provider below never gets to release it.
        self.release.wait(LIMIT / 4)
        return super().put_payload(content, sha256)


class _StreamsWhileStored:
    """A provider wrapper that streams its reply only once the request's sidecar is being
    stored, and lets that store finish just before it returns."""

    def __init__(self, inner: Recorder, sink: _HeldSink) -> None:
        self.inner = inner
        self.sink = sink
        self.name, self.kind, self.model = inner.name, inner.kind, inner.model
        self.context_window = inner.context_window

    async def complete(self, request: ModelRequest, observer: StreamObserver) -> ModelReply:
        if request.purpose == "turn" and not self.sink.entered.is_set():
            await self.sink.entered.wait()
        try:
            return await self.inner.complete(request, observer)
        finally:
            self.sink.release.set()

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_what_is_logged_while_the_sidecar_is_stored_waits_behind_its_line(
    workspace: Path,
) -> None:
    """The request's deltas (and whatever follows while the store is under way) come after
    the request's line in the log, never before it: its line is written first, once its
    sidecar is there."""
    path = workspace.parent / f"{SID}.jsonl"
    sink = _HeldSink(path)
    provider = _StreamsWhileStored(scripted(_script()), sink)
    session = new_session(
        workspace,
        provider,
        tools=[ShoutTool()],
        permissions={"allow": ["Shout"]},
        logger=SessionLogger(SID, sink),
        session_id=SID,
    )
    with trio.fail_after(LIMIT):
        assert await session.run("shout") == "all done"

    # Stored off the loop (the second request may store it again if it comes before the
    # first store made the file: exclusive creation, its line waiting behind the first's).
    assert sink.stored_on
    assert not any(sink.stored_on)
    assert [entry.event for entry in decode_log(FileLogSource(path))] == TURN_ORDER
    assert validate_log(FileLogSource(path)).complete


async def test_a_loaded_history_over_the_spill_limit_is_stored_off_the_loop(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session loaded with a long history logs it whole (a ``replace``) when it starts; a
    history over the spill limit goes to a sidecar, stored on a worker thread, and the lines
    logged after it (the turn's) come after it."""
    fsyncs = _payload_fsyncs(monkeypatch)
    path = workspace.parent / f"{SID}.jsonl"
    history = [Message.user("a long prompt " * 6_000), Message.assistant("read it")]
    session = new_session(
        workspace,
        scripted([{"text": "again"}]),
        logger=SessionLogger(SID, FileLogSink(path)),
        session_id=SID,
        history=history,
        source="resume",
    )
    with trio.fail_after(LIMIT):
        assert await session.run("more") == "again"

    assert fsyncs, "the history went to a sidecar"
    assert [path for path, on_loop in fsyncs if on_loop] == []
    entries = decode_log(FileLogSource(path))
    assert [entry.event for entry in entries[:3]] == [
        "session_start",
        "history_mutation",
        "turn_started",
    ]
    assert entries[1].data["messages"][0]["content"] == history[0].content
    assert validate_log(FileLogSource(path)).complete
