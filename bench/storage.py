"""Storage figures: record codec, strict decoding, listing, log appends, prompt search.

Run: ``.venv/bin/python bench/storage.py``. Prints figures; asserts nothing.

- save+load of a 10,000-message record, ours (msgspec + strict decode) against stdlib ``json``
  doing the same writes and reads (no validation at all), as a ratio, with and without fsync;
- the cost of the strict slow path (every issue located) over the msgspec fast path;
- ``list()`` of 10,000 stored records, cold and warm;
- session-log appends per second, small events and events whose payload goes to a sidecar;
- prompt-history newest-50 query at 10^5 and 10^6 entries (flat in file size: ratio ≈ 1).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import msgspec

from protocol.shapes import Message, ToolCall
from robotad.storage import fsio
from robotad.storage.log_files import FileLogSink
from robotad.storage.prompt_history import PromptEntry, PromptHistory
from robotad.storage.record import (
    Corrupt,
    Permissions,
    SessionRecord,
    SessionSettings,
    Valid,
    decode_record,
    encode_record,
)
from robotad.storage.session_log import SessionLogger
from robotad.storage.store import FileSessionStore

T0 = datetime(2024, 5, 1, 12, tzinfo=UTC)


def best(run: Callable[[], object], repeat: int = 5) -> float:
    """Best wall time of `repeat` runs, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def big_record(session_id: str, count: int) -> SessionRecord:
    messages: list[Message] = []
    for index in range(count):
        if index % 2:
            call = ToolCall(f"c{index}", "Read", {"file_path": f"/src/module_{index}.py"})
            messages.append(
                Message(f"m{index}", "assistant", "Let me look.", "complete", T0, tool_calls=[call])
            )
        else:
            text = f"Please explain the function number {index} in detail. " * 3
            messages.append(Message(f"m{index}", "user", text, "complete", T0))
    return SessionRecord(
        id=session_id,
        cwd="/home/user/project",
        created_at="2024-05-01T12:00:00Z",
        updated_at="2024-05-01T12:00:00Z",
        messages=messages,
        history=[],
        system_prompt="You are a careful engineer.",
        tool_schemas=[],
        settings=SessionSettings(
            "scripted", "m", "default", Permissions(["Read(*)"], [], []), 0.835
        ),
        turn_count=count // 2,
        metadata={},
    )


def bench_codec(folder: Path) -> None:
    record = big_record("big", 10_000)
    target = fsio.ensure_private_dir(folder) / "big.json"
    builtins = msgspec.to_builtins(record)
    envelope = {"schemaVersion": 1, "record": builtins}
    size = len(encode_record(record))

    def ours_codec() -> None:
        outcome = decode_record(encode_record(record))
        assert isinstance(outcome, Valid)

    def stdlib_codec() -> None:
        json.loads(json.dumps(envelope))

    def ours_io() -> None:
        fsio.atomic_write(target, encode_record(record))
        outcome = decode_record(fsio.read_regular(target))
        assert isinstance(outcome, Valid)

    def stdlib_io() -> None:
        fsio.atomic_write(target, json.dumps(envelope).encode())
        json.loads(target.read_bytes())

    ours, theirs = best(ours_codec), best(stdlib_codec)
    print(f"10,000-message record ({size / 1e6:.1f} MB):")
    print(
        f"  encode+decode in memory: ours {ours * 1e3:.1f} ms (strict, typed), "
        f"stdlib json {theirs * 1e3:.1f} ms (untyped dicts) -> ours/stdlib = {ours / theirs:.2f}"
    )
    ours, theirs = best(ours_io), best(stdlib_io)
    print(
        f"  durable save+load:       ours {ours * 1e3:.1f} ms, stdlib json {theirs * 1e3:.1f} ms"
        f" -> ours/stdlib = {ours / theirs:.2f}"
    )

    corrupt = msgspec.json.decode(encode_record(record))
    corrupt["record"]["messages"][9_999]["role"] = "robot"
    bad = msgspec.json.encode(corrupt)
    good = encode_record(record)

    def slow() -> None:
        assert isinstance(decode_record(bad), Corrupt)

    def fast() -> None:
        assert isinstance(decode_record(good), Valid)

    slow_t, fast_t = best(slow), best(fast)
    print(
        f"  strict decode: valid (fast path) {fast_t * 1e3:.1f} ms, one defect at the last "
        f"message (slow path, every issue) {slow_t * 1e3:.1f} ms -> {slow_t / fast_t:.1f}x"
    )


