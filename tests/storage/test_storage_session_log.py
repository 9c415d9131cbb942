"""The session log: envelope, redaction, total decoding, replay (G-144…G-152, G-161…G-163)."""

from __future__ import annotations

import json
import os
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest

from protocol.shapes import Message, ToolCall
from robotad.storage.log_files import FileLogSink, FileLogSource, log_paths
from robotad.storage.log_replay import (
    PROBLEMS_LISTED,
    LogReport,
    ReplayError,
    cut_off,
    replay_history,
    replay_log,
    validate_log,
)
from robotad.storage.refusal import InputRejected
from robotad.storage.session_log import LogDecodeError, SessionLogger, decode_log

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
SID = "s-log"


def _clock() -> datetime:
    return T0


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    return tmp_path / "state" / "logs"


def _logger(logs: Path, *, limit: int = 64 * 1024) -> SessionLogger:
    return SessionLogger(SID, FileLogSink.for_session(logs, SID), clock=_clock, spill_limit=limit)


def _source(logs: Path) -> FileLogSource:
    return FileLogSource.for_session(logs, SID)


def _lines(logs: Path) -> list[dict[str, Any]]:
    text = log_paths(logs, SID)[0].read_text()
    return [json.loads(line) for line in text.splitlines()]


def _all_bytes(logs: Path) -> bytes:
    """Every byte the log wrote: the log file and every sidecar."""
    path, payloads = log_paths(logs, SID)
    data = path.read_bytes()
    if payloads.exists():
        for sidecar in sorted(payloads.iterdir()):
            data += sidecar.read_bytes()
    return data


def _write_turn(logger: SessionLogger) -> list[Message]:
    """A turn with a tool round; returns the history its mutations build."""
    user = Message("m-1", "user", "read it", "complete", T0)
    call = ToolCall("c-1", "Read", {"file_path": "/etc/hosts"})
    assistant = Message("m-2", "assistant", None, "complete", T0, tool_calls=[call])
    result = Message("m-3", "tool", "127.0.0.1", "complete", T0, tool_call_id="c-1", name="Read")
    final = Message("m-4", "assistant", "done", "interrupted", T0)
    logger.log("session_start", {"source": "startup", "cwd": "/w"})
    logger.log("turn_started", {"turnId": "t-1"})
    logger.log("user_message", {"message": user})
    logger.log("history_mutation", {"op": "append", "messages": [user]})
    logger.log(
        "provider_request",
        {"requestId": "r-1", "provider": "scripted", "model": "m", "request": {"messages": []}},
    )
    logger.log("text_delta", {"text": "thinking", "requestId": "r-1"})
    logger.log(
        "provider_response",
        {
            "requestId": "r-1",
            "nativeRaw": {"id": "resp_1", "output": []},
            "raw": [{"delta": "thinking"}],
            "normalized": {"text": "", "toolCalls": [msgspec.to_builtins(call)]},
        },
    )
    logger.log("history_mutation", {"op": "append", "messages": [assistant]})
    logger.log("tool_call", {"callId": "c-1", "tool": "Read", "arguments": call.arguments})
    logger.log("permission_decision", {"callId": "c-1", "tool": "Read", "decision": "allow"})
    logger.log("tool_result", {"callId": "c-1", "tool": "Read", "ok": True, "content": "127"})
    logger.log("history_mutation", {"op": "append", "messages": [result]})
    logger.log("history_mutation", {"op": "append", "messages": [final]})
    done = Message("m-4", "assistant", "done!", "complete", T0)
    logger.log("history_mutation", {"op": "set", "index": 3, "messages": [done]})
    logger.log("context_update", {"phase": "exact", "usedTokens": 10, "maxTokens": 100})
    logger.log("turn_completed", {"turnId": "t-1", "status": "completed"})
    return [user, assistant, result, done]


