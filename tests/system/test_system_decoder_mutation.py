"""The storage decoders under random damage: a located refusal, never any other exception.

Each decoder gets a valid input built by the product's own writers, then damaged
(`tests.system.mutation`): raw byte damage, or one located JSON damage whose path the refusal
must name.

- `decode_record` returns `Valid`, `Corrupt` (issues ``{path, message}``, never empty, one of
  them at the damaged path or below it) or `Unsupported` (G-013, G-014, G-020);
- `import_artifact` returns a record or raises `InputRejected` whose issues sit under
  ``$.artifact`` and name the damaged path (G-030, G-214);
- `decode_log` returns every entry or raises `LogDecodeError` naming each bad line;
  `validate_log` never raises and never reports a log complete that `decode_log` refuses
  (G-150, G-151); damaged sidecars are refused the same way (G-158);
- `decode_journal` returns the records or raises `JournalCorrupt` with every problem on a
  line (a JSON damage: on the damaged line).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.shapes import Message, ToolCall, Usage
from robotad.storage.artifact import export_artifact, import_artifact
from robotad.storage.journal import (
    JournalCorrupt,
    decode_journal,
    encode_journal_record,
)
from robotad.storage.log_replay import replay_log, validate_log
from robotad.storage.record import Corrupt, Unsupported, Valid, decode_record, encode_record
from robotad.storage.refusal import InputRejected
from robotad.storage.session_log import LogDecodeError, SessionLogger, decode_log
from robotad.storage.sidecars import SidecarError
from tests.storage.journal_samples import every_kind
from tests.storage.storage_factories import records
from tests.system.mutation import byte_mutations, json_mutation

MUTATIONS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
#: Drawing whole random records is the slow part; fewer of them keep the suite fast.
RECORD_MUTATIONS = settings(MUTATIONS, max_examples=80)


def names(path: str, issue_path: str) -> bool:
    """Whether an issue at `issue_path` locates damage at `path` (that place or below it)."""
    return issue_path == path or issue_path.startswith((path + ".", path + "["))


def assert_issues(issues: Any) -> None:
    assert isinstance(issues, list), issues
    assert issues
    for issue in issues:
        assert set(issue) == {"path", "message"}, issue
        assert issue["path"].startswith("$"), issue
        assert isinstance(issue["message"], str), issue


E = TypeVar("E", bound=Exception)


def exported(record: Any) -> dict[str, Any]:
    """`record`'s artifact with a fixed export time: the clock must not change the bytes
    Hypothesis damages, or a replayed example draws differently (its length moves)."""
    return export_artifact(record) | {"exportedAt": "2026-01-01T00:00:00.123Z"}


def refusal_of(kind: type[E], action: Callable[[], object]) -> E | None:
    """The `kind` exception `action` raised, or None when it returned (anything else
    propagates and fails the test)."""
    try:
        action()
    except kind as refusal:
        return refusal
    return None


# -- records ----------------------------------------------------------------------------------


@RECORD_MUTATIONS
@given(data=st.data())
def test_record_decoder_under_byte_damage(data: st.DataObject) -> None:
    """G-020: any damaged bytes decode to exactly one of three outcomes, never an exception."""
    stored = encode_record(data.draw(records()))
    outcome = decode_record(data.draw(byte_mutations(stored)))
    assert isinstance(outcome, Valid | Corrupt | Unsupported)
    if isinstance(outcome, Corrupt):
        assert_issues(outcome.issues)


@RECORD_MUTATIONS
@given(data=st.data())
def test_record_decoder_names_the_damaged_path(data: st.DataObject) -> None:
    """G-013/G-014: a located JSON damage that makes a record corrupt is reported at its path."""
    envelope = msgspec.json.decode(encode_record(data.draw(records())))
    damage = data.draw(json_mutation(envelope))
    outcome = decode_record(json.dumps(damage.value).encode())
    assert isinstance(outcome, Valid | Corrupt | Unsupported)
    if isinstance(outcome, Corrupt):
        assert_issues(outcome.issues)
        assert any(names(damage.path, i["path"]) for i in outcome.issues), (damage, outcome)


@RECORD_MUTATIONS
@given(data=st.data())
def test_artifact_import_refuses_damage_at_its_path(data: st.DataObject) -> None:
    """G-030/G-214: a damaged artifact is imported or refused -32602 at the damaged path."""
    artifact = exported(data.draw(records()))
    damage = data.draw(json_mutation(artifact))
    rooted = "$.artifact" + damage.path[1:]
    refusal = refusal_of(InputRejected, lambda: import_artifact(damage.value))
    if refusal is not None:
        assert_issues(refusal.issues)
        assert all(i["path"].startswith("$.artifact") for i in refusal.issues), refusal.issues
        assert any(names(rooted, i["path"]) for i in refusal.issues), (damage, refusal.issues)


@RECORD_MUTATIONS
@given(data=st.data())
def test_artifact_import_under_byte_damage(data: st.DataObject) -> None:
    """Whatever JSON the damaged bytes still parse to, import answers with a record or a
    located refusal."""
    text = json.dumps(exported(data.draw(records()))).encode()
    try:
        value = json.loads(data.draw(byte_mutations(text)))
    except ValueError:
        return  # not JSON: refused by the wire layer before import (-32700)
    refusal = refusal_of(InputRejected, lambda: import_artifact(value))
    if refusal is not None:
        assert_issues(refusal.issues)


# -- session logs -----------------------------------------------------------------------------


class MemoryLog:
    """A session log and its sidecars in memory: both a `LogSink` and a `LogSource`."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []
        self.sidecars: dict[str, bytes] = {}
        self.data: bytes | None = None

    def append(self, line: bytes) -> None:
        self.lines.append(line)

    def put_payload(self, content: bytes, sha256: str) -> str:
        self.sidecars.setdefault(sha256, content)
        return sha256

    def holds_payload(self, name: str, size: int) -> bool:
        return len(self.sidecars.get(name, b"")) == size and name in self.sidecars

    def seal(self) -> None:
        self.data = b"".join(line + b"\n" for line in self.lines)

    def read(self) -> bytes | None:
        return self.data

    def read_payload(self, name: str, expected_bytes: int) -> bytes:
        content = self.sidecars.get(name)
        if content is None:
            raise SidecarError("missing", "a referenced sidecar does not exist")
        if len(content) != expected_bytes:
            raise SidecarError("length", "a sidecar's length does not match its reference")
        return content


