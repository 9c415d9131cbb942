"""Scale measurements over a real daemon: many idle sessions, many stored ones, one long one.

Three measurements, each returning figures (for ``bench/scale.py`` to print) and the facts a
test checks (counts, validity — never times):

- `idle_sessions(n)` — `n` sessions created over the wire and left loaded: RSS per session
  (``VmRSS`` after minus before, over `n`) and ``session/list`` latency;
- `stored_sessions(n)` — `n` records written with the storage API before the daemon starts:
  ``session/list`` time, first (cold: every file read) and repeated;
- `long_session(n)` — one stored record of `n` messages (automatic compaction off): times of
  ``session/open`` (load), ``session/run`` (a turn, its save included), ``session/close``
  (drain and save of the whole history), ``session/compact`` (on the reopened session), and of
  the storage API's own save of that record.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from protocol.shapes import Message
from robotad.storage.record import (
    Permissions,
    SessionRecord,
    SessionSettings,
    Valid,
    decode_record,
)
from robotad.storage.store import FileSessionStore
from tests.system.daemon_process import DaemonHome, DaemonProcess
from tests.system.soak_client import open_soak_connection

__all__ = [
    "IdleFigures",
    "LongFigures",
    "StoredFigures",
    "idle_sessions",
    "long_session",
    "make_record",
    "stored_sessions",
]

T0 = datetime(2025, 1, 1, tzinfo=UTC)


async def timed(action: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = await action()
    return time.perf_counter() - started, result


def make_record(session_id: str, cwd: str, messages: int, *, minute: int = 0) -> SessionRecord:
    """A valid record of `messages` alternating user/assistant messages (~120 bytes of text
    each), automatic compaction off, the scripted provider."""
    stamp = T0 + timedelta(minutes=minute)
    history = [
        Message(
            id=f"m-{index}",
            role="user" if index % 2 == 0 else "assistant",
            content=f"message {index}: " + "lorem ipsum dolor sit amet " * 4,
            state="complete",
            timestamp=stamp,
        )
        for index in range(messages)
    ]
    return scripted_record(session_id, cwd, history, stamp, turn_count=messages // 2)


def scripted_record(
    session_id: str, cwd: str, history: list[Message], stamp: datetime, *, turn_count: int
) -> SessionRecord:
    """A valid record holding `history`, created and updated at `stamp`, on the scripted
    provider with automatic compaction off (for benchmarks and scale tests)."""
    iso = msgspec.to_builtins(stamp)
    return SessionRecord(
        id=session_id,
        cwd=cwd,
        created_at=iso,
        updated_at=iso,
        messages=history,
        history=[],
        system_prompt=None,
        tool_schemas=[],
        settings=SessionSettings(
            provider="scripted",
            model="scripted",
            permission_mode="default",
            permissions=Permissions(allow=[], ask=[], deny=[]),
            auto_compact_threshold=False,
        ),
        turn_count=turn_count,
        metadata={},
    )


# -- idle loaded sessions ---------------------------------------------------------------------


@dataclass
class IdleFigures:
    sessions: int
    rss_before_kib: int
    rss_after_kib: int
    list_seconds: list[float]
    listed: int
    loaded: int

    @property
    def kib_per_session(self) -> float:
        return (self.rss_after_kib - self.rss_before_kib) / self.sessions


async def idle_sessions(home: DaemonHome, count: int) -> IdleFigures:
    """Create `count` sessions in a fresh daemon and leave them loaded."""
    cwd = str(home.workspace("idle"))
    daemon = DaemonProcess(home).start()
    try:
        async with open_soak_connection(daemon.socket_path) as connection:
            await connection.call("session/list", {})  # warm the code paths first
            before = daemon.rss_kib()
            for index in range(count):
                await connection.call("session/create", {"cwd": cwd, "sessionId": f"idle-{index}"})
            after = daemon.rss_kib()
            times = []
            for _ in range(10):
                seconds, listing = await timed(lambda: connection.call("session/list", {}))
                times.append(seconds)
            status = await connection.call("daemon/status", {})
    finally:
        daemon.stop()
    return IdleFigures(
        count, before, after, times, len(listing["sessions"]), status["sessions"]["loaded"]
    )


# -- stored sessions --------------------------------------------------------------------------


@dataclass
class StoredFigures:
    sessions: int
    write_seconds: float
    first_list_seconds: float
    list_seconds: list[float]
    listed: int
    statuses: dict[str, int] = field(default_factory=dict)
    newest_first: bool = False


def write_records(home: DaemonHome, count: int, messages: int = 4) -> float:
    """Write `count` records with the storage API; the seconds it took."""
    store = FileSessionStore(home.state_dir)
    cwd = str(home.workspace("stored"))
    started = time.perf_counter()
    for index in range(count):
        store.create(make_record(f"stored-{index}", cwd, messages, minute=index))
    return time.perf_counter() - started


async def stored_sessions(home: DaemonHome, count: int) -> StoredFigures:
    """Write `count` records, start a daemon on them, list them."""
    write_seconds = write_records(home, count)
    daemon = DaemonProcess(home).start()
    try:
        async with open_soak_connection(daemon.socket_path) as connection:
            first, listing = await timed(lambda: connection.call("session/list", {}))
            times = []
            for _ in range(5):
                seconds, _ = await timed(lambda: connection.call("session/list", {}))
                times.append(seconds)
    finally:
        daemon.stop()
    rows = listing["sessions"]
    stamps = [row["updatedAt"] for row in rows]
    statuses: dict[str, int] = {}
    for row in rows:
        statuses[row["status"]] = statuses.get(row["status"], 0) + 1
    return StoredFigures(
        count,
        write_seconds,
        first,
        times,
        len(rows),
        statuses,
        newest_first=stamps == sorted(stamps, reverse=True),
    )


# -- one long session ---------------------------------------------------------------------------


@dataclass
class LongFigures:
    messages: int
    record_bytes: int
    open_seconds: float
    run_seconds: float
    compact_seconds: float
    close_seconds: float
    store_save_seconds: float
    opened_count: int
    run_status: str
    compacted: bool
    history_after: int
    record_valid: bool


async def long_session(home: DaemonHome, messages: int) -> LongFigures:
    """Store one `messages`-long record, then open, run, compact and close it."""
    session_id = f"long-{messages}"
    store = FileSessionStore(home.state_dir)
    record = make_record(session_id, str(home.workspace(session_id)), messages)
    store.create(record)
    started = time.perf_counter()
    store.save(record)
    store_save = time.perf_counter() - started
    size = store.path_for(session_id).stat().st_size
    ref = {"sessionId": session_id}
    daemon = DaemonProcess(home).start()
    try:
        async with open_soak_connection(daemon.socket_path) as connection:
            open_s, info = await timed(lambda: connection.call("session/open", ref))
            run_s, result = await timed(
                lambda: connection.call("session/run", {**ref, "prompt": "one more"})
            )
            close_s, _ = await timed(lambda: connection.call("session/close", ref))
            await connection.call("session/open", ref)
            compact_s, compacted = await timed(lambda: connection.call("session/compact", ref))
            history = await connection.call("session/history", {**ref, "limit": 1})
            await connection.call("session/close", ref)
    finally:
        daemon.stop()
    stored = decode_record(store.path_for(session_id).read_bytes())
    return LongFigures(
        messages,
        size,
        open_s,
        run_s,
        compact_s,
        close_s,
        store_save,
        info["messageCount"],
        result["status"],
        compacted["compacted"],
        history["total"],
        isinstance(stored, Valid),
    )


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")
