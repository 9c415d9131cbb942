"""The test journals other layers use: `MemoryJournal` behaves like the file journal, and
`FaultyJournal` injects exactly the failures it promises."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from robotad.storage.journal import (
    ExecutionJournal,
    FileExecutionJournal,
    JournalConflict,
    JournalCorrupt,
    JournalReadError,
    JournalWriteError,
    ReplyRecord,
)
from robotad.storage.refusal import InputRejected
from tests.journal_fakes import FaultyJournal, MemoryJournal, of_kind, once

from .journal_samples import SESSION, every_kind, request, response, started


@pytest.fixture(params=["file", "memory"])
async def port(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ExecutionJournal]:
    if request.param == "memory":
        yield MemoryJournal()
        return
    async with FileExecutionJournal(tmp_path / "state", SESSION) as journal:
        yield journal


# -- the port's semantics, on both implementations -----------------------------------------


async def test_port_round_trip_and_listing(port: ExecutionJournal) -> None:
    records = every_kind("x-1")
    for record in records:
        await port.append(record)
    await port.append(started("x-0"))
    assert await port.read("x-1") == records
    assert await port.read("x-unknown") == []
    assert sorted(await port.executions()) == ["x-0", "x-1"]
    await port.discard("x-0")
    await port.discard("x-0")
    assert await port.executions() == ["x-1"]


async def test_port_idempotence_and_conflict(port: ExecutionJournal) -> None:
    """G-084, G-085 (journal part) on every implementation."""
    first = response("x-1", "r-1", "resp-1", approved=True)
    await port.append(first)
    await port.append(msgspec.structs.replace(first, timestamp=first.timestamp.replace(year=1999)))
    with pytest.raises(JournalConflict):
        await port.append(response("x-1", "r-1", "resp-1", approved=False))
    assert await port.read("x-1") == [first]


async def test_port_refuses_unsafe_execution_ids(port: ExecutionJournal) -> None:
    with pytest.raises(InputRejected):
        await port.append(started("../x"))
    with pytest.raises(InputRejected):
        await port.read("a/b")
    assert await port.executions() == []


async def test_memory_journal_hands_out_copies() -> None:
    journal = MemoryJournal()
    original = every_kind("x-1")[1]
    assert isinstance(original, ReplyRecord)
    await journal.append(original)
    original.message.content = "changed after the append"
    (stored,) = await journal.read("x-1")
    assert isinstance(stored, ReplyRecord)
    assert stored.message.content == "writing"


# -- injected faults ------------------------------------------------------------------------


async def test_a_failure_before_the_append_stores_nothing() -> None:
    """G-097 support: the caller sees a write error and the record is not stored."""
    inner = MemoryJournal()
    faulty = FaultyJournal(inner, fail_on=of_kind("reply"))
    records = every_kind("x-1")
    await faulty.append(records[0])
    with pytest.raises(JournalWriteError):
        await faulty.append(records[1])
    await faulty.append(records[2])
    assert [r.id for r in await inner.read("x-1")] == [records[0].id, records[2].id]
    assert faulty.failures == 1
    assert faulty.attempts == records[:3]


async def test_a_failure_after_the_append_stores_the_record() -> None:
    """The ambiguous outcome: told "failed", yet durable; a retry is then idempotent."""
    inner = MemoryJournal()
    faulty = FaultyJournal(inner, fail_on=once(of_kind("request")), after=True)
    record = request("x-1", "r-1")
    with pytest.raises(JournalWriteError):
        await faulty.append(record)
    assert await inner.read("x-1") == [record]
    await faulty.append(record)  # the fault fired once; the retry is a no-op
    assert await faulty.read("x-1") == [record]


async def test_a_torn_record_reads_as_corruption_until_reopened() -> None:
    inner = MemoryJournal()
    faulty = FaultyJournal(inner, tear=of_kind("effect_finished"))
    records = every_kind("x-1")
    for record in records[:5]:
        await faulty.append(record)
    with pytest.raises(JournalWriteError):
        await faulty.append(records[5])
    with pytest.raises(JournalCorrupt) as caught:
        await faulty.read("x-1")
    assert caught.value.issues[0]["line"] == 6
    with pytest.raises(JournalCorrupt):
        await faulty.append(records[6])
    assert await faulty.executions() == ["x-1"]
    faulty.reopen()
    faulty.tear = of_kind()
    assert await faulty.read("x-1") == records[:5]
    await faulty.append(records[5])
    assert (await faulty.read("x-1"))[-1] == records[5]


async def test_read_failures_and_rearming(tmp_path: Path) -> None:
    async with FileExecutionJournal(tmp_path / "state", SESSION) as inner:
        faulty = FaultyJournal(inner, fail_reads=lambda execution_id: execution_id == "x-1")
        await faulty.append(started("x-1"))
        with pytest.raises(JournalReadError):
            await faulty.read("x-1")
        assert await faulty.read("x-2") == []
        faulty.fail_reads = None
        faulty.fail_on = of_kind("started")
        assert len(await faulty.read("x-1")) == 1
        with pytest.raises(JournalWriteError):
            await faulty.append(started("x-2"))
        assert await inner.executions() == ["x-1"]