def bench_listing(folder: Path) -> None:
    store = FileSessionStore(folder)
    fsio.ensure_private_dir(store.directory)
    template = big_record("t", 20)
    for index in range(10_000):
        data = encode_record(msgspec.structs.replace(template, id=f"s{index:05}"))
        (store.directory / f"s{index:05}.json").write_bytes(data)
    cold = best(lambda: FileSessionStore(folder).list(), repeat=1)
    store.list()
    warm = best(store.list, repeat=3)
    print(
        f"list() of 10,000 records (20 messages each): cold {cold * 1e3:.0f} ms, "
        f"warm {warm * 1e3:.0f} ms"
    )


def bench_log(folder: Path) -> None:
    sink = FileLogSink(folder / "logs" / "s.jsonl")
    logger = SessionLogger("s", sink)
    count = 20_000

    def small() -> None:
        for index in range(count):
            logger.log("text_delta", {"text": f"token {index} ", "requestId": "r"})

    elapsed = best(small, repeat=1)
    print(f"log appends, small events: {count / elapsed:,.0f} events/s")

    blob = "x" * (80 * 1024)
    spilled = 500

    def large() -> None:
        for index in range(spilled):
            logger.log(
                "tool_result",
                {"callId": f"c{index}", "tool": "Read", "ok": True, "content": f"{index}{blob}"},
            )

    elapsed = best(large, repeat=1)
    print(f"log appends, 80 KiB payload to a sidecar each: {spilled / elapsed:,.0f} events/s")


def write_history(path: Path, count: int) -> None:
    encoder = msgspec.json.Encoder()
    fsio.ensure_private_dir(path.parent)
    with path.open("wb") as handle:
        batch: list[bytes] = []
        for index in range(count):
            entry = PromptEntry(
                f"prompt number {index}: refactor module {index % 97}",
                f"s{index % 50}",
                f"/home/user/p{index % 7}",
                "2024-05-01T12:00:00Z",
            )
            batch.append(encoder.encode(entry) + b"\n")
            if len(batch) == 10_000:
                handle.writelines(batch)
                batch.clear()
        handle.writelines(batch)


def bench_prompt_history(folder: Path) -> None:
    times: dict[int, float] = {}
    for count in (10**5, 10**6):
        path = folder / f"h{count}" / "prompt-history.jsonl"
        write_history(path, count)
        history = PromptHistory(path)
        result = history.search()
        assert len(result.entries) == 50
        times[count] = best(history.search, repeat=20)
        narrowed = partial(history.search, query="module 3", cwd="/home/user/p2")
        filtered = best(narrowed, repeat=20)
        size = os.path.getsize(path) / 1e6
        print(
            f"prompt history newest-50 at {count:>9,} entries ({size:.0f} MB): "
            f"{times[count] * 1e3:.2f} ms (query+cwd filter: {filtered * 1e3:.2f} ms)"
        )
    print(f"  ratio 10^6 / 10^5 = {times[10**6] / times[10**5]:.2f}")


def main() -> None:
    with tempfile.TemporaryDirectory() as raw:
        root = Path(raw)
        bench_codec(root / "codec")
        bench_listing(root / "listing")
        bench_log(root / "log")
        bench_prompt_history(root / "history")


if __name__ == "__main__":
    main()
