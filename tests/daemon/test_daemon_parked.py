"""A parked approval is visible from the daemon's first moment, loaded or not (PROTOCOL
§10.2, issue 14): ``session/list`` says waiting, ``daemon/status`` counts it."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from protocol.shapes import Message
from robotad.daemon.parked import ParkedSessions, journal_waits
from robotad.storage.journal_records import (
    EffectFinishedRecord,
    EffectStartedRecord,
    FinishedRecord,
    RequestRecord,
    StartedRecord,
    encode_journal_record,
)
from tests.daemon_helpers import IO_TIMEOUT, DaemonHome, connect, running_daemon

from .test_daemon_lifecycle import create_waiting


async def _row(client: object, session_id: str) -> dict[str, object]:
    rows = (await client.call("session/list"))["sessions"]  # type: ignore[attr-defined]
    return next(r for r in rows if r["sessionId"] == session_id)


async def test_a_parked_approval_is_waiting_after_a_restart_before_anything_loads_it(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    home = DaemonHome(tmp_path_factory.mktemp("parked"))
    with running_daemon(home) as daemon, trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await create_waiting(client, tmp_path)
            idle = (await client.call("session/create", {"cwd": str(tmp_path)}))["sessionId"]
    with running_daemon(home) as again, trio.fail_after(IO_TIMEOUT):
        async with connect(again) as client:
            status = await client.call("daemon/status")
            assert status["sessions"] == {"loaded": 0, "running": 0, "waiting": 1}
            row = await _row(client, session_id)
            assert (row["loaded"], row["waiting"]) == (False, True)
            assert (await _row(client, idle))["waiting"] is False
            pending = (await client.call("session/pending", {"sessionId": session_id}))["pending"]
            await client.call(
                "session/abandon",
                {"sessionId": session_id, "executionId": pending["executionId"]},
            )
            await client.call("session/close", {"sessionId": session_id})
            row = await _row(client, session_id)
            assert (row["loaded"], row["waiting"]) == (False, False)
            assert (await client.call("daemon/status"))["sessions"]["waiting"] == 0


def _journal(folder: Path, name: str, *records: object, tail: bytes = b"") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = b"".join(encode_journal_record(r) for r in records)  # type: ignore[arg-type]
    (folder / f"{name}.jsonl").write_bytes(lines + tail)


def test_the_journal_scan(tmp_path: Path) -> None:
    def started(execution: str) -> StartedRecord:
        return StartedRecord(
            id=f"{execution}-s",
            execution_id=execution,
            timestamp="2026-12-01T00:00:00Z",
            turn_id="t",
            session_id="s",
            cwd="/",
            provider="scripted",
            model="scripted",
            user_message_id="m",
        )

    def asked(execution: str) -> RequestRecord:
        return RequestRecord(
            id=f"{execution}-r",
            execution_id=execution,
            timestamp="2026-12-01T00:00:00Z",
            request_id="req",
            call_id="c",
            tool="Write",
            arguments={},
            reason="ask",
        )

    def finished(execution: str) -> FinishedRecord:
        return FinishedRecord(
            id=f"{execution}-f",
            execution_id=execution,
            timestamp="2026-12-01T00:00:00Z",
            status="completed",
        )

    def effect(execution: str, *, done: bool) -> object:
        if not done:
            return EffectStartedRecord(
                id=f"{execution}-e",
                execution_id=execution,
                timestamp="2026-12-01T00:00:00Z",
                call_id="c",
            )
        return EffectFinishedRecord(
            id=f"{execution}-d",
            execution_id=execution,
            timestamp="2026-12-01T00:00:00Z",
            call_id="c",
            message=Message.tool("c", "Bash", "done", ok=True),
        )

    root = tmp_path / "journal"
    _journal(root / "settled", "x1", started("x1"), asked("x1"), finished("x1"))
    _journal(root / "quiet", "x2", started("x2"), tail=b'{"torn')
    _journal(root / "asking", "x3", started("x3"), asked("x3"), tail=b'{"torn')
    _journal(root / "damaged", "x4", started("x4"), tail=b"not json\n")
    _journal(root / "running", "x5", started("x5"), effect("x5", done=False))
    _journal(root / "ran", "x6", started("x6"), effect("x6", done=False), effect("x6", done=True))
    _journal(root / "orphan", "x7", started("x7"), asked("x7"))
    (root / "..bad").mkdir()
    names = ("settled", "quiet", "asking", "damaged", "running", "ran")
    assert [journal_waits(root / n) for n in names] == [False, False, True, True, True, False]
    parked = ParkedSessions()
    parked.scan(tmp_path, has_record=lambda session_id: session_id in names)
    assert {n for n in (*names, "orphan", "..bad") if n in parked} == {
        "asking",
        "damaged",
        "running",
    }
    assert parked.count_unloaded({"asking"}) == 2
