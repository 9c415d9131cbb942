"""The file session store: ``<state>/sessions/<id>.json``, one envelope per session.

The store decodes what it stores and nothing further (G-216): `load` answers `Valid`,
`Missing`, `Corrupt` or `Unsupported`, and a non-valid outcome is never taken for "no record"
on a write path: `save` and `update` refuse (`RecordCorrupt`/`RecordUnsupported`) rather than
overwrite a file they cannot read (G-004), and `create` refuses any existing file (G-005).

Writes are atomic and durable (`fsio.atomic_write`, G-007/G-008); files are 0600 and folders
0700 whatever the umask (G-009). Session ids are validated before any path is built (G-156).
A symlink or other non-regular file at a record path is never followed: it loads as `Corrupt`,
so every write path refuses it too.

Re-saving keeps what the session does not own (G-011): `save` refreshes only `SESSION_OWNED`
members and keeps the stored `createdAt`, `name`, `title`, `forkedFrom`, `omittedPrompt` and
`metadata` entries another writer put there. Such writers use `update`.

`save` reads the stored file every time, but decodes it only when its bytes differ from the
last ones this store wrote or decoded for that id. It remembers a SHA-256 digest of those
bytes (never the bytes: a long session's record runs to megabytes) with the members a save
keeps from them, for a bounded number of ids. So a save costs one read and one hash, not a
decode of the whole history, while any change made behind the store's back — a new name, a
corrupt or unsupported file — is still seen, because different bytes are always decoded
afresh.

Blocking I/O; async callers use ``trio.to_thread.run_sync``. One store object serialises its
own writes with a lock; it assumes no other process writes the same folder concurrently.

Its size is one concept: the record store's load, save, list and delete with change detection,
over one folder.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import msgspec
from msgspec import UNSET

from protocol.errors import (
    Issue,
    RecordCorrupt,
    RecordUnsupported,
    SessionExists,
    SessionNotFound,
)

from . import fsio
from .failure import refusing_writes
from .ids import is_safe_session_id, validate_session_id
from .record import (
    Corrupt,
    DecodeOutcome,
    ForkedFrom,
    SessionRecord,
    Unsupported,
    Valid,
    decode_record,
    encode_record,
    is_instant,
)

__all__ = [
    "SESSION_OWNED",
    "FileSessionStore",
    "LoadOutcome",
    "Missing",
    "StoredSession",
    "record_file",
]

#: The members a live session owns: every save replaces exactly these.
SESSION_OWNED = (
    "cwd",
    "updated_at",
    "messages",
    "history",
    "system_prompt",
    "tool_schemas",
    "settings",
    "turn_count",
)
_PRESERVED_OPTIONAL = ("name", "title", "forked_from", "omitted_prompt")
_SUFFIX = ".json"
#: Ids whose last stored bytes a store remembers (most recently used kept).
KNOWN_RECORDS = 64


@dataclass(frozen=True, slots=True)
class Missing:
    """No file exists for the id (the only outcome that means "no record")."""


LoadOutcome = Valid | Missing | Corrupt | Unsupported


class _Kept(msgspec.Struct, rename="camel"):
    """The members of a stored record that a save keeps (everything not `SESSION_OWNED`)."""

    created_at: str
    metadata: dict[str, Any]
    name: str | msgspec.UnsetType = UNSET
    title: str | msgspec.UnsetType = UNSET
    forked_from: ForkedFrom | msgspec.UnsetType = UNSET
    omitted_prompt: bool | msgspec.UnsetType = UNSET

    @classmethod
    def of(cls, record: SessionRecord) -> _Kept:
        return cls(
            record.created_at,
            record.metadata,
            record.name,
            record.title,
            record.forked_from,
            record.omitted_prompt,
        )


_kept_encoder = msgspec.json.Encoder()
_kept_decoder = msgspec.json.Decoder(_Kept)


@dataclass(frozen=True, slots=True)
class _Known:
    """The digest of the bytes last written or decoded at a record path, and the kept members
    they hold — encoded, so nothing a caller does to a returned record can change them."""

    digest: bytes
    kept: bytes


def _digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


@dataclass(frozen=True, slots=True)
class StoredSession:
    """One `list` row. For a damaged record the descriptive members are best effort
    (empty strings and zero when the file does not say)."""

    session_id: str
    status: Literal["ok", "corrupt", "unsupported"]
    cwd: str
    created_at: str
    updated_at: str
    message_count: int
    title: str | None = None
    forked_from: ForkedFrom | None = None
    schema_version: int | None = None
    issues: list[Issue] = field(default_factory=list)


class FileSessionStore:
    """Session records under ``<state_dir>/sessions/``."""

    def __init__(self, state_dir: Path) -> None:
        self._dir = Path(state_dir) / "sessions"
        self._lock = threading.Lock()
        self._listing: dict[str, tuple[tuple[int, ...], StoredSession]] = {}
        self._known: OrderedDict[str, _Known] = OrderedDict()
        self._known_lock = threading.Lock()

    @property
    def directory(self) -> Path:
        return self._dir

    def path_for(self, session_id: str) -> Path:
        """The record file of a session (the id is validated first)."""
        return self._dir / f"{validate_session_id(session_id)}{_SUFFIX}"

    # -- reading --------------------------------------------------------------------------

    def load(self, session_id: str) -> LoadOutcome:
        """Decode the stored record of `session_id`; never modifies the file.

        Raises `InputRejected` for an unsafe id and `OSError` when the file cannot be read
        (permissions, I/O) — a failure to read is neither missing nor corrupt.
        """
        path = self.path_for(session_id)
        try:
            data = fsio.read_regular(path)
        except fsio.UnsafePath:
            return _not_regular()
        if data is None:
            return Missing()
        outcome = decode_record_of(session_id, data)
        if isinstance(outcome, Valid):
            self._remember(session_id, data, outcome.record)
        return outcome

    def forget(self, session_id: str) -> None:
        """Drop what the store remembers of `session_id`'s stored bytes (e.g. once its session
        is unloaded); the next save decodes the file again."""
        with self._known_lock:
            self._known.pop(session_id, None)

    def exists(self, session_id: str) -> bool:
        """Whether anything at all occupies the record path of `session_id`."""
        return os.path.lexists(self.path_for(session_id))

    def list(self) -> list[StoredSession]:
        """Every stored record, newest ``updatedAt`` first; damaged ones listed with status
        ``corrupt``/``unsupported``, never hidden (G-006). Temp files are skipped.

        A record is fully decoded once; later listings reuse the result while the file's
        inode, size and times are unchanged (every save renames a new inode into place).
        """
        try:
            entries = list(os.scandir(self._dir))
        except FileNotFoundError:
            return []
        rows: list[StoredSession] = []
        seen: set[str] = set()
        for entry in entries:
            name = entry.name
            session_id = name[: -len(_SUFFIX)]
            if fsio.is_temp_name(name) or not name.endswith(_SUFFIX):
                continue
            if not is_safe_session_id(session_id):
                continue
            seen.add(session_id)
            rows.append(self._row(session_id, entry))
        for stale in self._listing.keys() - seen:
            del self._listing[stale]
        rows.sort(key=_newest_first)
        return rows

    def _row(self, session_id: str, entry: os.DirEntry[str]) -> StoredSession:
        info = entry.stat(follow_symlinks=False)
        key = (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_mode)
        cached = self._listing.get(session_id)
        if cached is not None and cached[0] == key:
            return cached[1]
        if not stat.S_ISREG(info.st_mode):
            issues = [{"path": "$", "message": "the record path is not a regular file"}]
            row = StoredSession(session_id, "corrupt", "", "", "", 0, issues=issues)
        else:
            try:
                data = fsio.read_regular(Path(entry.path))
            except fsio.UnsafePath:
                data = b""
            row = _summarise(session_id, data or b"")
        self._listing[session_id] = (key, row)
        return row

    # -- writing --------------------------------------------------------------------------

    def create(self, record: SessionRecord) -> SessionRecord:
        """Store a new record; `SessionExists` when any file (valid or not) has its id (G-005).

        The file appears atomically and exclusively: of two racing creates one wins."""
        path = self.path_for(record.id)
        data = encode_record(record)
        with self._lock:
            with refusing_writes(path, self._dir.parent):
                fsio.ensure_durable_dir(self._dir)
                created = not os.path.lexists(path) and fsio.create_exclusive(path, data)
            if not created:
                raise SessionExists(record.id)
            self._remember(record.id, data, record)
        return record

    def save(
        self, record: SessionRecord, *, messages: bytes | bytearray | None = None
    ) -> SessionRecord:
        """Write the session-owned members of `record`, keeping everything else stored.

        With no stored file the record is written as given. A stored record that is corrupt or
        unsupported is refused (`RecordCorrupt`/`RecordUnsupported`) and left byte-identical.
        The stored file is read each time and decoded only when its bytes are not the ones
        this store last wrote or decoded (module doc). Returns what was written.

        `messages`, when given, is the history already encoded (`encode_messages`) and is
        written in place of ``record.messages``, which is then not read (and is returned as
        given): a long history is encoded once a save, by its caller.
        """
        path = self.path_for(record.id)
        with self._lock:
            kept = self._stored_kept(record.id, path)
            if kept is not None:
                record = _merge(kept, record)
            data = encode_record(record, messages=messages)
            with refusing_writes(path, self._dir.parent):
                fsio.ensure_durable_dir(self._dir)
                fsio.atomic_write(path, data)
            self._remember(record.id, data, record)
        return record

    def _stored_kept(self, session_id: str, path: Path) -> _Kept | None:
        """The kept members of the stored record; None when there is none. Refuses a damaged
        record (`RecordCorrupt`/`RecordUnsupported`)."""
        try:
            data = fsio.read_regular(path)
        except fsio.UnsafePath:
            raise _damaged(session_id, _not_regular()) from None
        if data is None:
            return None
        with self._known_lock:
            known = self._known.get(session_id)
        if known is not None and known.digest == _digest(data):
            return _kept_decoder.decode(known.kept)
        outcome = decode_record_of(session_id, data)
        if not isinstance(outcome, Valid):
            raise _damaged(session_id, outcome)
        return _Kept.of(outcome.record)

    def _remember(self, session_id: str, data: bytes, record: SessionRecord) -> None:
        """`data` is now the stored content of `session_id`, holding `record`."""
        known = _Known(_digest(data), _kept_encoder.encode(_Kept.of(record)))
        with self._known_lock:
            self._known[session_id] = known
            self._known.move_to_end(session_id)
            while len(self._known) > KNOWN_RECORDS:
                self._known.popitem(last=False)

    def update(
        self, session_id: str, change: Callable[[SessionRecord], SessionRecord]
    ) -> SessionRecord:
        """Load, apply `change`, write the result as is (for fields a session does not own:
        name, title, metadata…). `SessionNotFound` when missing; damaged records refused."""
        path = self.path_for(session_id)
        with self._lock:
            current = self.load(session_id)
            if isinstance(current, Missing):
                raise SessionNotFound(session_id)
            _refuse_damaged(session_id, current)
            assert isinstance(current, Valid)
            changed = change(current.record)
            if changed.id != session_id:
                raise ValueError("update must not change the record's id")
            data = encode_record(changed)
            with refusing_writes(path, self._dir.parent):
                fsio.atomic_write(path, data)
            self._remember(session_id, data, changed)
        return changed

    def sweep_temp_files(self) -> int:
        """Remove temp files a crashed writer left behind; return how many.

        Only safe while no other process writes this folder (the daemon holds its single-
        instance lock when it calls this at start-up)."""
        with self._lock:
            return fsio.remove_temp_files(self._dir)

    def delete(self, session_id: str) -> bool:
        """Remove the record file (valid or not); False when there was none."""
        path = self.path_for(session_id)
        with self._lock:
            try:
                os.unlink(path)
            except FileNotFoundError:
                return False
            self._listing.pop(session_id, None)  # gone from the folder, even if the sync fails
            self.forget(session_id)
            fsio.fsync_dir(self._dir)
        return True


def _refuse_damaged(session_id: str, outcome: LoadOutcome) -> None:
    if isinstance(outcome, Corrupt | Unsupported):
        raise _damaged(session_id, outcome)


def record_file(session_id: str) -> str:
    """Where the record of `session_id` lives, relative to the state folder (for messages)."""
    return f"sessions/{session_id}.json"


def _damaged(session_id: str, outcome: Corrupt | Unsupported) -> RecordCorrupt | RecordUnsupported:
    if isinstance(outcome, Corrupt):
        return RecordCorrupt(session_id, outcome.issues, path=record_file(session_id))
    return RecordUnsupported(session_id, outcome.schema_version, path=record_file(session_id))


def _not_regular() -> Corrupt:
    return Corrupt([{"path": "$", "message": "the record path is not a regular file"}])


def _merge(stored: _Kept, fresh: SessionRecord) -> SessionRecord:
    """`fresh`'s session-owned members with the stored record's kept ones: the stored
    ``createdAt``, the stored optional members (`fresh` fills only the ones the stored record
    lacks) and the stored metadata entries over `fresh`'s."""
    kept: dict[str, Any] = {
        "created_at": stored.created_at,
        "metadata": {**fresh.metadata, **stored.metadata},
    }
    for name in _PRESERVED_OPTIONAL:
        value = getattr(stored, name)
        if value is not UNSET:
            kept[name] = value
    return msgspec.structs.replace(fresh, **kept)


