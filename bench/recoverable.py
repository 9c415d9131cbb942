"""What checkpointed approvals cost a turn: a recoverable turn against a plain one.

Run: ``.venv/bin/python bench/recoverable.py [--turns N] [--daemon-turns N] [--dir PATH]``.
Prints medians, ratios and fsyncs per turn; asserts nothing. The default folder is a fresh
temp dir; pass ``--dir`` to measure a specific file system (fsync cost dominates and depends
entirely on the device).

The comparison, and why it is fair: both sides are the same in-process `Session`, built the
way the daemon builds it — the scripted provider, the built-in tools, the daemon's own record
port (`RecordWriter` over a `FileSessionStore`: temp file, fsync, rename, fsync dir) and a
`SessionLogger` over a `FileLogSink` — in the same state folder. The only difference is the
method: ``Session.run`` (no journal) against ``Session.run_recoverable`` over an open
`FileExecutionJournal`, so the ratio is the journal's cost and nothing else (no RPC, no event
fan-out, no process boundary). Three turn shapes:

- ``text``: one model call, no tool — journal: started, reply, finished;
- ``tool``: a Read the default mode allows, then text — adds effect_started/effect_finished
  and a second reply;
- ``approval``: a Write that needs a person. Plain: ``run`` with a permission handler that
  approves at once. Recoverable: ``run_recoverable`` parks (request journaled, record saved,
  ``waiting``), then ``resume_recoverable`` approves and finishes — the whole cycle is timed.

Sessions are fresh every `TURNS_PER_SESSION` turns so history (and the record rewritten each
turn) stays short, plain and recoverable blocks alternate so drift hits both alike, and each
session's first turn (SessionStart, folder creation) is a warm-up, not timed. fsyncs are
counted by wrapping ``os.fsync`` and ``os.fdatasync`` in this process (the journal's and the
store's worker threads call them through ``os``), both counted as one kind of sync.

For context, the same ``text`` turn is also timed through a real daemon (``session/run`` over
the socket; every daemon turn is recoverable) — not part of any ratio, since it adds the RPC
round trip and event fan-out on top.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from protocol.methods import ApprovalResponse
from protocol.shapes import ApprovalRequest, TurnCompleted, TurnWaiting, new_id
from robotad.daemon.live import RecordWriter, iso_now
from robotad.providers.scripted import ScriptedProvider, decode_script
from robotad.session.session import Session
from robotad.session.settings import SessionServices
from robotad.storage.journal import FileExecutionJournal
from robotad.storage.log_files import FileLogSink
from robotad.storage.session_log import SessionLogger
from robotad.storage.store import FileSessionStore
from robotad.tools import builtin_tools

if TYPE_CHECKING:
    from _typeshed import FileDescriptorLike

TURNS_PER_SESSION = 50
Shape = Literal["text", "tool", "approval"]
Kind = Literal["plain", "recoverable"]
SHAPES: tuple[Shape, ...] = ("text", "tool", "approval")

# -- fsync counting ---------------------------------------------------------------------------

_fsync_calls = itertools.count()
_real_fsync = os.fsync
_real_fdatasync = os.fdatasync


def _counting_fsync(fd: FileDescriptorLike) -> None:
    next(_fsync_calls)  # atomic in CPython: safe from the worker threads
    _real_fsync(fd)


def _counting_fdatasync(fd: FileDescriptorLike) -> None:
    next(_fsync_calls)
    _real_fdatasync(fd)


def fsyncs_so_far() -> int:
    """Syncs since the wrappers were installed (reading costs one count)."""
    return next(_fsync_calls)


@contextmanager
def counting_fsyncs() -> Iterator[None]:
    os.fsync, os.fdatasync = _counting_fsync, _counting_fdatasync
    try:
        yield
    finally:
        os.fsync, os.fdatasync = _real_fsync, _real_fdatasync


# -- one shape's turns ------------------------------------------------------------------------


def steps_for(shape: Shape, workspace: Path, turns: int) -> list[dict[str, Any]]:
    """The scripted replies of `turns` turns of `shape`."""
    if shape == "text":
        return [{"text": "ok"}] * turns
    if shape == "tool":
        read = {"name": "Read", "arguments": {"file_path": str(workspace / "notes.txt")}}
        return [{"toolCalls": [read]}, {"text": "read"}] * turns
    write = {
        "name": "Write",
        "arguments": {"file_path": str(workspace / "out.txt"), "content": "x"},
    }
    return [{"toolCalls": [write]}, {"text": "written"}] * turns


async def approve_at_once(request: ApprovalRequest) -> bool:
    del request
    return True


@dataclass
class Figures:
    """Timed turns (seconds) and fsyncs counted over them, per (shape, kind)."""

    times: dict[tuple[Shape, Kind], list[float]] = field(default_factory=dict)
    fsyncs: dict[tuple[Shape, Kind], int] = field(default_factory=dict)

    def add(self, key: tuple[Shape, Kind], times: list[float], fsyncs: int) -> None:
        self.times.setdefault(key, []).extend(times)
        self.fsyncs[key] = self.fsyncs.get(key, 0) + fsyncs

    def median_ms(self, key: tuple[Shape, Kind]) -> float:
        return statistics.median(self.times[key]) * 1e3

    def fsyncs_per_turn(self, key: tuple[Shape, Kind]) -> float:
        return self.fsyncs[key] / len(self.times[key])


async def one_block(
    root: Path, workspace: Path, shape: Shape, kind: Kind, turns: int
) -> tuple[list[float], int]:
    """`turns` timed turns of one fresh session (after one warm-up turn): their durations
    and the fsyncs they made."""
    session_id = new_id("bench-")
    now = iso_now()
    steps = steps_for(shape, workspace, turns + 1)
    session = Session(
        cwd=workspace,
        provider=ScriptedProvider(decode_script(steps)),
        tools=builtin_tools(),
        session_id=session_id,
        services=SessionServices(
            store=RecordWriter(FileSessionStore(root), created_at=now, updated_at=now),
            logger=SessionLogger(session_id, FileLogSink.for_session(root / "logs", session_id)),
            permission_handler=approve_at_once if kind == "plain" else None,
        ),
    )
    times: list[float] = []
    async with FileExecutionJournal(root, session_id) as journal:
        turn = plain_turn(session) if kind == "plain" else recoverable_turn(session, journal)
        await turn("warm-up")
        before = fsyncs_so_far()
        for index in range(turns):
            started = time.perf_counter()
            await turn(f"prompt {index}")
            times.append(time.perf_counter() - started)
        made = fsyncs_so_far() - before - 1
    await session.shutdown()
    return times, made


def plain_turn(session: Session) -> Callable[[str], Awaitable[None]]:
    async def turn(prompt: str) -> None:
        await session.run(prompt)

    return turn


def recoverable_turn(
    session: Session, journal: FileExecutionJournal
) -> Callable[[str], Awaitable[None]]:
    async def turn(prompt: str) -> None:
        result = await session.run_recoverable(prompt, journal)
        if isinstance(result, TurnWaiting):
            answers = [
                ApprovalResponse(r.request_id, new_id("resp-"), True) for r in result.requests
            ]
            result = await session.resume_recoverable(result.execution_id, journal, answers)
        if not isinstance(result, TurnCompleted):
            raise RuntimeError(f"the recoverable turn did not complete: {result}")

    return turn


async def in_process(root: Path, turns: int) -> Figures:
    workspace = root / "workspace"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("remember the milk\n" * 20)
    figures = Figures()
    with counting_fsyncs():
        for shape in SHAPES:
            left = turns
            while left > 0:
                block = min(left, TURNS_PER_SESSION)
                for kind in ("plain", "recoverable"):
                    times, made = await one_block(root, workspace, shape, kind, block)
                    figures.add((shape, kind), times, made)
                left -= block
    return figures


# -- through a daemon, for context -------------------------------------------------------------


async def through_daemon(root: Path, turns: int) -> list[float]:
    """``session/run`` text turns through a real robotad (scripted echo), in seconds."""
    from tests.daemon_helpers import DaemonHome, connect, running_daemon

    home = DaemonHome(root / "daemon", check_events=False)
    workspace = root / "daemon-workspace"
    workspace.mkdir()
    times: list[float] = []
    with running_daemon(home) as daemon:
        async with connect(daemon) as client:
            left = turns
            while left > 0:
                created = await client.call("session/create", {"cwd": str(workspace)})
                params = {"sessionId": created["sessionId"], "prompt": "warm-up"}
                await client.call("session/run", params)
                for index in range(min(left, TURNS_PER_SESSION)):
                    params["prompt"] = f"prompt {index}"
                    started = time.perf_counter()
                    await client.call("session/run", params)
                    times.append(time.perf_counter() - started)
                left -= TURNS_PER_SESSION
    return times


# -- report -----------------------------------------------------------------------------------


def report(figures: Figures, daemon: list[float]) -> None:
    print(f"{'shape':<10}{'plain ms':>10}{'recov. ms':>11}{'ratio':>8}{'fsyncs':>16}")
    for shape in SHAPES:
        plain: tuple[Shape, Kind] = (shape, "plain")
        recoverable: tuple[Shape, Kind] = (shape, "recoverable")
        ratio = figures.median_ms(recoverable) / figures.median_ms(plain)
        syncs = f"{figures.fsyncs_per_turn(plain):.1f} → {figures.fsyncs_per_turn(recoverable):.1f}"
        print(
            f"{shape:<10}{figures.median_ms(plain):>10.2f}{figures.median_ms(recoverable):>11.2f}"
            f"{ratio:>7.2f}×{syncs:>16}"
        )
    count = len(figures.times[("text", "plain")])
    print(f"(medians over {count} turns per cell; fsyncs per turn, plain → recoverable)")
    if daemon:
        print(
            f"daemon session/run, text turn: median {statistics.median(daemon) * 1e3:.2f} ms "
            f"over {len(daemon)} turns (recoverable, with RPC and events; context only)"
        )


async def main(turns: int, daemon_turns: int, directory: Path | None) -> None:
    with tempfile.TemporaryDirectory(dir=directory, prefix="robota-bench-") as tmp:
        root = Path(tmp)
        figures = await in_process(root, turns)
        daemon = await through_daemon(root, daemon_turns) if daemon_turns else []
    report(figures, daemon)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200, help="timed turns per shape and kind")
    parser.add_argument(
        "--daemon-turns", type=int, default=200, help="timed daemon turns (0: skip the daemon)"
    )
    parser.add_argument("--dir", type=Path, default=None, help="where the temp state folder goes")
    arguments = parser.parse_args()
    trio.run(main, arguments.turns, arguments.daemon_turns, arguments.dir)
