"""One loaded session as the manager holds it: the Session, its event hub, its journal and the
bookkeeping around them.

- `RecordWriter` is the Session's store port: it turns a snapshot into a record and saves it
  through the blocking `FileSessionStore` in a worker thread (G-010), keeping the record's
  ``createdAt`` and remembering the ``updatedAt`` it wrote (for SessionInfo and session/list).
- `EventForwarder` is the Session's event sink: it hands each event to the hub, which stamps
  ``sessionId`` and ``seq``; once the hub is closed, late events are dropped, never raised into
  the Session.
- `Subscriber` is what receives a session's events: in the daemon, a connection's peer.
- `LiveSession` ties them together with the manager's own claim on the session (`work`: turns,
  resumes and compactions the manager started and has not seen finish), and when it was last
  used (for idle unload).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import msgspec
import trio
from msgspec import UNSET, UnsetType

from protocol.errors import SessionBusy
from protocol.events import SessionEvent
from protocol.methods import CompactResult
from protocol.shapes import Pending, TurnCompleted, TurnWaiting, utc_now
from robotad.agent.abort import AbortSignal
from robotad.daemon.events import EventHub
from robotad.daemon.turns import TurnRegistry
from robotad.session.ports import SessionSnapshot
from robotad.session.session import Session
from robotad.storage.handoff import run_blocking
from robotad.storage.journal import FileExecutionJournal
from robotad.storage.record import SessionRecord, encode_messages
from robotad.storage.store import FileSessionStore

__all__ = [
    "EventForwarder",
    "LiveSession",
    "RecordWriter",
    "Subscriber",
    "Work",
    "WorkKind",
    "WorkOutcome",
    "iso_now",
]

log = logging.getLogger("robotad.daemon")
_encoder = msgspec.json.Encoder()

#: What work the manager started settles with in the session's registry.
WorkOutcome = TurnCompleted | TurnWaiting | CompactResult
#: What that work is: a turn (`session/run`), a resume, or a compaction.
WorkKind = Literal["turn", "resume", "compaction"]


@dataclass(eq=False)
class Work:
    """Work the manager started on a session and has not yet seen end."""

    id: str
    kind: WorkKind
    done: trio.Event = field(default_factory=trio.Event)
    #: The work's abort signal, made at admission: an abort that comes before the work has
    #: claimed the session (it was answered "running" already) is not lost.
    abort: AbortSignal = field(default_factory=AbortSignal)


class Subscriber(Hashable, Protocol):
    """A destination of events: in the daemon, one connection's JSON-RPC peer."""

    @property
    def closed(self) -> bool: ...

    async def notify(self, method: str, params: Any = None, *, checkpoint: bool = True) -> None: ...


def iso_now() -> str:
    """Now as the wire and the record write it: ISO-8601 UTC ending in ``Z``."""
    text: str = msgspec.to_builtins(utc_now())
    return text


class RecordWriter:
    """The Session's `SessionStorePort` over the daemon's file store.

    A snapshot equal to the last one saved (or to the one the session was loaded with, see
    `remember`) is not written again, so closing or unloading an unchanged session leaves its
    record — and its ``updatedAt``, the list order — as they were. Snapshots are compared by
    a digest of their encoded form (a long session's snapshot runs to megabytes; its digest is
    32 bytes), so a message changed in place can never pass for an unchanged one.

    Saves land in the order they were called, which is the order their snapshots were taken:
    a settings change saved while a turn runs (another client's ``setPermissionMode``) wrote
    from a worker thread beside the turn's own save, and the older snapshot could land last,
    taking back a reply the turn had been answered "completed" with (G-010). A save waits for
    the one before it; one that does not have to wait passes no checkpoint for it.

    The history is encoded once a save, in the save's worker thread, a batch of messages at a
    time (`encode_messages`), and that one encoding serves both the digest and the record the
    store writes: on the event loop a save only copies the list of messages. (It used to
    encode the whole snapshot on the loop for the digest, and the store encoded it again: a
    20,000-message session stopped every other session for ~25 ms a turn.)
    """

    def __init__(
        self,
        store: FileSessionStore,
        *,
        created_at: str,
        updated_at: str,
        mcp_servers: list[dict[str, Any]] | UnsetType = UNSET,
    ) -> None:
        self._store = store
        self.created_at = created_at
        self.updated_at = updated_at
        #: The session's own MCP servers: fixed at creation, the Session never holds them.
        self.mcp_servers = mcp_servers
        self._saved: bytes | None = None
        self._writing = trio.StrictFIFOLock()

    async def remember(self, snapshot: SessionSnapshot) -> None:
        """Record that the stored record already holds `snapshot`'s state (its digest is
        taken in a worker thread)."""
        digest, _ = await run_blocking(_encoded, snapshot)
        self._saved = digest

    def record_of(self, snapshot: SessionSnapshot, *, updated_at: str) -> SessionRecord:
        """The record `snapshot` stands for: what a save writes and an export shows."""
        record = snapshot.to_record(created_at=self.created_at, updated_at=updated_at)
        if self.mcp_servers is not UNSET:
            settings = msgspec.structs.replace(record.settings, mcp_servers=self.mcp_servers)
            record = msgspec.structs.replace(record, settings=settings)
        return record

    async def save(self, snapshot: SessionSnapshot) -> None:
        """Persist the session-owned members durably; raises when the store refuses."""
        try:
            self._writing.acquire_nowait()  # the usual case: no save in progress
        except trio.WouldBlock:
            await self._writing.acquire()
        try:
            written = await run_blocking(self._save, snapshot, iso_now())
        finally:
            self._writing.release()
        if written is not None:
            self.updated_at = written

    def _save(self, snapshot: SessionSnapshot, updated_at: str) -> str | None:
        """In a worker thread, one at a time: write `snapshot` unless it is the one saved
        last; the ``updatedAt`` written, or None when nothing was."""
        digest, messages = _encoded(snapshot)
        if digest == self._saved:
            return None
        bare = msgspec.structs.replace(snapshot, messages=[])
        record = self.record_of(bare, updated_at=updated_at)
        written = self._store.save(record, messages=messages)
        self._saved = digest
        return written.updated_at


