"""Durable journal appends per second, and fsyncs per append.

Run: ``.venv/bin/python bench/journal.py [--dir PATH]``. Prints figures; asserts nothing.
The default folder is a fresh temp dir; pass ``--dir`` to measure a specific file system
(fsync cost is the figure that matters, and it depends entirely on the device).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from protocol.shapes import Message, ToolCall
from robotad.storage.journal import (
    EffectFinishedRecord,
    FileExecutionJournal,
    JournalRecord,
    ReplyRecord,
    RequestRecord,
    StartedRecord,
)

if TYPE_CHECKING:
    from _typeshed import FileDescriptorLike

_fsyncs = 0
_real_fsync = os.fsync


def _counting_fsync(fd: FileDescriptorLike) -> None:
    global _fsyncs
    _fsyncs += 1
    _real_fsync(fd)


def records(execution_id: str, count: int) -> list[JournalRecord]:
    """A realistic mix: replies with tool calls, requests, tool results of ~2 KiB."""
    out: list[JournalRecord] = [
        StartedRecord(
            id=f"{execution_id}:started",
            execution_id=execution_id,
            turn_id="t",
            session_id="bench",
            cwd="/work",
            provider="scripted",
            model="echo",
            user_message_id="m-user",
        )
    ]
    for n in range(count - 1):
        kind = n % 3
        rid = f"{execution_id}:{n}"
        if kind == 0:
            call = ToolCall(f"c{n}", "Read", {"file_path": f"src/{n}.py"})
            out.append(
                ReplyRecord(
                    id=rid, execution_id=execution_id, message=Message.assistant("reading", [call])
                )
            )
        elif kind == 1:
            out.append(
                RequestRecord(
                    id=rid,
                    execution_id=execution_id,
                    request_id=f"r{n}",
                    call_id=f"c{n}",
                    tool="Write",
                    arguments={"file_path": f"src/{n}.py", "content": "x" * 200},
                    reason="needs approval",
                )
            )
        else:
            result = Message.tool(f"c{n}", "Read", "line\n" * 400, ok=True)
            out.append(
                EffectFinishedRecord(
                    id=rid, execution_id=execution_id, call_id=f"c{n}", message=result
                )
            )
    return out


async def measure(folder: Path, executions: int, per_execution: int) -> None:
    global _fsyncs
    batches = [records(f"x-{e}", per_execution) for e in range(executions)]
    async with FileExecutionJournal(folder, "bench") as journal:
        _fsyncs = 0
        start = time.perf_counter()
        for batch in batches:
            for record in batch:
                await journal.append(record)
        elapsed = time.perf_counter() - start
        appended, synced = executions * per_execution, _fsyncs

        _fsyncs = 0
        start = time.perf_counter()
        for batch in batches:
            for record in batch:
                await journal.append(record)  # idempotent redelivery: no write, no sync
        repeat = time.perf_counter() - start
        repeat_syncs = _fsyncs

        start = time.perf_counter()
        for e in range(executions):
            await journal.read(f"x-{e}")
        read = time.perf_counter() - start
    print(
        f"durable append:      {appended / elapsed:10.0f} appends/s  "
        f"({elapsed / appended * 1e6:.0f} µs each, {synced / appended:.2f} fsyncs/append)"
    )
    print(
        f"redelivered append:  {appended / repeat:10.0f} appends/s  "
        f"({repeat_syncs / appended:.2f} fsyncs/append)"
    )
    print(f"read back:           {appended / read:10.0f} records/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--executions", type=int, default=20)
    parser.add_argument("--records", type=int, default=50)
    args = parser.parse_args()
    os.fsync = _counting_fsync
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        print(f"{args.executions} executions × {args.records} records in {folder}")
        trio.run(measure, Path(folder), args.executions, args.records)


if __name__ == "__main__":
    main()