def test_provider_calls_are_logged_with_every_response_form(logs: Path) -> None:
    """G-144: the request and the native raw, raw and normalised responses all decode."""
    _write_turn(_logger(logs))
    entries = decode_log(_source(logs))
    request = next(e for e in entries if e.event == "provider_request")
    response = next(e for e in entries if e.event == "provider_response")
    assert request.data["request"] == {"messages": []}
    assert response.data["nativeRaw"] == {"id": "resp_1", "output": []}
    assert response.data["raw"] == [{"delta": "thinking"}]
    assert response.data["normalized"]["toolCalls"][0]["name"] == "Read"


def test_replaying_history_mutations_rebuilds_the_history(logs: Path) -> None:
    """G-145: append, set and replace rebuild exactly the session's history."""
    logger = _logger(logs)
    expected = _write_turn(logger)
    assert replay_log(_source(logs)) == expected
    summary = Message("m-9", "system", "summary", "complete", T0)
    logger.log("history_mutation", {"op": "replace", "messages": [summary]})
    assert replay_log(_source(logs)) == [summary]


def test_the_log_is_append_only(logs: Path) -> None:
    """G-146: later events never rewrite an earlier line."""
    logger = _logger(logs)
    _write_turn(logger)
    before = log_paths(logs, SID)[0].read_bytes()
    _write_turn(logger)
    after = log_paths(logs, SID)[0].read_bytes()
    assert after.startswith(before)
    assert len(after) > len(before)


def test_payload_members_cannot_override_the_envelope(logs: Path) -> None:
    """G-147: same-named payload members stay inside data."""
    _logger(logs).log(
        "session_start",
        {
            "source": "resume",
            "cwd": "/w",
            "sessionId": "someone-else",
            "event": "turn_failed",
            "schemaVersion": 99,
            "timestamp": "1999-01-01T00:00:00Z",
        },
    )
    (line,) = _lines(logs)
    assert set(line) == {"schemaVersion", "timestamp", "sessionId", "event", "data"}
    assert line["sessionId"] == SID
    assert line["event"] == "session_start"
    assert line["schemaVersion"] == 1
    assert line["timestamp"] == "2024-05-01T12:00:00Z"
    assert line["data"]["sessionId"] == "someone-else"
    (entry,) = decode_log(_source(logs))
    assert entry.session_id == SID


def test_text_deltas_are_events(logs: Path) -> None:
    """G-148 (log side): each streamed delta is its own text_delta line."""
    logger = _logger(logs)
    for piece in ("he", "llo"):
        logger.log("text_delta", {"text": piece})
    assert [e.data["text"] for e in decode_log(_source(logs)) if e.event == "text_delta"] == [
        "he",
        "llo",
    ]


def test_the_writer_refuses_what_the_reader_would_refuse(logs: Path) -> None:
    """G-149: only vocabulary events with well-shaped payloads can be written."""
    logger = _logger(logs)
    with pytest.raises(ValueError, match="unknown session-log event"):
        logger.log("made_up", {})  # type: ignore[arg-type]
    with pytest.raises(Exception, match="callId"):
        logger.log("tool_result", {"tool": "Read", "ok": True, "content": None})
    assert not log_paths(logs, SID)[0].exists()


def _append_raw(logs: Path, *lines: bytes) -> None:
    path = log_paths(logs, SID)[0]
    with path.open("ab") as handle:
        for line in lines:
            handle.write(line + b"\n")


def _envelope(**changes: Any) -> bytes:
    line: dict[str, Any] = {
        "schemaVersion": 1,
        "timestamp": "2024-05-01T12:00:00Z",
        "sessionId": SID,
        "event": "turn_started",
        "data": {"turnId": "t"},
    }
    line.update(changes)
    return json.dumps(line).encode()


