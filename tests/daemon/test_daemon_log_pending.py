"""``session/log`` of a loaded session reads every line the session logged before the call,
also one still waiting for its sidecar, stored on a worker thread (architecture decision 76):
the log it checks rebuilds the history the session holds, in process."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import trio

from protocol.methods import CreateParams, LogResult, Step
from protocol.shapes import Message
from robotad.daemon.manager import SessionManager
from robotad.daemon.operations import SessionOperations
from robotad.storage.log_files import FileLogSink
from robotad.storage.sidecars import DEFAULT_SPILL_LIMIT
from tests.storage.gates import LIMIT, held_back


async def test_session_log_waits_for_a_line_whose_sidecar_is_being_stored(
    manager: SessionManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A message over the spill limit entered the history just before ``session/log``: its
    line waits for its sidecar, and the log read without it did not rebuild the history the
    session holds (an incomplete log, for a moment). The read now waits for it."""
    gate = threading.Event()
    put_payload = FileLogSink.put_payload

    def held(sink: FileLogSink, content: bytes, sha256: str) -> str:
        if len(content) > DEFAULT_SPILL_LIMIT:
            gate.wait(LIMIT)  # bounded: a broken test ends
        return put_payload(sink, content, sha256)

    monkeypatch.setattr(FileLogSink, "put_payload", held)
    ops = SessionOperations(manager)
    with trio.fail_after(LIMIT):
        info = await manager.create(CreateParams(cwd=str(tmp_path), script=[Step(text="hi")]))
        live = await manager.session(info.session_id)
    live.session.inject_message(Message.user("v" * (DEFAULT_SPILL_LIMIT + 10)))
    results: list[LogResult] = []

    async def read() -> None:
        results.append(await ops.log(info.session_id))

    await held_back(gate, read)
    (result,) = results
    assert result.problems == []
    assert result.complete
    assert result.entries == 2  # session_start, and the message's history_mutation
