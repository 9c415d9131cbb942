"""Crash consistency: a writer SIGKILLed at random moments never leaves a damaged record (G-007).

A forked child saves records in a loop, reporting each completed save on a pipe. The parent
reads a random number of those reports (zero included), then SIGKILLs the child wherever it is:
mid-write, between fsync and rename, or idle. After every kill each record must load valid and
equal one of the versions the child was writing; after all of them, `list` shows only valid
records (never a leftover temp file), and a sweep removes the leftovers without touching the
records. Forking keeps each round to a couple of milliseconds.
"""

from __future__ import annotations

import os
import random
import signal
from pathlib import Path

import msgspec

from robotad.storage import fsio
from robotad.storage.record import SessionRecord, Valid, encode_record
from robotad.storage.store import FileSessionStore, Missing

from .storage_factories import make_record

KILLS = 1000 if os.environ.get("ROBOTA_SOAK") == "full" else 220
IDS = ("crash-a", "crash-b")
#: Record versions of very different sizes, so kills land inside large writes too.
VERSIONS = [make_record("x", messages=n, turn_count=n) for n in (1, 40, 400)]


def _child(state: Path, report: int, seed: int) -> None:
    store = FileSessionStore(state)
    index = seed
    while True:
        session_id = IDS[index % len(IDS)]
        version = VERSIONS[index % len(VERSIONS)]
        store.save(_with_id(version, session_id))
        os.write(report, b".")
        index += 1


def _with_id(record: SessionRecord, session_id: str) -> SessionRecord:
    return msgspec.structs.replace(record, id=session_id)


def _read_exactly(fd: int, count: int) -> None:
    while count > 0:
        chunk = os.read(fd, count)
        if not chunk:
            return
        count -= len(chunk)


def test_sigkill_at_random_moments_never_damages_a_record(tmp_path: Path) -> None:
    """G-007: after each of hundreds of SIGKILLs, every record loads valid and equals a version
    that was being saved; temp leftovers are never listed as records."""
    state = tmp_path / "state"
    rng = random.Random(20240501)
    allowed = {
        session_id: {encode_record(_with_id(v, session_id)) for v in VERSIONS} for session_id in IDS
    }
    store = FileSessionStore(state)
    for round_number in range(KILLS):
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child never returns
            try:
                os.close(read_end)
                _child(state, write_end, round_number)
            finally:
                os._exit(0)
        os.close(write_end)
        _read_exactly(read_end, rng.choice([0, 0, 1, 1, 2, 3, 5, 8]))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(read_end)
        for session_id in IDS:
            outcome = store.load(session_id)
            if isinstance(outcome, Missing):
                continue
            assert isinstance(outcome, Valid), (round_number, session_id, outcome)
            assert encode_record(outcome.record) in allowed[session_id]

    rows = store.list()
    assert {row.session_id for row in rows} == set(IDS)
    assert all(row.status == "ok" for row in rows)
    before = {session_id: store.path_for(session_id).read_bytes() for session_id in IDS}
    store.sweep_temp_files()
    assert not [name for name in os.listdir(store.directory) if fsio.is_temp_name(name)]
    assert {session_id: store.path_for(session_id).read_bytes() for session_id in IDS} == before