def _encoded(snapshot: SessionSnapshot) -> tuple[bytes, bytearray]:
    """The digest of `snapshot`'s encoded form, and its history's encoding (for the record)."""
    messages = encode_messages(snapshot.messages)
    digest = hashlib.sha256(_encoder.encode(msgspec.structs.replace(snapshot, messages=[])))
    digest.update(messages)
    return digest.digest(), messages


class EventForwarder:
    """The Session's event sink: synchronous, never blocks, never raises into the Session."""

    def __init__(self) -> None:
        self.hub: EventHub | None = None

    def __call__(self, event: SessionEvent) -> None:
        hub = self.hub
        if hub is None or hub.closed:
            return
        try:
            hub.publish(msgspec.to_builtins(event))
        except (trio.ClosedResourceError, ValueError):
            log.debug("dropped an event the hub refused", exc_info=True)


@dataclass(eq=False)
class LiveSession:
    """A loaded session. Owned by the manager; every member is the manager's to change."""

    session: Session
    hub: EventHub
    writer: RecordWriter
    #: The session's execution journal (opened when the session is activated).
    journal: FileExecutionJournal
    turns: TurnRegistry[WorkOutcome]
    #: Set once the hub's delivery tasks have all ended (after `EventHub.close`).
    hub_done: trio.Event = field(default_factory=trio.Event)
    last_used: float = field(default_factory=trio.current_time)
    #: Set once a close or unload began: the session takes no new work.
    closing: bool = False
    #: Set while the close under way is an idle unload (not a client's close).
    unloading: bool = False
    #: Work the manager started on this session and has not yet seen end, by id.
    work: dict[str, Work] = field(default_factory=dict)
    #: Held by a mode or rule change from the change to its save (or undo): a refused save
    #: puts back only its own change, never one another client made meanwhile.
    settings_lock: trio.StrictFIFOLock = field(default_factory=trio.StrictFIFOLock)

    @property
    def session_id(self) -> str:
        return self.session.session_id

    def touch(self) -> None:
        self.last_used = trio.current_time()

    def pending(self) -> Pending | None:
        """The parked execution waiting for approval, if any."""
        return self.session.get_pending_execution()

    @property
    def busy(self) -> bool:
        """Whether anything runs: work the manager started, or the Session's own claim."""
        return bool(self.work) or self.session.is_running()

    def begin(self, work_id: str, kind: WorkKind) -> Work:
        """Record the start of manager-started work; `end(work_id)` records its end. Only
        `SessionManager.admit` calls this: admission and the record of it are one step."""
        work = self.work[work_id] = Work(work_id, kind)
        return work

    def end(self, work_id: str) -> None:
        work = self.work.pop(work_id, None)
        if work is not None:
            work.done.set()
        self.touch()

    def abort_admitted(self) -> bool:
        """Fire the abort signal of every admitted work (it starts aborted if it has not
        claimed the session yet); True when any of it ends aborted for it — not work whose
        outcome was settled already (`AbortSignal.settle`)."""
        for work in self.work.values():
            work.abort.abort()
        return any(work.abort.aborted for work in self.work.values())

    def busy_error(self) -> SessionBusy:
        """The `SessionBusy` this session answers now: naming the Session's current turn, else
        a turn the manager started and has not seen begin, else the work outside any turn
        (a compaction, a resume, a direct call) by its kind."""
        holder = self.session.claim_holder
        if holder is not None and holder.turn_id is not None:
            return SessionBusy(self.session_id, holder.turn_id)
        turn = next((w.id for w in self.work.values() if w.kind == "turn"), None)
        if turn is not None:
            return SessionBusy(self.session_id, turn)
        kind = holder.kind if holder is not None else next(iter(self.work.values())).kind
        return SessionBusy(self.session_id, None, kind)

    async def wait_idle(self) -> None:
        """Return once no work the manager started is left (at once when there is none)."""
        while self.work:
            await next(iter(self.work.values())).done.wait()