def written_log() -> MemoryLog:
    """A fresh copy of `_WRITTEN_LOG` (built once, so every example damages the same bytes)."""
    log = MemoryLog()
    log.lines = list(_WRITTEN_LOG.lines)
    log.sidecars = dict(_WRITTEN_LOG.sidecars)
    log.seal()
    return log


def _write_log() -> MemoryLog:
    """A complete turn with a tool round, logged by the product's `SessionLogger`; the raw
    provider payload is large enough to go to a sidecar."""
    log = MemoryLog()
    logger = SessionLogger("s-log", log, spill_limit=256)
    user = Message.user("list the files")
    call = ToolCall("call-1", "Bash", {"command": "ls", "api_key": "sk-never-logged"})
    reply = Message.assistant(None, [call])
    result = Message.tool("call-1", "Bash", "a.txt\nb.txt", ok=True)
    logger.log("session_start", {"source": "startup", "cwd": "/w"})
    logger.log("turn_started", {"turnId": "t-1"})
    logger.log("user_message", {"message": user})
    logger.log("history_mutation", {"op": "append", "messages": [user]})
    logger.log(
        "provider_request",
        {"requestId": "r-1", "provider": "scripted", "model": "m", "request": {"n": 1}},
    )
    logger.log("text_delta", {"text": "thinking", "requestId": "r-1"})
    logger.log(
        "provider_response",
        {
            "requestId": "r-1",
            "raw": {"chunks": ["x" * 400]},
            "normalized": {"text": "", "toolCalls": [call], "usage": Usage(3, 4)},
        },
    )
    logger.log("history_mutation", {"op": "append", "messages": [reply]})
    logger.log("tool_call", {"callId": "call-1", "tool": "Bash", "arguments": call.arguments})
    logger.log(
        "tool_result", {"callId": "call-1", "tool": "Bash", "ok": True, "content": result.content}
    )
    logger.log("history_mutation", {"op": "append", "messages": [result]})
    logger.log("turn_completed", {"turnId": "t-1", "status": "completed"})
    log.seal()
    assert log.sidecars, "the fixture must exercise sidecars"
    assert validate_log(log).complete
    return log


_WRITTEN_LOG = _write_log()


