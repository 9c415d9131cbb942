"""A log read piece by piece reports what the same log read whole reports (G-151, G-163).

``session/log`` and `cut_off` decode a log as it is read (`decode_each` over
`FileLogSource.read_pieces`), so a line may arrive cut in any number of places, and the
problems are counted as they come rather than listed at the end. Nothing of that may change a
report: the same entries, problems (lines, events, messages, order) and verdict.
"""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.shapes import Message
from robotad.storage import log_files
from robotad.storage.log_files import FileLogSink, FileLogSource, log_paths
from robotad.storage.log_replay import PROBLEMS_LISTED, cut_off, validate_log
from robotad.storage.session_log import LogProblem, SessionLogger, decode_each, split_lines

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
SID = "s-stream"


@given(
    data=st.binary(max_size=64).map(lambda b: bytes(c if c % 3 else 10 for c in b)),
    cuts=st.lists(st.integers(min_value=0, max_value=64), max_size=8),
)
def test_lines_are_the_same_wherever_the_bytes_are_cut(data: bytes, cuts: list[int]) -> None:
    """Whatever pieces the bytes come in (empty ones too), the lines are those of the whole:
    split at each newline, without the empty part after a final one."""
    bounds = [0, *sorted(min(cut, len(data)) for cut in cuts), len(data)]
    pieces = [data[start:end] for start, end in itertools.pairwise(bounds)]
    whole = data.split(b"\n")
    if whole[-1] == b"":
        whole.pop()
    assert list(split_lines(pieces)) == whole


class WholeOnly:
    """The same log as a source without pieces: read whole, as `decode_lines` reads."""

    def __init__(self, source: FileLogSource) -> None:
        self._source = source

    def read(self) -> bytes | None:
        return self._source.read()

    def read_payload(self, name: str, expected_bytes: int) -> bytes:
        return self._source.read_payload(name, expected_bytes)


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    return tmp_path / "state" / "logs"


def _raw(logs: Path, *lines: bytes) -> None:
    with log_paths(logs, SID)[0].open("ab") as handle:
        for line in lines:
            handle.write(line + b"\n")


def _envelope(event: str, data: dict[str, Any]) -> bytes:
    line = {
        "schemaVersion": 1,
        "timestamp": "2024-05-01T12:00:00Z",
        "sessionId": SID,
        "event": event,
        "data": data,
    }
    return json.dumps(line).encode()


def _logged_session(logs: Path) -> None:
    """Turns with sidecars (a small spill limit), mutations, a parked call, an open request
    and an open compaction: every kind of line the coverage check looks at."""
    logger = SessionLogger(SID, FileLogSink.for_session(logs, SID), spill_limit=64)
    user = Message("m-1", "user", "u" * 300, "complete", T0)
    logger.log("session_start", {"source": "startup", "cwd": "/w"})
    logger.log("history_mutation", {"op": "append", "messages": [user]})
    request = {"history_prefix": {"count": 1, "last_message_id": "m-1"}, "tools": ["x" * 200]}
    logger.log(
        "provider_request",
        {"requestId": "r-1", "provider": "scripted", "model": "m", "request": request},
    )
    logger.log("provider_response", {"requestId": "r-1", "raw": [{"delta": "d" * 500}]})
    logger.log("tool_call", {"callId": "c-1", "tool": "Bash", "arguments": {"x": "a" * 300}})
    logger.log("approval_requested", {"executionId": "e-1", "requests": [{"n": 1}]})
    logger.log("tool_call", {"callId": "c-2", "tool": "Bash", "arguments": {}})
    stale = {"history_prefix": {"count": 5, "last_message_id": "m-9"}}
    logger.log(
        "provider_request",
        {"requestId": "r-2", "provider": "scripted", "model": "m", "request": stale},
    )
    logger.log("context_compact", {"phase": "started", "trigger": "manual"})


