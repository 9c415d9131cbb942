"""A parked approval is visible from the daemon's first moment, loaded or not (PROTOCOL
§10.2, issue 14): ``session/list`` says waiting, ``daemon/status`` counts it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, TypeVar

import pytest
import trio

from protocol.shapes import Message, ToolCall
from robotad.daemon.parked import ParkedSessions, journal_waits
from robotad.storage.journal_records import (
    EffectFinishedRecord,
    EffectStartedRecord,
    FinishedRecord,
    ReplyRecord,
    RequestRecord,
    ResponseRecord,
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


async def test_an_abandon_cut_off_before_its_journal_was_discarded_is_not_waiting(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """An abandon saves the closed round, then discards the journal, which it never marks
    finished. A daemon killed in between (a SIGKILL sweep hit it 4 times in 30) left a
    journal that still waits: every restart's session/list and daemon/status said waiting
    while session/pending said nothing waits. The journal is put back here as the kill left
    it. Now the scan asks the record too, as loading does."""
    home = DaemonHome(tmp_path_factory.mktemp("abandoned"))
    with running_daemon(home) as daemon, trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await create_waiting(client, tmp_path)
            pending = (await client.call("session/pending", {"sessionId": session_id}))["pending"]
    journal = home.state_dir / "journal" / session_id
    shutil.copytree(journal, tmp_path / "journal-before")
    with running_daemon(home) as daemon, trio.fail_after(IO_TIMEOUT):
        async with connect(daemon) as client:
            await client.call(
                "session/abandon",
                {"sessionId": session_id, "executionId": pending["executionId"]},
            )
    shutil.rmtree(journal)
    shutil.copytree(tmp_path / "journal-before", journal)
    with running_daemon(home) as again, trio.fail_after(IO_TIMEOUT):
        async with connect(again) as client:
            status = await client.call("daemon/status")
            row = await _row(client, session_id)
            still = (await client.call("session/pending", {"sessionId": session_id}))["pending"]
    assert status["sessions"]["waiting"] == 0
    assert (row["loaded"], row["waiting"]) == (False, False)
    assert still is None


R = TypeVar("R")


def _journal(folder: Path, name: str, *records: object, tail: bytes = b"") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = b"".join(encode_journal_record(r) for r in records)  # type: ignore[arg-type]
    (folder / f"{name}.jsonl").write_bytes(lines + tail)


def _record(kind: type[R], execution: str, suffix: str, **members: Any) -> R:
    """A journal record of `execution`, its id ending in `suffix`."""
    stamp = "2026-12-01T00:00:00Z"
    return kind(id=f"{execution}-{suffix}", execution_id=execution, timestamp=stamp, **members)


def test_the_journal_scan(tmp_path: Path) -> None:
    def started(execution: str) -> StartedRecord:
        return _record(
            StartedRecord,
            execution,
            "s",
            turn_id="t",
            session_id="s",
            cwd="/",
            provider="scripted",
            model="scripted",
            user_message_id="m",
        )

    def asked(execution: str) -> RequestRecord:
        return _record(
            RequestRecord,
            execution,
            "r",
            request_id="req",
            call_id="c",
            tool="Write",
            arguments={},
            reason="ask",
        )

    def replied(execution: str, *, calling: bool = True) -> ReplyRecord:
        calls = [ToolCall("c", "Write", {})] if calling else []
        return _record(
            ReplyRecord,
            execution,
            f"p{int(calling)}",
            message=Message.assistant(None if calling else "done", calls),
        )

    def answered(execution: str) -> ResponseRecord:
        return _record(
            ResponseRecord,
            execution,
            "a",
            request_id="req",
            response_id="resp",
            approved=True,
        )

    def finished(execution: str) -> FinishedRecord:
        return _record(
            FinishedRecord,
            execution,
            "f",
            status="completed",
        )

    def effect(execution: str, *, done: bool) -> object:
        if not done:
            return _record(
                EffectStartedRecord,
                execution,
                "e",
                call_id="c",
            )
        return _record(
            EffectFinishedRecord,
            execution,
            "d",
            call_id="c",
            message=Message.tool("c", "Bash", "done", ok=True),
        )

    def ran(execution: str) -> tuple[object, ...]:
        return (effect(execution, done=False), effect(execution, done=True))

    root = tmp_path / "journal"
    x = "x"
    journals: dict[str, tuple[tuple[object, ...], bool]] = {
        "settled": ((started(x), replied(x), asked(x), finished(x)), False),
        "quiet": ((started(x),), False),
        "asking": ((started(x), replied(x), asked(x)), True),
        "damaged": ((started(x),), True),
        "running": ((started(x), replied(x), asked(x), answered(x), effect(x, done=False)), True),
        # The daemon stopped after the model's reply, before its request was on record.
        "unasked": ((started(x), replied(x)), True),
        # ... after the answer was on record, before the approved call started.
        "approved": ((started(x), replied(x), asked(x), answered(x)), True),
        # ... after the approved call ran, on the way to the next reply: nothing waits (the
        # scan said waiting, for ever, while `session/pending` said nothing and a run ran).
        "ran": ((started(x), replied(x), asked(x), answered(x), *ran(x)), False),
        "replied again": ((started(x), replied(x), *ran(x), replied(x, calling=False)), False),
    }
    for name, (records, _) in journals.items():
        tail = b"not json\n" if name == "damaged" else b'{"torn'
        _journal(root / name, x, *records, tail=tail)
    _journal(root / "orphan", "x7", started("x7"), replied("x7"), asked("x7"))
    # Abandoned: the record holds the closed round; its journal was never discarded.
    _journal(root / "abandoned", x, started(x), replied(x), asked(x))
    (root / "..bad").mkdir()
    assert {name: journal_waits(root / name) for name in journals} == {
        name: waits for name, (_, waits) in journals.items()
    }
    parked = ParkedSessions()
    parked.scan(
        tmp_path,
        has_record=lambda session_id: session_id in {*journals, "abandoned"},
        round_open=lambda session_id: session_id != "abandoned",
    )
    waiting = {name for name, (_, waits) in journals.items() if waits}
    assert {n for n in (*journals, "orphan", "abandoned", "..bad") if n in parked} == waiting
    assert parked.count_unloaded({"asking"}) == len(waiting) - 1
