"""Crash consistency of the journal: SIGKILL mid-append never loses an acknowledged record.

Each round forks a child that opens the session's journal (repairing whatever the previous kill
left) and appends records of very different sizes to two executions in a loop, writing each
record's id to a pipe only after `append` returned. Two kinds of round:

- *external*: the parent reads a random number of acknowledgements (zero included), waits a
  random jitter and SIGKILLs the child wherever it is — inside a write, between write and
  fsync, during the open-time repair. Odd rounds make the child's writes short (64 bytes per
  ``write``, which POSIX allows and `append` must handle), so kills also land between the
  pieces of one line.
- *self*: every fourth round the child SIGKILLs itself at a random point, after writing all but
  the last byte of one piece, so torn tails are certain to occur, not only likely.

After each kill the parent collects every acknowledgement that reached the pipe, notes whether
a file ends in a torn line, then opens the journal itself: every file must decode, and each
execution must read back as exactly what was there before the round, plus the round's
acknowledged records in order, plus at most the one record that was in flight.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from robotad.storage.journal import FileExecutionJournal, JournalRecord, record_fingerprint

from .journal_samples import SESSION, bulky

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer

KILLS = 300 if os.environ.get("ROBOTA_SOAK") == "full" else 60
EXECUTIONS = ("x-a", "x-b")
SIZES = (40, 3_000, 40, 24_000)
PIECE = 64


def planned(round_number: int, n: int) -> JournalRecord:
    """The n-th record the child of `round_number` appends (deterministic content)."""
    execution_id = EXECUTIONS[(round_number + n) % len(EXECUTIONS)]
    return bulky(execution_id, round_number * 10_000 + n, SIZES[n % len(SIZES)])


def child(state: Path, report: int, round_number: int, self_kill_at: int | None) -> None:
    real_write = os.write
    pieces = 0

    def short_write(fd: int, data: ReadableBuffer) -> int:
        nonlocal pieces
        if fd == report:
            return real_write(fd, data)
        piece = memoryview(data)[:PIECE]
        pieces += 1
        if pieces == self_kill_at:
            real_write(fd, piece[: len(piece) - 1])  # never the piece's last byte
            os.kill(os.getpid(), signal.SIGKILL)
        return real_write(fd, piece)

    if round_number % 2 or self_kill_at is not None:
        os.write = short_write  # this process only: it is a forked child

    async def append_forever() -> None:
        async with FileExecutionJournal(state, SESSION) as journal:
            n = 0
            while True:
                record = planned(round_number, n)
                await journal.append(record)
                real_write(report, f"{record.id}\n".encode())
                n += 1

    trio.run(append_forever)


def read_lines(fd: int, wanted: int | None) -> list[str]:
    """`wanted` complete lines from the pipe, or every line until EOF when None. (Each line is
    one write shorter than PIPE_BUF, so it arrives whole.)"""
    buffer = b""
    while wanted is None or buffer.count(b"\n") < wanted:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buffer += chunk
    return buffer.decode().splitlines()


def torn_files(state: Path) -> int:
    folder = state / "journal" / SESSION
    if not folder.exists():
        return 0
    return sum(1 for path in folder.glob("*.jsonl") if not path.read_bytes().endswith(b"\n"))


def run_round(state: Path, round_number: int, rng: random.Random) -> list[str]:
    """One child's life; the acknowledgements it made before it died."""
    self_kill_at = rng.randrange(1, 1200) if round_number % 4 == 3 else None
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child never returns
        try:
            os.close(read_end)
            child(state, write_end, round_number, self_kill_at)
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        if self_kill_at is None:
            acks = read_lines(read_end, rng.choice([0, 0, 1, 2, 3, 5, 8]))
            # Jitter, not a readiness wait: without it every kill lands at the same point
            # (just after an acknowledgement), rarely inside a write.
            time.sleep(rng.uniform(0, 0.003))
            os.kill(pid, signal.SIGKILL)
        else:
            acks = []
    finally:
        _, status = os.waitpid(pid, 0)
    acks += read_lines(read_end, None)  # acknowledged before the kill landed
    os.close(read_end)
    assert os.WIFSIGNALED(status)
    assert os.WTERMSIG(status) == signal.SIGKILL
    return acks


async def read_all(state: Path) -> dict[str, list[bytes]]:
    async with FileExecutionJournal(state, SESSION) as journal:
        assert set(await journal.executions()) <= set(EXECUTIONS)
        return {
            execution: [record_fingerprint(r) for r in await journal.read(execution)]
            for execution in EXECUTIONS
        }


def test_sigkill_while_appending_never_loses_an_acknowledged_record(tmp_path: Path) -> None:
    """G-075 (journal part), G-087: after each of dozens of SIGKILLs the journal opens, decodes,
    and holds every acknowledged record, in order, with at most one unacknowledged one after;
    torn tails did occur and were repaired."""
    state = tmp_path / "state"
    rng = random.Random(20240611)
    on_disk: dict[str, list[bytes]] = {execution: [] for execution in EXECUTIONS}
    acknowledged = torn = 0
    for round_number in range(KILLS):
        acks = run_round(state, round_number, rng)
        acknowledged += len(acks)
        torn += torn_files(state)

        expected = {execution: list(records) for execution, records in on_disk.items()}
        for n, ack in enumerate(acks):
            record = planned(round_number, n)
            assert ack == record.id
            expected[record.execution_id].append(record_fingerprint(record))
        in_flight = planned(round_number, len(acks))

        actual = trio.run(read_all, state)
        for execution in EXECUTIONS:
            mine = expected[execution]
            assert actual[execution][: len(mine)] == mine, (round_number, execution)
            extra = actual[execution][len(mine) :]
            allowed = [record_fingerprint(in_flight)] if in_flight.execution_id == execution else []
            assert extra in ([], allowed), (round_number, execution, len(extra))
        on_disk = actual
    assert acknowledged > KILLS  # the kills landed among real appends
    assert torn >= KILLS // 4  # every self-kill round left a torn tail to repair