@pytest.mark.parametrize("piece", [1, 7, 4096])
def test_a_log_read_in_pieces_reports_as_one_read_whole(
    logs: Path, piece: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lines cut anywhere, sidecars resolved on the way: `validate_log` and `cut_off` say what
    they say of the log read whole, with and without a bad line in it."""
    monkeypatch.setattr(log_files, "LOG_PIECE_BYTES", piece)
    _logged_session(logs)
    source = FileLogSource.for_session(logs, SID)
    whole = WholeOnly(source)
    report = validate_log(source, ["m-1"])
    assert report == validate_log(whole, ["m-1"])
    assert [(p["line"], p["event"]) for p in report.problems] == [
        (7, "tool_call"),
        (8, "provider_request"),
        (8, "provider_request"),
        (9, "context_compact"),
    ]
    assert report.problems[1]["message"] == (
        "provider request refers to history the log does not rebuild"
    )
    assert cut_off(source) == cut_off(whole) == (["r-2"], ["c-2"], "manual")
    _raw(logs, b"", b'{"schemaVersion": 1,')
    damaged = validate_log(source)
    assert damaged == validate_log(whole)
    assert (damaged.entries, damaged.complete) == (9, False)
    assert [p["line"] for p in damaged.problems] == [10, 11]
    assert cut_off(source) == cut_off(whole)


def test_a_log_that_cannot_be_read_is_reported_as_before(logs: Path) -> None:
    """A symlink in place of the log is refused (G-157) whichever way it is read, and the
    report says the log cannot be read; decoding line by line raises it from the iteration."""
    logs.mkdir(parents=True)
    target = logs / "elsewhere.jsonl"
    target.write_bytes(_envelope("turn_started", {"turnId": "t"}) + b"\n")
    log_paths(logs, SID)[0].symlink_to(target)
    source = FileLogSource.for_session(logs, SID)
    report = validate_log(source)
    assert report == validate_log(WholeOnly(source))
    assert (report.entries, report.complete) == (0, False)
    assert report.problems[0]["message"].startswith("the log cannot be read: a symbolic link")
    with pytest.raises(OSError, match="symbolic link"):
        next(decode_each(source))


def test_gaps_past_those_listed_are_counted_and_ordered_with_what_is_left_open(
    logs: Path,
) -> None:
    """More gaps than a report lists, found on the way (requests whose history the log does
    not rebuild), mixed with calls and a request the log's end leaves open: the report lists
    the first `PROBLEMS_LISTED` of all of them in line order (a gap before an open request on
    the same line) and counts every one."""
    logs.mkdir(parents=True)
    stale = {"history_prefix": {"count": 3, "last_message_id": "m-3"}}
    no_history = "provider request refers to history the log does not rebuild"
    no_response = "provider request has no raw response or stream payload"
    lines: list[bytes] = []
    expected: list[LogProblem] = []
    for n in range(1, PROBLEMS_LISTED + 301):
        at = len(lines) + 1
        if n % 97 == 0:
            call = {"callId": f"c-{n}", "tool": "Bash", "arguments": {}}
            lines.append(_envelope("tool_call", call))
            expected.append(
                LogProblem(line=at, event="tool_call", message="tool call has no result")
            )
            continue
        request = {"requestId": f"r-{n}", "provider": "p", "model": "m", "request": stale}
        lines.append(_envelope("provider_request", request))
        expected.append(LogProblem(line=at, event="provider_request", message=no_history))
        if n == 500:
            expected.append(LogProblem(line=at, event="provider_request", message=no_response))
        else:
            lines.append(_envelope("provider_response", {"requestId": f"r-{n}", "raw": []}))
    _raw(logs, *lines)
    report = validate_log(FileLogSource.for_session(logs, SID))
    assert (report.entries, report.complete) == (len(lines), False)
    assert report.problems[:-1] == expected[:PROBLEMS_LISTED]
    left_out = len(expected) - PROBLEMS_LISTED
    assert report.problems[-1] == {"message": f"{left_out} more problems not listed"}


def test_what_was_closed_stays_closed_whatever_line_comes_after(logs: Path) -> None:
    """A result or response before its call or request, or a call logged again after its
    result, leaves nothing open; a call still open when an approval is asked is parked."""
    logs.mkdir(parents=True)
    call = {"tool": "Bash", "arguments": {}}
    result = {"tool": "Bash", "ok": True, "content": None}
    request = {"provider": "p", "model": "m", "request": {}}
    _raw(
        logs,
        _envelope("tool_call", {"callId": "c-3", **call}),
        _envelope("approval_requested", {"executionId": "e-1", "requests": []}),
        _envelope("tool_result", {"callId": "c-1", **result}),
        _envelope("tool_call", {"callId": "c-1", **call}),
        _envelope("tool_call", {"callId": "c-2", **call}),
        _envelope("tool_result", {"callId": "c-2", **result}),
        _envelope("tool_call", {"callId": "c-2", **call}),
        _envelope("provider_response", {"requestId": "r-1", "raw": []}),
        _envelope("provider_request", {"requestId": "r-1", **request}),
        _envelope("tool_call", {"callId": "c-4", **call}),
    )
    source = FileLogSource.for_session(logs, SID)
    report = validate_log(source)
    assert report.problems == [
        {"line": 10, "event": "tool_call", "message": "tool call has no result"}
    ]
    assert cut_off(source) == ([], ["c-4"], None)
