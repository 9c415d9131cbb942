"""The records of the execution journal and their line codec.

Every record is a frozen, tagged `msgspec.Struct` (``"kind"`` names it on the wire, members are
camelCase, unknown members are refused), one JSON line each in an execution's file. `JournalRecord`
is the union a line decodes to. `encode_journal_record` writes one line; `record_fingerprint` is
what the journal's idempotence compares. Decoding a whole file, with its corruption report, is
`robotad.storage.journal.decode_journal`.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any, Literal

import msgspec
from msgspec import UNSET, Struct, UnsetType, field

from protocol.methods import MaxRounds
from protocol.shapes import Message, UtcDatetime, utc_now

__all__ = [
    "CompactionRecord",
    "EffectFinishedRecord",
    "EffectStartedRecord",
    "FinishedRecord",
    "JournalRecord",
    "ReplyRecord",
    "RequestRecord",
    "ResponseRecord",
    "StartedRecord",
    "encode_journal_record",
    "record_fingerprint",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class _Record(
    Struct,
    frozen=True,
    kw_only=True,
    rename="camel",
    forbid_unknown_fields=True,
    tag_field="kind",
):
    """Members every record has. `id` is chosen by the caller and deterministic (for example
    ``f"{execution_id}:request:{request_id}"``), so a retried append is recognised."""

    id: str
    execution_id: str
    timestamp: UtcDatetime = field(default_factory=utc_now)


class StartedRecord(_Record, frozen=True, kw_only=True, tag="started"):
    """The identity a resume must match (G-088, G-089), and the turn's round limit."""

    turn_id: str
    session_id: str
    cwd: str
    provider: str
    model: str
    user_message_id: str
    #: The turn's round limit as it started (PROTOCOL §10.2): `session/run`'s ``maxRounds``
    #: when given, else the session's; null for no limit. Absent from journals written before
    #: it was recorded, which are read with the session's limit (`Execution.round_limit`).
    max_rounds: MaxRounds | UnsetType | None = UNSET


class ReplyRecord(_Record, frozen=True, kw_only=True, tag="reply"):
    """An assistant message, journaled before it enters history (G-096)."""

    message: Message


class RequestRecord(_Record, frozen=True, kw_only=True, tag="request"):
    """A parked call: the exact action a person is asked about (G-074, G-075)."""

    request_id: str
    call_id: str
    tool: str
    arguments: dict[str, Any]
    reason: str


class ResponseRecord(_Record, frozen=True, kw_only=True, tag="response"):
    """A person's answer to one request (G-084, G-085)."""

    request_id: str
    response_id: str
    approved: bool


class EffectStartedRecord(_Record, frozen=True, kw_only=True, tag="effect_started"):
    """Written before a tool body runs; without a matching finish the effect is uncertain."""

    call_id: str


class EffectFinishedRecord(_Record, frozen=True, kw_only=True, tag="effect_finished"):
    """The tool result message, written before it is committed to history."""

    call_id: str
    message: Message


class CompactionRecord(_Record, frozen=True, kw_only=True, tag="compaction"):
    """Compaction's summary message, written before history is replaced (G-096)."""

    message: Message
    trigger: Literal["manual", "auto"]


class FinishedRecord(_Record, frozen=True, kw_only=True, tag="finished"):
    """The execution is over; nothing of it can be resumed."""

    status: Literal["completed", "failed", "aborted", "abandoned"]


JournalRecord = (
    StartedRecord
    | ReplyRecord
    | RequestRecord
    | ResponseRecord
    | EffectStartedRecord
    | EffectFinishedRecord
    | CompactionRecord
    | FinishedRecord
)

_encoder = msgspec.json.Encoder()
_canonical = msgspec.json.Encoder(order="deterministic")


def encode_journal_record(record: JournalRecord) -> bytes:
    """One journal line, newline included (JSON text never holds a raw newline)."""
    return _encoder.encode(record) + b"\n"


def record_fingerprint(record: JournalRecord) -> bytes:
    """A digest equal for two records exactly when they agree in every member but `timestamp`
    (object key order does not matter). Idempotence of `append` is decided by it."""
    canonical = _canonical.encode(msgspec.structs.replace(record, timestamp=_EPOCH))
    return hashlib.sha256(canonical).digest()