class _Summary(msgspec.Struct):
    """The few members `list` shows, read leniently from a damaged record."""

    cwd: Any = None
    created_at: Any = msgspec.field(default=None, name="createdAt")
    updated_at: Any = msgspec.field(default=None, name="updatedAt")
    messages: Any = None
    title: Any = None


def decode_record_of(session_id: str, data: bytes) -> DecodeOutcome:
    """`decode_record`, and a record must name the session its file is named after: a copy
    under another name (a backup made by hand) would otherwise load as the original, and its
    saves would overwrite the original's newer history."""
    outcome = decode_record(data)
    if isinstance(outcome, Valid) and outcome.record.id != session_id:
        message = (
            f"names session {outcome.record.id!r}, but its file is {session_id}{_SUFFIX}: "
            f"a record is read only under its own id (rename the file, or import it)"
        )
        return Corrupt([{"path": "$.record.id", "message": message}])
    return outcome


def _summarise(session_id: str, data: bytes) -> StoredSession:
    outcome = decode_record_of(session_id, data)
    if isinstance(outcome, Valid):
        record = outcome.record
        return StoredSession(
            session_id,
            "ok",
            record.cwd,
            record.created_at,
            record.updated_at,
            len(record.messages),
            None if record.title is UNSET else record.title,
            None if record.forked_from is UNSET else record.forked_from,
            outcome.envelope.schema_version,
        )
    summary = _lenient_summary(data)

    def text(value: Any) -> str:
        return value if isinstance(value, str) else ""

    def instant(value: Any) -> str:
        """A readable timestamp, else "" (listed as null)."""
        return value if isinstance(value, str) and is_instant(value) else ""

    count = len(summary.messages) if isinstance(summary.messages, list) else 0
    title = summary.title if isinstance(summary.title, str) else None
    if isinstance(outcome, Unsupported):
        status: Literal["corrupt", "unsupported"] = "unsupported"
        version: int | None = outcome.schema_version
        issues: list[Issue] = []
    else:
        status, version, issues = "corrupt", None, outcome.issues
    return StoredSession(
        session_id,
        status,
        text(summary.cwd),
        instant(summary.created_at),
        instant(summary.updated_at),
        count,
        title,
        None,
        version,
        issues,
    )


class _LenientEnvelope(msgspec.Struct):
    record: Any = None


def _lenient_summary(data: bytes) -> _Summary:
    try:
        record = msgspec.json.decode(data, type=_LenientEnvelope).record
        return msgspec.convert(record, _Summary) if isinstance(record, dict) else _Summary()
    except (msgspec.DecodeError, msgspec.ValidationError):
        return _Summary()


def _newest_first(row: StoredSession) -> tuple[int, float, str]:
    try:
        when = datetime.fromisoformat(row.updated_at.replace("Z", "+00:00")).timestamp()
        return (0, -when, row.session_id)
    except ValueError:
        return (1, 0.0, row.session_id)
