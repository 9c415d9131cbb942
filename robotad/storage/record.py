"""The persisted session record and its total codec ("decoded, never cast").

On disk a record is wrapped in the envelope ``{"schemaVersion": 1, "record": {...}}``; the export
artifact carries the same `SCHEMA_VERSION` (G-022). The record itself has no version member, so
a ``schemaVersion`` key inside it is an unknown member and the record is corrupt (G-021).

`decode_record` has exactly three outcomes (G-020):

- `Valid` — every member checked: declared objects refuse unknown members (G-017), timestamps
  typed as dates are revived as UTC datetimes (G-015), ``createdAt``/``updatedAt`` keep their
  exact string but must be an instant with a UTC date (G-016, `instant_problem`), open maps
  (``metadata``, tool arguments…) take any key and hold plain JSON values only, so a date-like
  string stays a string (G-018/19);
- `Corrupt` — every failing location, not just the first (G-013/G-014); null, empty or
  non-JSON input is corrupt;
- `Unsupported` — the version is read first, and a version this build does not implement is
  reported with no field issues at all (G-023).

"Missing" is not an outcome of a value; only a store that found no file says it.

The codec is lossless (G-025): optional members are `UNSET` when absent and stay absent when
re-encoded; nothing is defaulted in. It reads no field for its meaning (G-216).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal, cast

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from protocol.methods import Count, MaxRounds, McpServer, PositiveInt
from protocol.shapes import Message, PermissionMode, UtcDatetime, in_utc
from protocol.validate import Issue, ValidationFailed, convert, issue_from_error, join_path
from robotad.sandbox.policy import SandboxPolicy

from .ids import SESSION_ID_PATTERN

__all__ = [
    "SCHEMA_VERSION",
    "Corrupt",
    "DecodeOutcome",
    "ForkedFrom",
    "HistoryEntry",
    "Permissions",
    "RecordEnvelope",
    "SessionRecord",
    "SessionSettings",
    "StoredToolSchema",
    "Unsupported",
    "Valid",
    "check_record",
    "decode_record",
    "encode_messages",
    "encode_record",
    "instant_issues",
    "instant_problem",
    "is_instant",
    "mcp_server_issues",
]

#: The one version number of the store envelope and the export artifact.
SCHEMA_VERSION = 1

SessionId = Annotated[str, Meta(pattern=SESSION_ID_PATTERN)]
#: `0 < threshold <= 1`, or ``false`` to disable automatic compaction.
CompactThreshold = Annotated[float, Meta(gt=0.0, le=1.0)] | Literal[False]


class _Record(Struct, rename="camel", forbid_unknown_fields=True):
    """Base of every declared record object: camelCase members, unknown members refused."""


class HistoryEntry(_Record):
    """One entry of the session's audit history (events beside the chat messages)."""

    id: str
    type: str
    timestamp: UtcDatetime
    data: dict[str, Any] | UnsetType = UNSET

    def __post_init__(self) -> None:
        self.timestamp = in_utc(self.timestamp, "timestamp")


class StoredToolSchema(_Record):
    """What the model was told about one tool."""

    name: str
    description: str
    input_schema: dict[str, Any]


class Permissions(_Record):
    """Permission rules as patterns (PROTOCOL.md §4)."""

    allow: list[str]
    ask: list[str]
    deny: list[str]


class SessionSettings(_Record):
    """How the session was configured; `script` holds a scripted provider's remaining steps."""

    provider: str
    model: str
    permission_mode: PermissionMode
    permissions: Permissions
    auto_compact_threshold: CompactThreshold
    context_window: PositiveInt | UnsetType = UNSET
    idle_timeout_ms: PositiveInt | UnsetType = UNSET
    max_rounds: MaxRounds | UnsetType = UNSET
    #: The project-instruction files the system prompt was built with at creation.
    instructions: list[str] | UnsetType = UNSET
    script: list[dict[str, Any]] | UnsetType = UNSET
    #: Session-scoped MCP servers (``session/create {mcpServers}``), as given on the wire; each
    #: must be a wire ``McpServer`` (`mcp_server_issues`), since a session is built from it.
    mcp_servers: list[dict[str, Any]] | UnsetType = UNSET
    #: The session's sandbox; absent in records made before sandboxes (then: unconfined).
    sandbox: SandboxPolicy | UnsetType = UNSET


