"""A line whose sidecar is not stored yet is stored off the event loop and keeps its place
(architecture decision 62): `SessionLogger.place` takes the line's place in the log and
`store_pending` creates its sidecars on a worker thread, then writes it and every line logged
behind it, in order. No line is ever written before a sidecar it names is there."""

from __future__ import annotations

import contextlib
import errno
import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import robotad.storage.session_log
from robotad.storage import log_files
from robotad.storage.failure import StorageError
from robotad.storage.log_files import FileLogSink, FileLogSource, log_paths
from robotad.storage.session_log import PendingLine, SessionLogger, decode_log

SID = "s-pending"
T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


class WatchedSink(FileLogSink):
    """A `FileLogSink` noting, for each sidecar it creates, whether it ran on the thread of
    the test's event loop, and what the log held then; `refuse` fails every creation."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.loop_thread = threading.get_ident()
        self.stores: list[tuple[bool, int]] = []
        self.refuse = False

    def put_payload(self, content: bytes, sha256: str) -> str:
        lines = self._path.read_bytes().count(b"\n") if self._path.exists() else 0
        self.stores.append((threading.get_ident() == self.loop_thread, lines))
        if self.refuse:
            raise StorageError("logs/s-pending.payloads", "no space left on device", errno.ENOSPC)
        return super().put_payload(content, sha256)


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    return tmp_path / "state" / "logs"


@pytest.fixture
def sink(logs: Path) -> WatchedSink:
    return WatchedSink(log_paths(logs, SID)[0])


def _logger(sink: WatchedSink) -> SessionLogger:
    return SessionLogger(SID, sink, clock=lambda: T0)


def _request(index: int, *names: str) -> dict[str, Any]:
    tools = [{"name": name, "description": f"The {name} tool. " * 20} for name in names]
    return {
        "requestId": f"req-{index}",
        "provider": "scripted",
        "model": "scripted",
        "request": {"history_prefix": {"count": index}, "tools": tools},
    }


def _delta(text: str) -> dict[str, Any]:
    return {"text": text, "requestId": "req-0"}


def _written(sink: WatchedSink, logs: Path) -> list[str]:
    path = log_paths(logs, SID)[0]
    if not path.exists():
        return []
    return [json.loads(line)["event"] for line in path.read_text().splitlines()]


async def test_a_placed_line_is_stored_off_the_loop_and_lines_logged_meanwhile_follow_it(
    sink: WatchedSink, logs: Path
) -> None:
    logger = _logger(sink)
    logger.log("context_update", {"phase": "estimated", "usedTokens": 1, "maxTokens": 9})
    pending = logger.place("provider_request", _request(0, "Read", "Write"))
    assert pending is not None
    logger.log("text_delta", _delta("one"))
    logger.log("text_delta", _delta("two"))
    assert _written(sink, logs) == ["context_update"]  # the request's line waits: so do they
    assert sink.stores == []  # nothing stored yet, nothing stored on the loop

    with trio.fail_after(10):
        await logger.store_pending(pending)

    assert sink.stores == [(False, 1)]  # on a worker, before the line was written
    assert _written(sink, logs) == [
        "context_update",
        "provider_request",
        "text_delta",
        "text_delta",
    ]
    entries = decode_log(FileLogSource(log_paths(logs, SID)[0]))
    assert [t["name"] for t in entries[1].data["request"]["tools"]] == ["Read", "Write"]


async def test_a_tool_set_the_log_holds_is_written_at_once(sink: WatchedSink, logs: Path) -> None:
    """The next request with the same tools names a sidecar that is there: written at once,
    without a worker thread and without writing or hashing the sidecar again."""
    logger = _logger(sink)
    with trio.fail_after(10):
        await logger.store_and_log("provider_request", _request(0, "Read"))
        assert logger.place("provider_request", _request(1, "Read")) is None
        await logger.store_and_log("provider_request", _request(2, "Read"))
    assert len(sink.stores) == 1
    assert _written(sink, logs) == ["provider_request"] * 3


async def test_a_store_that_fails_drops_its_line_only(sink: WatchedSink, logs: Path) -> None:
    """A sidecar that cannot be stored: its line is not written (it would name a sidecar
    that is not there), the error is raised, and the lines behind it are written."""
    logger = _logger(sink)
    sink.refuse = True
    pending = logger.place("provider_request", _request(0, "Read"))
    assert pending is not None
    logger.log("text_delta", _delta("after"))
    with trio.fail_after(10), pytest.raises(StorageError):
        await logger.store_pending(pending)
    assert _written(sink, logs) == ["text_delta"]
    sink.refuse = False  # the space comes back: the tool set is stored with the next request
    with trio.fail_after(10):
        await logger.store_and_log("provider_request", _request(1, "Read"))
    assert len(decode_log(FileLogSource(log_paths(logs, SID)[0]))) == 2


async def test_a_cancelled_store_still_writes_its_line(sink: WatchedSink, logs: Path) -> None:
    """A store that started is never abandoned: the line and those behind it are written,
    and the cancellation comes after."""
    logger = _logger(sink)
    pending = logger.place("provider_request", _request(0, "Read"))
    assert pending is not None
    logger.log("text_delta", _delta("after"))
    with trio.fail_after(10), trio.CancelScope() as scope:
        scope.cancel()
        await logger.store_pending(pending)
        await trio.lowlevel.checkpoint()
    assert scope.cancelled_caught
    assert _written(sink, logs) == ["provider_request", "text_delta"]


async def test_closing_while_a_line_waits_leaves_no_file_open(
    sink: WatchedSink, logs: Path
) -> None:
    """`close` (the session shut down) while a line waits for its sidecar: once it and the
    lines behind it are written, the file is closed again."""
    logger = _logger(sink)
    pending = logger.place("provider_request", _request(0, "Read"))
    assert pending is not None
    logger.log("text_delta", _delta("after"))
    logger.close()
    with trio.fail_after(10):
        await logger.store_pending(pending)
    assert _written(sink, logs) == ["provider_request", "text_delta"]
    assert not sink.is_open


async def test_placed_lines_are_stored_one_after_the_other_and_a_shared_sidecar_made_once(
    sink: WatchedSink, logs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A big tool result is named by two lines (its ``history_mutation`` and its
    ``tool_result``): the second line's store waits for the first's, even when it is handed
    over first, so the sidecar is created once (no two threads racing to link it, the loser
    returning before the winner synced the folder) and the lines are written in order."""
    handed: list[list[str]] = []
    run_blocking = robotad.storage.session_log.run_blocking

    async def noting(function: Any, sidecars: list[tuple[str, bytes]]) -> Any:
        handed.append([name for name, _ in sidecars])
        return await run_blocking(function, sidecars)

    monkeypatch.setattr(robotad.storage.session_log, "run_blocking", noting)
    created: list[Path] = []
    create_exclusive = log_files.fsio.create_exclusive

    def counting(path: Path, data: bytes) -> bool:
        created.append(path)
        return create_exclusive(path, data)

    monkeypatch.setattr(log_files.fsio, "create_exclusive", counting)
    logger = _logger(sink)
    content = "r" * 70_000
    first = logger.place(
        "tool_result", {"callId": "c-1", "tool": "T", "ok": True, "content": content}
    )
    second = logger.place(
        "tool_result", {"callId": "c-1", "tool": "T", "ok": True, "content": content}
    )
    assert first is not None
    assert second is not None
    logger.log("text_delta", _delta("after"))
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(logger.store_pending, second)
            await trio.testing.wait_all_tasks_blocked()
            assert handed == []  # the second line's store waits for the first's
            nursery.start_soon(logger.store_pending, first)
        await logger.written()
    assert len(handed) == 2
    assert len(created) == 1
    assert _written(sink, logs) == ["tool_result", "tool_result", "text_delta"]
    entries = decode_log(FileLogSource(log_paths(logs, SID)[0]))
    assert [entry.data["content"] for entry in entries[:2]] == [content, content]


