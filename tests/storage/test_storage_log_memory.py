"""Checking a long session log holds a bounded amount of it, not the whole log (G-151).

``session/log`` read the whole file, split it into lines and decoded every line into an entry
kept until coverage was checked: a log of 20,000 lines of 1 KB (20 MB) took 70 MB at its peak,
a long-lived session's 200,000 lines about 200 MB, for one call. The peaks here are measured
by `tracemalloc` (what Python allocates while the check runs), never by time.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from robotad.storage.log_files import FileLogSource, log_paths
from robotad.storage.log_replay import PROBLEMS_LISTED, cut_off, validate_log

SID = "s-long"
#: Lines of the long logs: enough that holding them all is tens of megabytes.
LINES = 20_000
#: What a check may hold at its peak: a read piece (1 MiB), the line being decoded, the ids
#: of the calls it has seen, and room for the interpreter's own allocations.
PEAK_BOUND = 6 * 1024 * 1024

T = TypeVar("T")


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    logs = tmp_path / "state" / "logs"
    logs.mkdir(parents=True)
    return log_paths(logs, SID)[0]


def _line(event: str, data: dict[str, Any]) -> bytes:
    envelope = {
        "schemaVersion": 1,
        "timestamp": "2024-05-01T12:00:00Z",
        "sessionId": SID,
        "event": event,
        "data": data,
    }
    return json.dumps(envelope).encode() + b"\n"


def _long_session(count: int) -> Iterator[bytes]:
    """`count` lines of about 1 KB each, a session's worth: streamed text and a closed tool
    call every tenth line, with an open one at the very end."""
    for i in range(count - 1):
        if i % 10 == 0:
            yield _line("tool_call", {"callId": f"c-{i}", "tool": "Bash", "arguments": {}})
        elif i % 10 == 1:
            result = {"callId": f"c-{i - 1}", "tool": "Bash", "ok": True, "content": "y" * 900}
            yield _line("tool_result", result)
        else:
            yield _line("text_delta", {"text": "z" * 950, "requestId": "r"})
    yield _line("tool_call", {"callId": "c-last", "tool": "Bash", "arguments": {}})


def _peak(check: Callable[[], T]) -> tuple[T, int]:
    """What `check` returns, and the most Python held at once while it ran (bytes)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = check()
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    return result, peak


def test_validating_a_long_log_holds_a_piece_and_a_line_not_the_log(log_path: Path) -> None:
    """20,000 lines, 20 MB: the report is the same as ever (every line counted, the one call
    left open named with its line) while the check holds a few MB at most. It held 70 MB."""
    log_path.write_bytes(b"".join(_long_session(LINES)))
    assert log_path.stat().st_size > 19_000_000
    report, peak = _peak(lambda: validate_log(FileLogSource(log_path)))
    assert (report.entries, report.complete) == (LINES, False)
    assert report.problems == [
        {"line": LINES, "event": "tool_call", "message": "tool call has no result"}
    ]
    assert peak < PEAK_BOUND, f"validating a {LINES}-line log held {peak:,} bytes at its peak"


def test_finding_what_a_long_log_left_open_holds_a_piece_and_a_line(log_path: Path) -> None:
    """The recovery of a cut-off log (`cut_off`, run when a session loads) reads the same way."""
    log_path.write_bytes(b"".join(_long_session(LINES)))
    found, peak = _peak(lambda: cut_off(FileLogSource(log_path)))
    assert found == ([], ["c-last"], None)
    assert peak < PEAK_BOUND, f"cut_off of a {LINES}-line log held {peak:,} bytes at its peak"


def test_a_log_of_many_bad_lines_keeps_only_the_problems_it_lists(log_path: Path) -> None:
    """100,000 bad lines, each with an event name of 200 characters: the report lists the
    first `PROBLEMS_LISTED` and counts the rest, and only those it lists were kept (each cut
    to its bounded length as it was found). Every problem of the log was kept before."""
    bad_lines = 100_000
    bad = json.dumps({"schemaVersion": 7, "event": "e" * 200}).encode() + b"\n"
    log_path.write_bytes(bad * bad_lines)
    report, peak = _peak(lambda: validate_log(FileLogSource(log_path)))
    assert (report.entries, report.complete) == (0, False)
    assert len(report.problems) == PROBLEMS_LISTED + 1
    assert report.problems[0] == {
        "line": 1,
        "event": "e" * 100 + "… (200 characters)",
        "message": "unsupported schema version 7",
    }
    assert report.problems[-1] == {
        "message": f"{bad_lines - PROBLEMS_LISTED} more problems not listed"
    }
    assert peak < PEAK_BOUND, f"{bad_lines} bad lines held {peak:,} bytes at their peak"