BAD_LINES = {
    "unknown event": _envelope(event="made_up"),
    "malformed envelope": _envelope(timestamp="noon"),
    "extra envelope member": _envelope(extra=1),
    "malformed payload": _envelope(data={"turnId": 5}),
    "unsupported version": _envelope(schemaVersion=2),
    "missing version": json.dumps({"event": "turn_started", "data": {}}).encode(),
    "not json": b'{"schemaVersion": 1,',
    "empty line": b"",
}


@pytest.mark.parametrize("kind", list(BAD_LINES))
def test_one_bad_line_fails_the_whole_decode(logs: Path, kind: str) -> None:
    """G-150: never a partial result that keeps the valid lines."""
    logger = _logger(logs)
    logger.log("turn_started", {"turnId": "t-1"})
    _append_raw(logs, BAD_LINES[kind])
    logger.log("turn_aborted", {"turnId": "t-1"})
    with pytest.raises(LogDecodeError) as caught:
        decode_log(_source(logs))
    assert [problem["line"] for problem in caught.value.problems] == [2]
    with pytest.raises(LogDecodeError):
        replay_log(_source(logs))


def test_session_log_report_lists_each_bad_line(logs: Path) -> None:
    """G-151: complete:false with one problem per undecodable line; complete:true otherwise."""
    logger = _logger(logs)
    _write_turn(logger)
    report = validate_log(_source(logs))
    assert report.complete is True
    assert report.problems == []
    good = report.entries
    _append_raw(logs, BAD_LINES["unknown event"], BAD_LINES["unsupported version"])
    logger.log("turn_started", {"turnId": "t-2"})
    report = validate_log(_source(logs))
    assert report.complete is False
    assert report.entries == good + 1
    assert [(p["line"], p.get("event")) for p in report.problems] == [
        (good + 1, "made_up"),
        (good + 2, "turn_started"),
    ]
    assert "unsupported schema version 2" in report.problems[1]["message"]


def test_a_report_of_a_log_with_many_bad_lines_stays_small(logs: Path) -> None:
    """G-151 within a bounded answer: the report lists the first `PROBLEMS_LISTED` bad lines
    and says how many more there are, and cuts an event name or message it quotes from the
    log. It used to list all of them whole: a hand-edited log made a ``session/log`` answer
    over the 16 MiB a client reads, and `robotactl log` got no report at all."""
    long_event = _envelope(event="x" * 100_000)
    message = {"id": "m", "role": "user", "content": "hi", "y" * 100_000: 1}
    long_key = _envelope(event="history_mutation", data={"op": "append", "messages": [message]})
    logs.mkdir(parents=True)
    _append_raw(logs, long_event, long_key, *[b"not json"] * (PROBLEMS_LISTED + 499))
    report = validate_log(_source(logs))
    assert (report.entries, report.complete) == (0, False)
    assert len(report.problems) == PROBLEMS_LISTED + 1
    assert [p["line"] for p in report.problems[:-1]] == list(range(1, PROBLEMS_LISTED + 1))
    assert report.problems[-1] == {"message": "501 more problems not listed"}
    assert report.problems[0]["event"].startswith("xxx")
    assert "(100000 characters)" in report.problems[0]["event"]
    assert "yyy" in report.problems[1]["message"]
    assert len(report.problems[1]["message"]) < 2000
    assert len(msgspec.json.encode(report.problems)) < 200_000