class ForkedFrom(_Record):
    """The session and message a fork was taken from."""

    session_id: str
    message_id: str


class SessionRecord(_Record):
    """Everything a session needs to resume. `created_at`/`updated_at` are ISO-8601 instants
    kept as the exact strings written. `metadata` is an open map of plain JSON values that is
    never read as settings or commands (G-012). `omitted_prompt` marks a self-paced loop whose
    prompt was omitted; absence means an explicit or legacy instruction."""

    id: SessionId
    cwd: str
    created_at: str
    updated_at: str
    messages: list[Message]
    history: list[HistoryEntry]
    system_prompt: str | None
    tool_schemas: list[StoredToolSchema]
    settings: SessionSettings
    turn_count: Count
    metadata: dict[str, Any]
    name: str | UnsetType = UNSET
    title: str | UnsetType = UNSET
    forked_from: ForkedFrom | UnsetType = UNSET
    omitted_prompt: bool | UnsetType = UNSET


class RecordEnvelope(Struct, rename="camel", forbid_unknown_fields=True):
    """The stored file: ``{schemaVersion, record}``."""

    schema_version: int
    record: SessionRecord


# -- outcomes -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Valid:
    """A record every member of which was checked."""

    envelope: RecordEnvelope

    @property
    def record(self) -> SessionRecord:
        return self.envelope.record


@dataclass(frozen=True, slots=True)
class Corrupt:
    """Every failing location, each ``{path, message}``; never empty."""

    issues: list[Issue]


@dataclass(frozen=True, slots=True)
class Unsupported:
    """A schemaVersion this build does not implement (reported without field issues)."""

    schema_version: int


DecodeOutcome = Valid | Corrupt | Unsupported

_INSTANT = Annotated[datetime, Meta(tz=True)]
_envelope_decoder = msgspec.json.Decoder(RecordEnvelope)
_encoder = msgspec.json.Encoder()


# -- codec ----------------------------------------------------------------------------------


#: Messages `encode_messages` encodes per call of the encoder.
ENCODE_BATCH = 256


def encode_record(record: SessionRecord, *, messages: bytes | bytearray | None = None) -> bytes:
    """The stored bytes of `record`: the envelope at the current `SCHEMA_VERSION`.

    `messages`, when given, is the record's messages already encoded (`encode_messages`): they
    are written as they are and ``record.messages`` is not read."""
    if messages is not None:
        spliced = cast(list[Message], msgspec.Raw(messages))
        record = msgspec.structs.replace(record, messages=spliced)
    return _encoder.encode(RecordEnvelope(SCHEMA_VERSION, record))


def encode_messages(messages: Sequence[Message]) -> bytearray:
    """The JSON array of `messages`, byte for byte as `encode_record` writes it, encoded
    `ENCODE_BATCH` messages at a time.

    msgspec holds the GIL for the whole of one call, so one call over a long history run in a
    worker thread stops the event loop just as long (tens of milliseconds at 20,000
    messages); between batches the interpreter hands the GIL over when the loop asks for it."""
    if not messages:
        return bytearray(b"[]")
    buffer = bytearray()
    for start in range(0, len(messages), ENCODE_BATCH):
        batch = messages[start : start + ENCODE_BATCH]
        if not buffer:
            _encoder.encode_into(batch, buffer)
            continue
        join = len(buffer) - 1  # the closing bracket becomes the comma before this batch
        _encoder.encode_into(batch, buffer, join)
        buffer[join] = ord(",")
    return buffer


def decode_record(data: bytes | None) -> DecodeOutcome:
    """Decode stored bytes totally: `Valid`, `Corrupt` (every issue) or `Unsupported`.

    Never raises for any input. The fast path is one msgspec decode; only a rejected input is
    parsed again to locate every issue.
    """
    if data is None or not data.strip():
        return Corrupt([{"path": "$", "message": "empty record"}])
    try:
        envelope = _envelope_decoder.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        return _slow_decode(data, exc)
    if envelope.schema_version != SCHEMA_VERSION:
        return Unsupported(envelope.schema_version)
    issues = instant_issues(envelope.record, "$.record") + mcp_server_issues(
        envelope.record, "$.record"
    )
    return Corrupt(issues) if issues else Valid(envelope)