def check_log(log: MemoryLog) -> None:
    """decode_log, validate_log and replay_log agree and fail only with located problems."""
    report = validate_log(log)
    assert report.complete == (not report.problems), report
    refusal = refusal_of(LogDecodeError, lambda: decode_log(log))
    if refusal is not None:
        assert refusal.problems
        assert not report.complete, (refusal.problems, report)
        for problem in refusal.problems:
            assert problem.get("line", 0) >= 1, problem
            assert isinstance(problem["message"], str), problem
    replay_refusal = refusal_of(LogDecodeError, lambda: replay_log(log))  # ReplayError included
    if replay_refusal is not None:
        assert replay_refusal.problems
        assert not report.complete, report


@MUTATIONS
@given(data=st.data())
def test_log_decoders_under_byte_damage(data: st.DataObject) -> None:
    """G-150/G-151: a damaged log fails whole with every bad line numbered, never raises
    anything else, and is never reported complete by session/log's validator."""
    log = written_log()
    assert log.data is not None
    log.data = data.draw(byte_mutations(log.data))
    check_log(log)


@MUTATIONS
@given(data=st.data())
def test_log_decoders_under_line_damage(data: st.DataObject) -> None:
    """One line's JSON damaged at one place: refused on that line, or still decoding."""
    log = written_log()
    index = data.draw(st.integers(0, len(log.lines) - 1))
    damage = data.draw(json_mutation(msgspec.json.decode(log.lines[index])))
    log.lines[index] = json.dumps(damage.value).encode()
    log.seal()
    check_log(log)
    refusal = refusal_of(LogDecodeError, lambda: decode_log(log))
    if refusal is not None:
        assert [p["line"] for p in refusal.problems] == [index + 1], refusal.problems


@MUTATIONS
@given(data=st.data())
def test_damaged_sidecars_are_refused(data: st.DataObject) -> None:
    """G-158: a sidecar with other bytes, or none at all, fails the line that refers to it."""
    log = written_log()
    name = data.draw(st.sampled_from(sorted(log.sidecars)))
    if data.draw(st.booleans()):
        del log.sidecars[name]
    else:
        original = log.sidecars[name]
        damaged = data.draw(byte_mutations(original))
        if damaged == original:
            return
        log.sidecars[name] = damaged
    check_log(log)
    assert not validate_log(log).complete


# -- journals ---------------------------------------------------------------------------------

EXECUTION = "x-1"


_JOURNAL = b"".join(encode_journal_record(record) for record in every_kind(EXECUTION))


def journal_bytes() -> bytes:
    """One execution's journal with a record of every kind (built once: ids and timestamps
    of the samples are fresh on each build)."""
    return _JOURNAL


def check_journal(data: bytes) -> JournalCorrupt | None:
    corrupt = refusal_of(JournalCorrupt, lambda: decode_journal(EXECUTION, data))
    if corrupt is not None:
        assert corrupt.issues
        assert corrupt.execution_id == EXECUTION
        for issue in corrupt.issues:
            assert set(issue) == {"line", "message"}, issue
            assert isinstance(issue["line"], int), issue
    return corrupt


@MUTATIONS
@given(data=st.data())
def test_journal_decoder_under_byte_damage(data: st.DataObject) -> None:
    """Any damage decodes or is `JournalCorrupt` with each problem on a line, never another
    exception (a torn tail included)."""
    check_journal(data.draw(byte_mutations(journal_bytes())))


@MUTATIONS
@given(data=st.data())
def test_journal_decoder_names_the_damaged_line(data: st.DataObject) -> None:
    """One record's JSON damaged: refused on that line (or on the line that now repeats an id,
    when the damage changed the id to one already used)."""
    lines = journal_bytes().split(b"\n")[:-1]
    index = data.draw(st.integers(0, len(lines) - 1))
    damage = data.draw(json_mutation(msgspec.json.decode(lines[index])))
    lines[index] = json.dumps(damage.value).encode()
    corrupt = check_journal(b"".join(line + b"\n" for line in lines))
    if corrupt is not None:
        new_id = damage.value.get("id") if isinstance(damage.value, dict) else None
        reused = {
            number
            for number, line in enumerate(lines, start=1)
            if number > index + 1 and msgspec.json.decode(line).get("id") == new_id
        }
        lines_named = {issue["line"] for issue in corrupt.issues}
        assert index + 1 in lines_named, corrupt.issues
        assert lines_named <= {index + 1, *reused}, corrupt.issues