def test_no_sensitive_value_reaches_any_log_byte(logs: Path) -> None:
    """G-152, G-220: sensitive keys are redacted at any depth, in lines and in sidecars; the
    same value under a non-sensitive key, or typed into free text, is kept."""
    logger = _logger(logs, limit=256)
    secret = "sk-SECRET-value-0123456789"
    logger.log(
        "provider_request",
        {
            "requestId": "r",
            "provider": "openai",
            "model": "m",
            "request": {
                "headers": {"Authorization": f"Bearer {secret}", "x-api-key": secret},
                "messages": [{"role": "user", "content": "x" * 1000, "token": secret}],
                "note": {"inputTokens": 5, "echo": "kept-value"},
                "big": [{"client_secret": secret, "padding": "y" * 2000}],
            },
        },
    )
    logger.log("tool_call", {"callId": "c", "tool": "Bash", "arguments": {"password": secret}})
    logger.log("user_message", {"message": Message("m", "user", f"key {secret}", "complete", T0)})
    written = _all_bytes(logs)
    assert written.count(secret.encode()) == 1, "only the free-text copy survives"
    assert b"kept-value" in written
    assert len(list(log_paths(logs, SID)[1].iterdir())) >= 1, "the big parts went to sidecars"
    request = decode_log(_source(logs))[0].data["request"]
    assert request["headers"] == {"Authorization": "[REDACTED]", "x-api-key": "[REDACTED]"}
    assert request["note"] == {"inputTokens": 5, "echo": "kept-value"}


def test_log_files_and_folders_are_owner_only(logs: Path) -> None:
    """G-155: 0700 folders and 0600 files (sidecars included) whatever the umask."""
    previous = os.umask(0)
    try:
        _logger(logs, limit=64).log(
            "tool_call", {"callId": "c", "tool": "Read", "arguments": {"x": "z" * 500}}
        )
    finally:
        os.umask(previous)
    path, payloads = log_paths(logs, SID)
    assert stat.S_IMODE(logs.stat().st_mode) == 0o700
    assert stat.S_IMODE(payloads.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    sidecars = list(payloads.iterdir())
    assert sidecars
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in sidecars)


@pytest.mark.parametrize("bad", ["..", "a/b", "", "x" * 200, "../../etc"])
def test_unsafe_session_ids_are_refused_before_any_path(logs: Path, bad: str) -> None:
    """G-156: -32602, nothing created."""
    with pytest.raises(InputRejected):
        FileLogSink.for_session(logs, bad)
    with pytest.raises(InputRejected):
        FileLogSource.for_session(logs, bad)
    assert not logs.exists()


def test_a_missing_log_replays_empty_but_a_malformed_one_fails(logs: Path) -> None:
    """G-161: missing → []; nonempty malformed → error, never empty."""
    assert replay_log(_source(logs)) == []
    assert validate_log(_source(logs)).complete is True
    logs.mkdir(parents=True)
    path = log_paths(logs, SID)[0]
    for content in (b"\n", b"  \n", b"garbage\n", b"{}"):
        path.write_bytes(content)
        with pytest.raises(LogDecodeError):
            replay_log(_source(logs))


def test_a_log_that_does_not_rebuild_the_sessions_messages_is_incomplete(logs: Path) -> None:
    """G-145 as a check: given the session's message ids, a log whose mutations rebuild other
    messages (or fewer, or none) is incomplete, saying how far it goes."""
    first, second, third = (Message(f"m-{i}", "user", "x", "complete", T0) for i in range(3))
    assert validate_log(_source(logs), []).complete is True
    missing = validate_log(_source(logs), ["m-0"])
    assert missing.complete is False
    assert missing.problems[0]["message"] == (
        "the session holds 1 message; the log rebuilds none of them: its file was removed, "
        "emptied or replaced"
    )
    logger = _logger(logs)
    logger.log("history_mutation", {"op": "append", "messages": [first, second]})
    assert validate_log(_source(logs), ["m-0", "m-1"]).complete is True
    short = validate_log(_source(logs), ["m-0", "m-1", "m-2"])
    assert short.problems[0]["message"] == (
        "the session holds 3 messages; the log rebuilds 2, the first 2 of them as the session "
        "has them"
    )
    other = validate_log(_source(logs), ["m-0", "m-9"])
    assert other.problems[0]["message"].endswith(
        "the log rebuilds 2, the first 1 of them as the session has them"
    )
    logger.log("history_mutation", {"op": "append", "messages": [third]})
    assert validate_log(_source(logs)).complete is True  # no ids: coverage only
    # A log that tells more than the session holds (a turn logged while the log was read,
    # or cut off by a crash before its record was saved) has no gap.
    assert validate_log(_source(logs), ["m-0", "m-1"]).complete is True