def _slow_decode(data: bytes, error: msgspec.MsgspecError) -> DecodeOutcome:
    try:
        parsed = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        return Corrupt([{"path": "$", "message": f"invalid JSON: {exc}"}])
    if isinstance(parsed, dict):
        version = parsed.get("schemaVersion")
        if type(version) is int and version != SCHEMA_VERSION:
            return Unsupported(version)  # version first: no field issues of another shape
    try:
        convert(parsed, RecordEnvelope)
        issues: list[Issue] = []
    except ValidationFailed as exc:
        issues = exc.issues
    if isinstance(parsed, dict) and isinstance(parsed.get("record"), dict):
        issues += _raw_instant_issues(parsed["record"], "$.record", issues)
        issues += _raw_mcp_server_issues(parsed["record"], "$.record")
    return Corrupt(issues or [issue_from_error(error)])


def check_record(obj: Any, root: str) -> SessionRecord | list[Issue]:
    """Decode a record given as builtins (e.g. inside an artifact) with the same decoder the
    store uses; issues are located under `root` (``$.artifact.record`` → ``…record.cwd``)."""
    try:
        record = convert(obj, SessionRecord)
    except ValidationFailed as exc:
        issues = _rooted(exc.issues, root)
        if isinstance(obj, dict):
            issues += _raw_instant_issues(obj, root, issues)
            issues += _raw_mcp_server_issues(obj, root)
        return issues
    return instant_issues(record, root) + mcp_server_issues(record, root) or record


def _rooted(issues: list[Issue], root: str) -> list[Issue]:
    return [{"path": root + issue["path"][1:], "message": issue["message"]} for issue in issues]


def instant_issues(record: SessionRecord, root: str) -> list[Issue]:
    """Issues for ``createdAt``/``updatedAt`` strings that are no instants (`instant_problem`)."""
    return _raw_instant_issues(
        {"createdAt": record.created_at, "updatedAt": record.updated_at}, root, []
    )


def _raw_instant_issues(obj: dict[str, Any], root: str, known: list[Issue]) -> list[Issue]:
    seen = {issue["path"] for issue in known}
    issues: list[Issue] = []
    for member in ("createdAt", "updatedAt"):
        value = obj.get(member)
        path = join_path(root, member)
        problem = instant_problem(value, member) if isinstance(value, str) else None
        if problem is not None and path not in seen:
            issues.append({"path": path, "message": problem})
    return issues


def mcp_server_issues(record: SessionRecord, root: str) -> list[Issue]:
    """Issues for each ``settings.mcpServers`` entry that is no wire ``McpServer`` (PROTOCOL
    §10.5): the record keeps them as given, an open shape, but a session is built from them."""
    return _raw_mcp_server_issues({"settings": msgspec.to_builtins(record.settings)}, root)


def _raw_mcp_server_issues(obj: dict[str, Any], root: str) -> list[Issue]:
    settings = obj.get("settings")
    servers = settings.get("mcpServers") if isinstance(settings, dict) else None
    if not isinstance(servers, list):
        return []  # absent, or refused for its shape already
    issues: list[Issue] = []
    for index, server in enumerate(servers):
        if not isinstance(server, dict):
            continue  # refused for its shape already
        try:
            convert(server, McpServer)
        except ValidationFailed as exc:
            where = join_path(join_path(join_path(root, "settings"), "mcpServers"), index)
            issues += _rooted(exc.issues, where)
    return issues


def is_instant(text: str) -> bool:
    """Whether `text` is an ISO-8601 (RFC 3339) date-time with a timezone and a UTC date."""
    return instant_problem(text, "instant") is None


def instant_problem(text: str, member: str) -> str | None:
    """What keeps `text` (the value of `member`) from being an ISO-8601 (RFC 3339) date-time
    with a timezone whose UTC date exists (``0001-01-01T00:00:00+01:00`` falls in year 0,
    which clients reading it in UTC cannot hold); None when nothing does."""
    try:
        moment = msgspec.convert(text, _INSTANT)
    except msgspec.ValidationError:
        return "expected an ISO-8601 instant with timezone"
    try:
        in_utc(moment, member)
    except ValueError as exc:
        return str(exc)
    return None
