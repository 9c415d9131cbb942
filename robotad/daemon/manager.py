"""The session manager: every session of the daemon, loaded on demand, unloaded when idle.

`SessionManager` owns the live sessions (`LiveSession`: a Session, its event hub, its journal),
a turn registry per session (kept for a while after an unload, so a ``turnId`` keeps its
meaning across an idle unload), the file store, the prompt history and the project rules. It
runs its hubs and turns in the nursery it is given — the application's, which outlives every
connection — so a turn never depends on whoever asked for it (G-072).

Loading. Any session method on a stored but unloaded session loads it first (PROTOCOL §5): the
store's outcome maps to `SessionNotFound` (-32002, G-001), `RecordCorrupt` (-32003, every
issue, G-002) or `RecordUnsupported` (-32004, G-003); a damaged file is only ever read, so it
stays byte-for-byte unchanged (G-004). Loads, closes and deletes of one id are serialised by a
per-id lock; a request arriving while its session closes waits for the close, then loads it
again. Reading methods (get, abort…) still reach a closing session — not one being unloaded
for idleness: that unload is nobody's close, so they wait for it and reach the session loaded
again (a subscription attached to the closing stream got ``session_closed`` and nothing after).

Creating (create, import, fork). The id is validated before any path is built (G-156); an id
whose record exists — valid, corrupt or unsupported — is refused with `SessionExists` (G-005);
the Session is built (every setting checked) *before* the record is written, so a refusal
writes nothing (G-032, G-108).

Idle unload. A session with no subscriber, no work running or waiting, unused for
`idle_unload_seconds`, is unloaded (a shutdown: SessionEnd, persist); its next use reloads it
transparently.

Shutdown. `shutdown(grace)` takes no new work and loads or creates no session, lets the loads
and creates under way and running work finish within `grace` (stopping the loads still under
way after it: refused, their SessionStart paired with a SessionEnd), aborts what is left, waits
for it to settle, then closes every session (SessionEnd, persist, event hub closed with
``session_closed``). One session's failure to close never stops the others. A close, once it
retires its session, finishes whoever asked for it goes away; only the shutdown's deadline
cuts it (`robotad.daemon.transitions`).

Blocking store work runs in worker threads. Turn-level operations live in
`robotad.daemon.operations`; this module is the lifecycle.

Its size is one concept: the lifecycle of loaded sessions (load, admit, close, unload,
shutdown), whose steps share one lock discipline.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import shutil
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final, Literal

import msgspec
import trio
from msgspec import UNSET

from protocol.errors import (
    ExecutionPending,
    NotAllowed,
    RecordCorrupt,
    RecordUnsupported,
    SessionExists,
    SessionNotFound,
)
from protocol.methods import CreateParams, SessionSummary
from protocol.shapes import SessionInfo, new_id
from robotad.daemon.assembly import SessionAssembler
from robotad.daemon.events import DEFAULT_BUFFER_SIZE, EventHub, first_seq_after_restart
from robotad.daemon.info import newest_first, session_info, session_summary
from robotad.daemon.keyed_locks import KeyedLocks
from robotad.daemon.live import (
    EventForwarder,
    LiveSession,
    RecordWriter,
    Work,
    WorkKind,
    WorkOutcome,
    iso_now,
)
from robotad.daemon.log_recovery import close_cut_off
from robotad.daemon.parked import ParkedSessions, record_round_open
from robotad.daemon.transitions import Transitions
from robotad.daemon.turns import TurnRegistry
from robotad.log import fields
from robotad.storage.failure import refused, relative_path, storage_reason
from robotad.storage.ids import validate_session_id
from robotad.storage.journal import FileExecutionJournal, JournalError, JournalLocked
from robotad.storage.log_files import FileLogSource, log_paths
from robotad.storage.log_files import sweep_temp_files as sweep_log_temp_files
from robotad.storage.prompt_history import HISTORY_FILE, PromptHistory
from robotad.storage.record import Corrupt, SessionRecord, Unsupported, Valid
from robotad.storage.store import FileSessionStore, LoadOutcome, Missing, record_file

__all__ = ["DEFAULT_IDLE_UNLOAD_SECONDS", "SessionManager"]

log = logging.getLogger("robotad.daemon")

#: How long an unused, unwatched, idle session stays loaded (``--idle-unload-seconds``).
DEFAULT_IDLE_UNLOAD_SECONDS: Final = 600.0
#: Upper bound on how often idle sessions are looked for.
_MAX_IDLE_SWEEP: Final = 30.0
#: Unloaded sessions whose turn registries are kept (most recently unloaded first).
_PARKED_REGISTRIES: Final = 256
#: How long a closing session waits for its subscribers to receive its last events.
_HUB_DRAIN_TIMEOUT: Final = 2.0


class SessionManager:
    """Every session of one daemon; see the module docstring.

    `nursery` must outlive every request (hubs and turns run there). Call `run` in it for the
    start-up sweep and idle unloading, and `shutdown` before leaving it.
    """

    def __init__(
        self,
        *,
        state_dir: Path,
        assembler: SessionAssembler,
        nursery: trio.Nursery,
        event_buffer: int = DEFAULT_BUFFER_SIZE,
        idle_unload_seconds: float = DEFAULT_IDLE_UNLOAD_SECONDS,
    ) -> None:
        self.state_dir = Path(state_dir)
        self.store = FileSessionStore(self.state_dir)
        self.prompts = PromptHistory(self.state_dir / HISTORY_FILE)
        self.assembler = assembler
        self.nursery = nursery
        self.event_buffer = event_buffer
        self.idle_unload_seconds = idle_unload_seconds
        self.logs_dir = self.state_dir / "logs"
        self._live: dict[str, LiveSession] = {}
        self._locks = KeyedLocks()
        # Turn registries of recently unloaded sessions (a live one holds its own), so a turnId
        # keeps its meaning across an idle unload.
        self._parked_turns: OrderedDict[str, TurnRegistry[WorkOutcome]] = OrderedDict()
        self._next_seq: dict[str, int] = {}
        #: Sessions a fork is being made of, with how many (see `forking`).
        self._forking: Counter[str] = Counter()
        #: Sessions being loaded, created or retired, as the shutdown must see them.
        self._transitions = Transitions()
        #: Unloaded sessions with a parked execution (PROTOCOL §10.2), known from start-up.
        self.parked = ParkedSessions()

    # -- running ---------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Sweep temp files a crashed writer left (records, project rules), then unload idle
        sessions until cancelled; log sidecars' leftovers are swept once ready.

        Ready once the first sweep is done. Only for a daemon holding the single-instance
        lock."""
        started = time.time()
        removed = await trio.to_thread.run_sync(self.store.sweep_temp_files)
        removed += await trio.to_thread.run_sync(self.assembler.project_rules.sweep_temp_files)
        if removed:
            log.info("removed leftover temp files", extra=fields(count=removed))
        round_open = functools.partial(record_round_open, self.store)
        await trio.to_thread.run_sync(
            self.parked.scan, self.state_dir, self.store.exists, round_open
        )
        task_status.started()
        # One folder a session: ~0.1 s at 10,000 sessions, so not before the daemon answers;
        # a temp file of this daemon's own (newer than `started`) is never taken.
        removed = await trio.to_thread.run_sync(sweep_log_temp_files, self.logs_dir, started)
        if removed:
            log.info("removed leftover sidecar temp files", extra=fields(count=removed))
        if self.idle_unload_seconds <= 0 or not math.isfinite(self.idle_unload_seconds):
            await trio.sleep_forever()
        interval = min(max(self.idle_unload_seconds / 4, 0.01), _MAX_IDLE_SWEEP)
        while True:
            await trio.sleep(interval)
            for live in list(self._live.values()):
                if self._unloadable(live):
                    self.nursery.start_soon(self._unload_if_idle, live.session_id)

    def loaded(self, session_id: str) -> LiveSession | None:
        return self._live.get(session_id)

    # -- finding sessions ------------------------------------------------------------------

    async def session(self, session_id: str, *, closing_ok: bool = False) -> LiveSession:
        """The live session `session_id`, loaded first if it is only stored.

        With `closing_ok`, a session being closed is returned as it is (for methods that only
        read or abort); otherwise, and always for a session being unloaded for idleness (it is
        in use again), the caller waits for the close and gets a fresh load.
        """
        live = self._live.get(session_id)
        if live is None or (live.closing and (live.unloading or not closing_ok)):
            async with self._locks.hold(session_id):
                live = self._live.get(session_id)
                if live is None:
                    live = await self._load(session_id)
        live.touch()
        return live

    async def stored_record(self, session_id: str) -> SessionRecord:
        """The stored record, or the error of its load outcome (G-001…G-003)."""
        return _valid(session_id, await self._load_outcome(session_id))

    async def require_exists(self, session_id: str) -> LiveSession | None:
        """The live session if loaded; else check that a loadable record exists."""
        live = self._live.get(session_id)
        if live is None:
            await self.stored_record(session_id)
        return live

    # -- create, open, close, delete -------------------------------------------------------

    async def create(self, params: CreateParams) -> SessionInfo:
        """A new session as ``session/create`` describes it (G-005, G-037, G-038, G-102,
        G-108, G-156)."""
        self._refuse_if_closing()
        session_id = params.session_id if params.session_id is not UNSET else None
        if session_id is not None:
            validate_session_id(session_id)
        settings = self.assembler.settings_for_create(params)
        system_prompt, instructions = await trio.to_thread.run_sync(
            self.assembler.system_prompt_for, params, settings
        )
        if instructions is not None:
            settings = msgspec.structs.replace(settings, instructions=instructions)
        if session_id is None:
            session_id = await self.fresh_id()
        now = iso_now()
        record = SessionRecord(
            id=session_id,
            # The spelling the Session itself uses (``/p/./`` is ``/p``), so the record, the
            # SessionInfo and every hook report one root (G-104).
            cwd=str(Path(params.cwd)),
            created_at=now,
            updated_at=now,
            messages=[],
            history=[],
            system_prompt=system_prompt,
            tool_schemas=[],
            settings=settings,
            turn_count=0,
            metadata={},
        )
        live = await self.add(record, new_at="$")
        return session_info(live)

    async def add(
        self,
        record: SessionRecord,
        *,
        new_at: str | None = None,
        written: Callable[[SessionRecord, LiveSession], SessionRecord] | None = None,
    ) -> LiveSession:
        """Build the session of a new `record`, write the record exclusively, start it.

        The record written is the built session's own snapshot merged into `record` (so its
        history starts as the Session holds it) unless `written` says otherwise. Nothing is
        written when building refuses; `SessionExists` when any file has the id. `new_at`
        locates refusals of the record's settings (see `SessionAssembler.build`).
        """
        session_id = record.id
        with self._transitions.arriving():  # NotAllowed once the daemon shuts down
            async with self._locks.hold(session_id):
                if session_id in self._live or await trio.to_thread.run_sync(
                    self.store.exists, session_id
                ):
                    raise SessionExists(session_id)
                live = await self._prepare(record, source="startup", new_at=new_at)
                try:
                    if written is not None:
                        to_write = written(record, live)
                    else:
                        to_write = _with_snapshot(record, live)
                    await trio.to_thread.run_sync(self.store.create, to_write)
                except BaseException:
                    with trio.CancelScope(shield=True):
                        await self._dispose(live, started=False)
                    raise
                try:
                    await self._activate(live)
                except BaseException as exc:
                    # Another process holding the journal owns it and the log: only the
                    # record goes.
                    record_only = isinstance(exc.__cause__, JournalLocked)
                    with trio.CancelScope(shield=True):
                        await trio.to_thread.run_sync(self._undo_create, session_id, record_only)
                    raise
        log.info("session created", extra=fields(session_id=session_id))
        return live

    async def close(self, session_id: str) -> None:
        """``session/close``: drain, SessionEnd, persist, unload. A stored session that is not
        loaded is already closed (its record must still load, like ``session/open``'s)."""
        async with self._locks.hold(session_id):
            live = self._live.get(session_id)
            if live is None:
                _valid(session_id, await self._load_outcome(session_id))
                return
            await self._saved_first(live)
            await self._retire(live)

    async def _saved_first(self, live: LiveSession) -> None:
        """Save `live` once its running work is done, before it is unloaded; a save the disk
        refuses is raised (StorageFailed) and the session stays loaded, holding the history
        the refused save would have written — never unloaded with it (a close used to say
        ``closed`` and drop a turn whose save had failed). Work the manager admitted counts as
        running before it has claimed the Session (a turn answered "running" whose task has not
        begun): it is waited for too, or the Session, shut down, would refuse it and its
        ``turn_finished`` never come."""
        live.closing = True
        try:
            await live.wait_idle()
            await live.session.save_when_idle()
        except BaseException:
            live.closing = False
            raise

    @contextlib.contextmanager
    def forking(self, source_id: str) -> Iterator[None]:
        """Mark a fork of `source_id` as being made: the source cannot be deleted meanwhile,
        or its stored tool results would go before the fork shares them."""
        self._forking[source_id] += 1
        try:
            yield
        finally:
            self._forking[source_id] -= 1
            if not self._forking[source_id]:
                del self._forking[source_id]

    async def delete(self, session_id: str) -> None:
        """``session/delete``: `NotAllowed` while loaded or while a fork of it is being made;
        else remove the record (valid or damaged) with its journal, log and stored tool
        results (those no fork of it holds), so a later session of that id starts clean."""
        async with self._locks.hold(session_id):
            if session_id in self._live:
                raise NotAllowed(f"session {session_id} is loaded; close it before deleting it")
            if self._forking[session_id]:
                raise NotAllowed(f"session {session_id} is being forked; delete it afterwards")
            if not await trio.to_thread.run_sync(self.store.exists, session_id):
                raise SessionNotFound(session_id)
            await trio.to_thread.run_sync(self._remove_files, session_id)
            self._parked_turns.pop(session_id, None)
            self.parked.discard(session_id)
            if self.assembler.spill is not None:  # its stored tool results go with it
                self.assembler.spill.release(session_id)
        log.info("session deleted", extra=fields(session_id=session_id))

    def _undo_create(self, session_id: str, record_only: bool) -> None:
        """All or nothing: the files of a session that was written but could not start go,
        the record first — one unlink, which needs no descriptor, so a daemon out of them
        (the likely reason it could not start) still lists no half-made session — then, unless
        `record_only`, its journal folder (empty: an ``rmdir``, no descriptor either), log and
        payloads. Each step is tried whatever the one before did; a failure is logged, never
        raised over the error that made the create fail."""
        steps: list[Callable[[], object]] = [functools.partial(self.store.delete, session_id)]
        if not record_only:
            steps += [functools.partial(_remove, path) for path in self._own_files(session_id)]
        for step in steps:
            try:
                step()
            except OSError as exc:
                log.warning(
                    "cleaning up the session that could not start: %s",
                    exc.strerror or type(exc).__name__,
                    extra=fields(session_id=session_id),
                )

    def _remove_files(self, session_id: str) -> None:
        """Journal and log first, the record last: a failure leaves the session listed."""
        for path in self._own_files(session_id):
            _remove(path)
        self.store.delete(session_id)

    def _own_files(self, session_id: str) -> tuple[Path, Path, Path]:
        """What a session has on disk besides its record: journal folder, payloads, log."""
        log_file, payloads = log_paths(self.logs_dir, session_id)
        return FileExecutionJournal(self.state_dir, session_id).directory, payloads, log_file

    async def list(self) -> list[SessionSummary]:
        """Every stored record, merged with its live session, newest ``updatedAt`` first;
        damaged records listed with their status (G-006)."""
        rows = await trio.to_thread.run_sync(self.store.list)
        summaries = [
            session_summary(
                row, self._live.get(row.session_id), parked=row.session_id in self.parked
            )
            for row in rows
        ]
        summaries.sort(key=newest_first)
        return summaries

    # -- status ----------------------------------------------------------------------------

    def counts(self) -> tuple[int, int, int]:
        """(loaded, running, waiting) — for ``daemon/status``; never blocks."""
        running = waiting = 0
        for live in self._live.values():
            running += live.busy
            waiting += live.pending() is not None
        return len(self._live), running, waiting + self.parked.count_unloaded(self._live)

    def admit(self, live: LiveSession, kind: WorkKind, work_id: str) -> Work:
        """The one answer to "may this work start on `live` now", and its record when it may.

        Refused while the daemon shuts down (`NotAllowed`), while anything runs on the session
        (`SessionBusy` naming the holder's turn) and, for a new turn, while an execution waits
        for approval (`ExecutionPending`). Admitted work is recorded at once (no checkpoint
        between the check and the record); the caller ends it with ``live.end(work_id)``.
        """
        self._refuse_if_closing()
        if live.busy:
            raise live.busy_error()
        if kind == "turn":
            pending = live.pending()
            if pending is not None:
                raise ExecutionPending(live.session_id, pending.execution_id)
        return live.begin(work_id, kind)

    # -- shutdown --------------------------------------------------------------------------

    async def shutdown(self, grace: float) -> None:
        """Finish running work and the loads and creates under way within `grace` seconds,
        abort or stop the rest, close every session. Cancelled (the daemon's deadline), it
        cuts the SessionEnd hooks and SessionStart hooks still running, which shield
        themselves from their requesters."""
        self._transitions.closing = True
        await self._transitions.cut_if_cancelled(functools.partial(self._drain, grace))
        self.prompts.close()

    async def _drain(self, grace: float) -> None:
        """`shutdown`'s steps. Loads and creates under way go first: the sessions they bring
        are closed with the others (left out, one stayed loaded past the shutdown, or was
        cut halfway through its SessionStart with no SessionEnd); one still under way at the
        grace's end is stopped and refused."""
        with trio.move_on_after(grace):
            await self._transitions.arrivals_settled()
            for live in list(self._live.values()):
                await live.wait_idle()
        self._transitions.cut_arrivals()
        await self._transitions.arrivals_settled()
        for live in list(self._live.values()):
            if live.busy:
                log.info("aborting work at shutdown", extra=fields(session_id=live.session_id))
                live.session.abort()
                live.abort_admitted()  # also work accepted and not begun: it begins aborted
        for live in list(self._live.values()):
            await live.wait_idle()
        await self.close_all()

    async def close_all(self) -> None:
        """Close every loaded session concurrently; failures are logged, never propagated."""
        async with trio.open_nursery() as closing:
            for session_id in list(self._live):
                closing.start_soon(self._close_quietly, session_id)

    async def _close_quietly(self, session_id: str) -> None:
        try:
            await self.close(session_id)
        except Exception:
            log.exception("closing a session failed", extra=fields(session_id=session_id))

    # -- loading internals -----------------------------------------------------------------

    async def _load_outcome(self, session_id: str) -> LoadOutcome:
        validate_session_id(session_id)
        return await trio.to_thread.run_sync(self.store.load, session_id)

    async def _load(self, session_id: str) -> LiveSession:
        """Load a stored session (the caller holds its transition lock); `NotAllowed` once
        the daemon shuts down."""
        with self._transitions.arriving():
            record = _valid(session_id, await self._load_outcome(session_id))
            live = await self._prepare(record, source="resume")
            await self._activate(live)
        log.info("session loaded", extra=fields(session_id=session_id))
        return live

    async def _prepare(
        self,
        record: SessionRecord,
        *,
        source: Literal["startup", "resume"],
        new_at: str | None = None,
    ) -> LiveSession:
        """Build the Session of `record` and start its event hub (nothing started yet)."""
        forward = EventForwarder()
        writer = RecordWriter(
            self.store,
            created_at=record.created_at,
            updated_at=record.updated_at,
            mcp_servers=record.settings.mcp_servers,
        )
        session = await self.assembler.build(
            record,
            event_sink=forward,
            store=writer,
            persist_project_rule=self._persist_project_rule,
            source=source,
            new_at=new_at,
        )
        next_seq = self._next_seq.get(record.id)
        if next_seq is None:
            next_seq = 1 if source == "startup" else first_seq_after_restart()
        hub = EventHub(record.id, buffer_size=self.event_buffer, next_seq=next_seq)
        hub_done = trio.Event()
        try:
            await writer.remember(session.snapshot())
            await self.nursery.start(_run_hub, hub, hub_done)
        except BaseException:  # its requester left: the built session lets go of it all
            with trio.CancelScope(shield=True):
                await session.release()
            raise
        forward.hub = hub
        turns = self._parked_turns.pop(record.id, None) or TurnRegistry(self.nursery)
        journal = FileExecutionJournal(self.state_dir, record.id)
        return LiveSession(session, hub, writer, journal=journal, turns=turns, hub_done=hub_done)

    async def _activate(self, live: LiveSession) -> None:
        """Open the journal, rebuild any parked execution, fire SessionStart; then the session
        is live. On failure (a cancellation: its requester left, the shutdown stopped it)
        everything is released and the error propagates; a session whose SessionStart began
        is shut down first, so its SessionEnd fires and its log ends."""
        session = live.session
        starting = False
        try:
            try:
                await live.journal.open()
            except JournalLocked as exc:
                raise NotAllowed(
                    f"session {live.session_id} is open in another process ({exc}); close it "
                    "there first"
                ) from exc
            except JournalError as exc:
                raise self._journal_failed(live, exc) from exc
            log = FileLogSource.for_session(self.logs_dir, live.session_id)
            await session.recover(live.journal, log)
            await close_cut_off(session, self.logs_dir)  # a stop's loose ends, in the log
            starting = True
            await session.start()
        except BaseException:
            if starting:
                with self._transitions.leaving():
                    await session.shutdown()
            with trio.CancelScope(shield=True):
                await self._dispose(live, started=starting)
            raise
        self._live[live.session_id] = live

    def _journal_failed(self, live: LiveSession, exc: JournalError) -> Exception:
        """What a journal that cannot be opened answers: StorageFailed naming its folder and
        the system's reason ("too many open files") when the system refused; else `exc`."""
        cause = exc.__cause__
        if not isinstance(cause, OSError):
            return exc
        folder = relative_path(live.journal.directory, self.state_dir)
        return refused("open", folder, storage_reason(cause), live.session_id)

    async def _retire(self, live: LiveSession) -> None:
        """Shut a live session down: drain, SessionEnd, persist, close its hub and journal.
        Once begun it finishes, whoever asked for it is cancelled or goes away
        (`Transitions.leaving`); only the daemon's shutdown deadline cuts it short."""
        live.closing = True
        try:
            with self._transitions.leaving():
                await live.session.shutdown()
        finally:
            with trio.CancelScope(shield=True):
                await self._dispose(live, started=True)
        log.info("session closed", extra=fields(session_id=live.session_id))

    async def _dispose(self, live: LiveSession, *, started: bool) -> None:
        """Release what `_prepare`/`_activate` acquired; never raises. `started`: the session
        was live (its SessionStart fired), so its parked state is noted.

        The session leaves the live map first, so nothing new reaches its closing hub: a
        request for the id from now on waits for the transition lock (held by the caller) and
        loads it afresh once the journal's lock is released here."""
        session_id = live.session_id
        if self._live.get(session_id) is live:
            del self._live[session_id]
            if started:
                self.parked.note(session_id, waiting=live.pending() is not None)
            self._parked_turns[session_id] = live.turns
            self._parked_turns.move_to_end(session_id)
            while len(self._parked_turns) > _PARKED_REGISTRIES:
                self._parked_turns.popitem(last=False)
        # What the session holds (log file, provider, its own MCP servers) goes its own way,
        # once: a shutdown let go of it already; a session that never started lets go here.
        await live.session.release()
        if not live.hub.closed:
            live.hub.close()
        self._next_seq[session_id] = live.hub.latest_seq + 1
        # Let subscribers receive everything up to session_closed, but never wait long on
        # one that does not read.
        with trio.move_on_after(_HUB_DRAIN_TIMEOUT):
            await live.hub_done.wait()
        await live.journal.aclose()
        self.store.forget(session_id)

    async def fresh_id(self) -> str:
        """A safe id no session uses (G-037)."""
        while True:
            candidate = new_id()
            taken = candidate in self._live or await trio.to_thread.run_sync(
                self.store.exists, candidate
            )
            if not taken:
                return candidate

    def _refuse_if_closing(self) -> None:
        if self._transitions.closing:
            raise NotAllowed("the daemon is shutting down")

    async def _persist_project_rule(self, cwd: str, rule: str, kind: str) -> None:
        rules = self.assembler.project_rules
        await trio.to_thread.run_sync(rules.add, cwd, rule, kind)

    # -- idle unload -----------------------------------------------------------------------

    def _unloadable(self, live: LiveSession) -> bool:
        if live.closing or live.busy or live.turns.in_flight():
            return False
        if live.pending() is not None:
            return False
        for key in list(live.hub.subscribers):
            if getattr(key, "closed", False):
                live.hub.unsubscribe(key)
        if live.hub.subscribers:
            return False
        return trio.current_time() - live.last_used >= self.idle_unload_seconds

    async def _unload_if_idle(self, session_id: str) -> None:
        try:
            async with self._locks.hold(session_id):
                live = self._live.get(session_id)
                if live is not None and self._unloadable(live):
                    log.info("unloading an idle session", extra=fields(session_id=session_id))
                    live.unloading = True
                    try:
                        await self._saved_first(live)  # a refused save keeps it loaded
                    except BaseException:
                        live.unloading = False
                        raise
                    await self._retire(live)
        except Exception:
            log.exception("idle unload failed", extra=fields(session_id=session_id))