async def test_a_line_naming_a_sidecar_a_failing_store_linked_is_stored_after_it(
    sink: WatchedSink, logs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store links its sidecar, then its folder cannot be synced: the name is taken back
    and its line dropped. A line placed meanwhile naming the same sidecar found it there
    (the look) and waited behind as a plain line; written once the store failed, it named a
    sidecar that was gone, and the whole log no longer decoded. A sidecar a waiting line is
    storing is one to store again after it: the line keeps its place, the sidecar is made
    by its own store, and only the failed store's line is missing."""
    logger = _logger(sink)
    with trio.fail_after(10):
        await logger.store_and_log("provider_request", _request(0, "Read"))  # folders made
    payloads = log_paths(logs, SID)[1]
    token = trio.lowlevel.current_trio_token()
    syncing = trio.Event()
    gate = threading.Event()
    fsync_dir = log_files.fsio.fsync_dir
    failed: list[Path] = []

    def failing_once(directory: Path) -> None:
        if directory == payloads and not failed:
            failed.append(directory)
            token.run_sync_soon(syncing.set)  # the sidecar is linked: the look finds it
            gate.wait(10)  # bounded: a broken test ends
            raise OSError(errno.EIO, "Input/output error")
        fsync_dir(directory)

    monkeypatch.setattr(log_files.fsio, "fsync_dir", failing_once)

    async def storing(pending: PendingLine) -> None:
        with contextlib.suppress(StorageError):
            await logger.store_pending(pending)

    first = logger.place("provider_request", _request(1, "Write"))
    assert first is not None
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(storing, first)
            await syncing.wait()
            second = logger.place("provider_request", _request(2, "Write"))
            if second is not None:
                nursery.start_soon(storing, second)
            await trio.testing.wait_all_tasks_blocked()
            gate.set()
    entries = decode_log(FileLogSource(log_paths(logs, SID)[0]))
    assert [entry.data["requestId"] for entry in entries] == ["req-0", "req-2"]
    assert [t["name"] for t in entries[1].data["request"]["tools"]] == ["Write"]
    assert second is not None  # it stored the sidecar again, after the failed store