def test_a_log_that_tells_a_message_twice_is_incomplete(logs: Path) -> None:
    """G-145: a log that, past the session's messages, tells one of them again (a recovery
    logging a put-back the log had already: architecture decision 57) claims it happened
    twice, and is incomplete; telling new messages past them is still no gap."""
    first, second, third = (Message(f"m-{i}", "user", "x", "complete", T0) for i in range(3))
    logger = _logger(logs)
    logger.log("history_mutation", {"op": "append", "messages": [first, second, third]})
    assert validate_log(_source(logs), ["m-0"]).complete is True
    logger.log("history_mutation", {"op": "append", "messages": [second]})
    for held in (["m-0"], ["m-0", "m-1", "m-2"]):
        report = validate_log(_source(logs), held)
        assert report.complete is False
        noun = "message" if len(held) == 1 else "messages"
        assert report.problems == [
            {
                "message": f"the session holds {len(held)} {noun}; the log rebuilds 4; its "
                "message 4 is message 2 again (id 'm-1'), logged twice"
            }
        ]
    assert validate_log(_source(logs)).complete is True  # no ids: no comparison to make
    # A replace (a load's, a compaction's) starts the history again: nothing is told twice.
    logger.log("history_mutation", {"op": "replace", "messages": [first, second]})
    assert validate_log(_source(logs), ["m-0"]).complete is True


def test_unreadable_logs_raise_and_are_reported(logs: Path) -> None:
    """G-161: a log that cannot be read is not an empty log."""
    log_paths(logs, SID)[0].mkdir(parents=True)
    with pytest.raises(OSError):  # noqa: PT011 - any read failure, never an empty replay
        replay_log(_source(logs))
    report = validate_log(_source(logs))
    assert report.complete is False
    assert "cannot be read" in report.problems[0]["message"]


def test_unresolved_sidecar_references_in_messages_fail_replay(logs: Path) -> None:
    """G-162: a reference left inside a message is never replayed as-is."""
    logger = _logger(logs, limit=128)
    big = Message("m-1", "user", "q" * 1000, "complete", T0)
    logger.log("history_mutation", {"op": "append", "messages": [big]})
    assert replay_log(_source(logs)) == [big]
    unresolved = decode_log(_source(logs), resolve_sidecars=False)
    with pytest.raises(ReplayError, match="unresolved sidecar"):
        replay_history(unresolved)


def test_marker_shaped_content_replays_as_content(logs: Path) -> None:
    """G-145, G-162: a model's tool arguments ``{"$sidecar": "abc"}`` (and such metadata) are
    content: the log wraps them as literals and resolving unwraps them. Replay and
    `session/log` took the unwrapped value for an unresolved reference: the log was called
    incomplete and would not replay. Unresolved on request, the line is still refused."""
    logger = _logger(logs, limit=128)
    call = ToolCall("c1", "Echo", {"$sidecar": "abc"})
    messages = [
        Message("m-1", "assistant", None, "complete", T0, tool_calls=[call]),
        Message("m-2", "tool", "q" * 1000, "complete", T0, tool_call_id="c1", name="Echo"),
    ]
    messages[1].metadata = {"ok": True, "note": {"$literal": {"$sidecar": "x"}}}
    logger.log("history_mutation", {"op": "append", "messages": messages})
    assert replay_log(_source(logs)) == messages
    report = validate_log(_source(logs), ["m-1", "m-2"])
    assert (report.complete, report.problems) == (True, [])
    with pytest.raises(ReplayError, match="unresolved sidecar"):
        replay_history(decode_log(_source(logs), resolve_sidecars=False))