async def _run_hub(hub: EventHub, done: trio.Event, *, task_status: trio.TaskStatus[None]) -> None:
    """Run `hub` until it has delivered its last event to every subscriber; then `done`."""
    try:
        await hub.run(task_status=task_status)
    finally:
        done.set()


def _remove(path: Path) -> None:
    """Remove what `path` names, if anything: a folder with what it holds (an empty one by a
    bare ``rmdir``, which needs no descriptor), a file or a link as such."""
    if os.path.isdir(path) and not os.path.islink(path):
        try:
            os.rmdir(path)
        except OSError:
            shutil.rmtree(path)
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def _valid(session_id: str, outcome: LoadOutcome) -> SessionRecord:
    if isinstance(outcome, Valid):
        return outcome.record
    if isinstance(outcome, Missing):
        raise SessionNotFound(session_id)
    if isinstance(outcome, Corrupt):
        raise RecordCorrupt(session_id, outcome.issues, path=record_file(session_id))
    if isinstance(outcome, Unsupported):
        raise RecordUnsupported(session_id, outcome.schema_version, path=record_file(session_id))
    raise AssertionError(f"unknown load outcome {outcome!r}")


def _with_snapshot(record: SessionRecord, live: LiveSession) -> SessionRecord:
    """`record` with the session-owned members of the built session's snapshot."""
    fresh = live.session.snapshot().to_record(
        created_at=record.created_at, updated_at=record.updated_at
    )
    return msgspec.structs.replace(
        record,
        messages=fresh.messages,
        system_prompt=fresh.system_prompt,
        tool_schemas=fresh.tool_schemas,
        settings=msgspec.structs.replace(fresh.settings, mcp_servers=record.settings.mcp_servers),
    )