def test_missing_responses_and_results_make_the_log_incomplete(logs: Path) -> None:
    """G-163: a provider request with no raw response and a tool call with no result."""
    logger = _logger(logs)
    logger.log(
        "provider_request", {"requestId": "r-1", "provider": "p", "model": "m", "request": {}}
    )
    logger.log(
        "provider_response", {"requestId": "r-1", "normalized": {"text": "", "toolCalls": []}}
    )
    logger.log("tool_call", {"callId": "c-1", "tool": "Read", "arguments": {}})
    logger.log("tool_call", {"callId": "c-2", "tool": "Read", "arguments": {}})
    logger.log("execution_abandoned", {"executionId": "e", "callIds": ["c-2"]})
    report = validate_log(_source(logs))
    assert report.complete is False
    assert [(p["line"], p["event"]) for p in report.problems] == [
        (1, "provider_request"),
        (3, "tool_call"),
    ]
    logger.log("provider_response", {"requestId": "r-1", "error": "timeout"})
    logger.log("tool_result", {"callId": "c-1", "tool": "Read", "ok": False, "content": "denied"})
    report = validate_log(_source(logs))
    assert report.problems == []
    assert report.complete is True


def test_content_that_looks_like_a_reference_is_kept_as_data(logs: Path) -> None:
    """Logged content can never pose as a sidecar reference (it is escaped on write)."""
    arguments = {"$sidecar": {"sha256": "0" * 64, "bytes": 1, "path": "../x"}, "$literal": 1}
    _logger(logs).log("tool_call", {"callId": "c", "tool": "T", "arguments": arguments})
    (entry,) = decode_log(_source(logs))
    assert entry.data["arguments"] == arguments


def test_a_call_parked_on_an_approval_is_no_gap(logs: Path) -> None:
    """G-163: a call still open when its approval is requested waits for a person, so a log
    that ends there is complete; once the approval is resolved the call must be closed again
    (by its result, an abandonment or a ``recovered`` entry)."""
    logger = _logger(logs)
    logger.log("tool_call", {"callId": "c-1", "tool": "Bash", "arguments": {"command": "ls"}})
    request = {"requestId": "q-1", "executionId": "x-1", "tool": "Bash", "arguments": {}}
    logger.log("approval_requested", {"executionId": "x-1", "requests": [request]})
    logger.log("turn_completed", {"turnId": "t-1", "status": "waiting"})
    assert validate_log(_source(logs)) == LogReport(3, True, [])
    assert cut_off(_source(logs)) == ([], [], None)  # nothing a stop could cut off
    logger.log("approval_resolved", {"executionId": "x-1", "requestId": "q-1", "approved": True})
    logger.log("tool_call", {"callId": "c-1", "tool": "Bash", "arguments": {"command": "ls"}})
    resumed = validate_log(_source(logs))
    assert resumed.complete is False
    assert [(p["line"], p["event"]) for p in resumed.problems] == [(1, "tool_call")]
    logger.log("tool_result", {"callId": "c-1", "tool": "Bash", "ok": True, "content": "a"})
    assert validate_log(_source(logs)).complete is True


def test_a_compaction_that_never_ended_makes_the_log_incomplete(logs: Path) -> None:
    """G-163: a compaction "started" with no end is open, as a stop leaves it, until a
    ``recovered`` entry names it; an ended one (any phase) is closed."""
    logger = _logger(logs)
    logger.log("context_compact", {"trigger": "auto", "phase": "started"})
    logger.log("context_compact", {"trigger": "auto", "phase": "failed"})
    logger.log("context_compact", {"trigger": "manual", "phase": "started"})
    report = validate_log(_source(logs))
    assert [(p["line"], p["event"]) for p in report.problems] == [(3, "context_compact")]
    assert cut_off(_source(logs)) == ([], [], "manual")
    logger.log("recovered", {"reason": "r", "requestIds": [], "calls": [], "compaction": "manual"})
    assert validate_log(_source(logs)).complete is True
    assert cut_off(_source(logs)).compaction is None
