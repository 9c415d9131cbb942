"""What each session method does, over the manager's live sessions (PROTOCOL §5).

`SessionOperations` is the application logic behind the router (`robotad.daemon.methods`):

- Turns (``session/run``): the ``turnId`` is an idempotency key — a known id attaches to its
  turn or returns its outcome, never starting another (G-071). A new turn is refused before it
  starts when the session is busy (`SessionBusy`, the holder's turn id) or an execution waits
  (`ExecutionPending`, G-079), so a refusal leaves no outcome behind for its id. The turn runs
  in the manager's nursery: cancelling the request (-32800) or closing the connection stops
  only the waiting (G-072). ``wait: false`` answers ``{turnId, status: "running"}`` and the
  outcome arrives as ``turn_finished``. Each accepted prompt is appended to the prompt history
  (G-164); resumes, compactions and injected messages never are (G-165).
- Every turn runs as a recoverable execution (`Session.run_recoverable` over the session's
  journal): a call that needs a person parks it and the turn ends ``waiting`` with the exact
  requests; ``session/resume`` continues it and ``session/abandon`` gives it up (the daemon,
  as the journal's host, then discards its records). Nothing waits on a connection.
- Events: ``session/subscribe`` hands the connection to the session's `EventHub` (buffered
  events after ``afterSeq`` first, or `EventsLost`); callers of run, resume and compact are
  subscribed too, unless they already are. Each new subscription first drops the
  connections that have ended, so their number stays bounded by the open ones.
- Resume and compact also run in the manager's nursery and hold the manager's claim on the
  session while they run.
- Fork, export, import, log and prompt search: see each method.

Its size is the protocol's breadth: one short method per session operation.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import msgspec
import trio
from msgspec import UNSET

from protocol.errors import InvalidParams, NotAllowed
from protocol.events import EVENT_METHOD
from protocol.methods import (
    AddRuleParams,
    CompactParams,
    CompactResult,
    CreateParams,
    ForkParams,
    HistoryEntry,
    HistoryParams,
    HistoryResult,
    ImportParams,
    LogProblem,
    LogResult,
    PermissionRules,
    ResumeParams,
    RunParams,
    SearchParams,
    SearchResult,
)
from protocol.shapes import (
    ContextState,
    Pending,
    SessionInfo,
    TurnCompleted,
    TurnRunning,
    TurnWaiting,
    new_id,
)
from robotad.agent.provider import NamedTool, ToolChoice
from robotad.daemon.fork import fork_history
from robotad.daemon.import_rules import require_importable
from robotad.daemon.inert_rules import as_given, kept_rules, log_left_out
from robotad.daemon.info import session_info
from robotad.daemon.live import (
    LiveSession,
    Subscriber,
    Work,
    WorkKind,
    WorkOutcome,
    iso_now,
)
from robotad.daemon.manager import SessionManager
from robotad.daemon.turns import Turn
from robotad.log import fields
from robotad.storage.artifact import export_artifact, import_artifact, redact_sensitive
from robotad.storage.failure import unreadable
from robotad.storage.ids import validate_session_id
from robotad.storage.log_files import FileLogSource
from robotad.storage.log_replay import validate_log
from robotad.storage.record import ForkedFrom, Permissions, SessionRecord
from robotad.storage.store import SESSION_OWNED

__all__ = ["SessionOperations"]

#: What a piece of manager-held work returns.
W = TypeVar("W", TurnCompleted | TurnWaiting, CompactResult)

log = logging.getLogger("robotad.daemon")

#: Held back while a turn's (or resume's) work holds the session, published once it is free:
#: a client may start the next run the moment it reads one (PROTOCOL §6).
AFTER_WORK = frozenset({"turn_finished"})

RunOutcome = TurnCompleted | TurnWaiting | TurnRunning


class SessionOperations:
    """The session methods of PROTOCOL §5 over `manager`."""

    def __init__(self, manager: SessionManager) -> None:
        self.manager = manager
        # In-flight resumes by (session, execution, answers): an identical delivery that
        # arrives while one runs attaches to it instead of being refused as busy (G-084).
        self._resuming: dict[tuple[str, str, bytes], Turn[WorkOutcome]] = {}

    # -- sessions ----------------------------------------------------------------------------

    async def create(self, params: CreateParams) -> SessionInfo:
        return await self.manager.create(params)

    async def info(self, session_id: str) -> SessionInfo:
        return session_info(await self.manager.session(session_id, closing_ok=True))

    async def fork(self, params: ForkParams) -> SessionInfo:
        """A new session holding the source's history up to and including `atMessageId`
        (see `robotad.daemon.fork` for an open round), with the source's cwd, provider, model,
        mode, rules and remaining script, and ``forkedFrom`` naming the source message. The
        source is only read, and cannot be deleted until the fork is made. `SessionBusy` while
        the source runs anything; `SessionNotFound` with ``data.messageId`` for an unknown
        message."""
        source_id = params.session_id
        live = await self.manager.session(source_id)
        if live.busy:
            raise live.busy_error()
        with self.manager.forking(source_id):  # the source is not deleted under it
            return await self._fork(live, params)

    async def _fork(self, live: LiveSession, params: ForkParams) -> SessionInfo:
        source_id = live.session_id
        at = params.at_message_id if params.at_message_id is not UNSET else None
        session = live.session
        pending = session.get_pending_execution()
        uncertain = (pending.uncertain or []) if pending is not None else []
        forked = fork_history(source_id, session.get_history(), at, session.turn_count, uncertain)
        snapshot = live.session.snapshot()
        if params.new_session_id is not UNSET:
            new_session_id = validate_session_id(params.new_session_id, path="$.newSessionId")
        else:
            new_session_id = await self.manager.fresh_id()
        now = iso_now()
        record = msgspec.structs.replace(
            snapshot.to_record(created_at=now, updated_at=now),
            id=new_session_id,
            messages=forked.messages,
            turn_count=forked.turn_count,
            forked_from=ForkedFrom(session_id=source_id, message_id=forked.message_id),
        )
        created = await self.manager.add(record)
        if (spill := self.manager.assembler.spill) is not None:  # the results its history names
            spill.share(forked.references, source_id, new_session_id)
        log.info(
            "session forked",
            extra=fields(session_id=new_session_id, source=source_id, at=forked.message_id),
        )
        return session_info(created)

    # -- turns -------------------------------------------------------------------------------

    async def run(self, params: RunParams, caller: Subscriber | None) -> RunOutcome:
        """``session/run``; see the module docstring."""
        live = await self.manager.session(params.session_id)
        if caller is not None:
            self._attach(live, caller)
        turn_id = params.turn_id if params.turn_id is not UNSET else new_id("turn-")
        turn = live.turns.get(turn_id)
        if turn is None:
            admitted = self.manager.admit(live, "turn", turn_id)
            turn = live.turns.start(turn_id, lambda: self._turn(live, params, admitted))
        if not params.wait:
            return (
                _turn_result(turn_id, turn.outcome()) if turn.done else TurnRunning(turn_id=turn_id)
            )
        return _turn_result(turn_id, await turn.wait())

    async def _turn(
        self, live: LiveSession, params: RunParams, admitted: Work
    ) -> TurnCompleted | TurnWaiting:
        session = live.session
        turn_id = admitted.id
        choice = _tool_choice(params.tool_choice)
        context = params.system_context if params.system_context is not UNSET else None
        live.hub.hold(AFTER_WORK)
        try:
            # No checkpoint between here and the Session's synchronous claim, so an abort that
            # arrives once the run was accepted finds the turn running. The prompt-history
            # append is one small O_APPEND write: done inline, it is in the file before the
            # turn's result can reach anyone.
            self._remember_prompt(live, params.prompt)
            return await session.run_recoverable(
                params.prompt,
                live.journal,
                turn_id=turn_id,
                tool_choice=choice,
                system_context=context,
                max_rounds=params.max_rounds if params.max_rounds is not UNSET else None,
                abort=admitted.abort,
            )
        finally:
            live.end(turn_id)
            live.hub.release()

    def _remember_prompt(self, live: LiveSession, prompt: str) -> None:
        """Append to the prompt history (G-164); never authoritative, so a failure is only
        logged (G-168)."""
        try:
            self.manager.prompts.append(prompt, live.session_id, str(live.session.cwd))
        except OSError as exc:
            log.warning(
                "cannot append to the prompt history: %s",
                exc.strerror or type(exc).__name__,
                extra=fields(session_id=live.session_id),
            )

    async def resume(self, params: ResumeParams, caller: Subscriber | None) -> RunOutcome:
        """``session/resume``: continue a parked execution with the answers given. On a
        session busy with other work, a redelivery to a finished execution still gets its
        result (G-084) and a stale resume StaleResponse (G-086); only a resume of the waiting
        execution is SessionBusy (it would have to run)."""
        live = await self.manager.session(params.session_id)
        if caller is not None:
            self._attach(live, caller)
        responses = list(params.responses)
        answers = msgspec.json.encode(
            sorted((r.request_id, r.response_id, r.approved) for r in responses)
        )
        key = (live.session_id, params.execution_id, answers)
        running = self._resuming.get(key)
        if running is not None:
            return _turn_result(params.execution_id, await running.wait())
        if live.busy:  # busy with other work: an execution that is not waiting answers alike
            settled = await live.session.resume_answer_without_running(
                params.execution_id, live.journal, responses
            )
            if settled is not None:
                return settled

        async def work(admitted: Work) -> TurnCompleted | TurnWaiting:
            try:
                return await live.session.resume_recoverable(
                    params.execution_id, live.journal, responses, abort=admitted.abort
                )
            finally:
                self._resuming.pop(key, None)

        outcome: RunOutcome = await self._spawn(live, "resume", work, track=key)
        return outcome

    async def abort(self, session_id: str) -> bool:
        """``session/abort``: True when a running turn or compaction was signalled and so
        ends aborted (G-193), also one that was accepted and has not begun yet (it begins
        aborted); False when its outcome was already decided (architecture decision 42)."""
        live = await self.manager.require_exists(session_id)
        if live is None:
            return False
        return live.session.abort() or live.abort_admitted()

    async def pending(self, session_id: str) -> Pending | None:
        return (await self.manager.session(session_id, closing_ok=True)).pending()

    async def abandon(self, session_id: str, execution_id: str) -> None:
        """``session/abandon``: nothing runs; the execution's open calls close as failed and,
        once that is saved, its journal is discarded (the daemon hosts the journal)."""
        live = await self.manager.session(session_id)
        with trio.CancelScope(shield=True):
            await live.session.abandon_pending_execution(execution_id)
            try:
                await live.journal.discard(execution_id)
            except Exception:
                log.warning(
                    "cannot discard an abandoned execution's journal",
                    exc_info=True,
                    extra=fields(session_id=session_id, execution_id=execution_id),
                )

    async def compact(self, params: CompactParams, caller: Subscriber | None) -> CompactResult:
        """``session/compact``: summarise now; ``compacted: false`` when there was nothing."""
        live = await self.manager.session(params.session_id)
        if caller is not None:
            self._attach(live, caller)
        instructions = params.instructions if params.instructions is not UNSET else None

        async def work(admitted: Work) -> CompactResult:
            outcome = await live.session.compact(instructions, abort=admitted.abort)
            return CompactResult(
                compacted=outcome.compacted, before=outcome.before, after=outcome.after
            )

        result: CompactResult = await self._spawn(live, "compaction", work)
        return result

    async def _spawn(
        self,
        live: LiveSession,
        kind: WorkKind,
        work: Callable[[Work], Awaitable[W]],
        *,
        track: tuple[str, str, bytes] | None = None,
    ) -> W:
        """Admit `work` (`SessionManager.admit`), run it as the session's manager-held work in
        the manager's nursery (it outlives its requester) and wait for its outcome; with
        `track`, identical requests arriving meanwhile find it in `_resuming`."""
        work_id = new_id(f"{kind}-")
        admitted = self.manager.admit(live, kind, work_id)

        async def body() -> WorkOutcome:
            live.hub.hold(AFTER_WORK)
            try:
                return await work(admitted)
            finally:
                live.end(work_id)
                live.hub.release()

        turn = live.turns.start(work_id, body)
        if track is not None and not turn.done:
            self._resuming[track] = turn
        outcome: W = await turn.wait()  # type: ignore[assignment]
        return outcome

    # -- events ----------------------------------------------------------------------------

    async def subscribe(
        self, session_id: str, subscriber: Subscriber, after_seq: int | None
    ) -> int:
        """Deliver the session's events to `subscriber` (buffered ones after `after_seq`
        first); the latest seq so far. `EventsLost` when they are no longer buffered. A
        session being closed is subscribed to as it is (its stream ends with session_closed)
        rather than waited for: this runs inline in the connection's reader. One being
        unloaded for idleness is waited for and loaded again (nobody closed it)."""
        live = await self.manager.session(session_id, closing_ok=True)
        return self._attach(live, subscriber, after_seq=after_seq, replace=True)

    def _attach(
        self,
        live: LiveSession,
        subscriber: Subscriber,
        *,
        after_seq: int | None = None,
        replace: bool = False,
    ) -> int:
        """Subscribe `subscriber` to `live`'s events unless it already is (or `replace`).
        Connections that ended since are unsubscribed first: only an event's failed send
        drops one, and a session with nothing to publish (one waiting for approval) kept
        every one that subscribed and left (~8 KB each)."""
        hub = live.hub
        subscribers = hub.subscribers
        if not replace and subscriber in subscribers:
            return hub.latest_seq
        for key in subscribers:
            if getattr(key, "closed", False):
                hub.unsubscribe(key)

        async def send(event: dict[str, Any]) -> None:
            # The hub's delivery loop passes the checkpoint itself (`EventHub._deliver`).
            await subscriber.notify(EVENT_METHOD, event, checkpoint=False)

        return hub.subscribe(subscriber, send, after_seq=after_seq)

    async def unsubscribe(self, session_id: str, subscriber: Subscriber) -> None:
        live = await self.manager.require_exists(session_id)
        if live is not None:
            live.hub.unsubscribe(subscriber)

    # -- reading -----------------------------------------------------------------------------

    async def history(self, params: HistoryParams) -> HistoryResult:
        live = await self.manager.session(params.session_id, closing_ok=True)
        messages = live.session.get_history()
        end = None if params.limit is UNSET else params.offset + params.limit
        return HistoryResult(total=len(messages), messages=messages[params.offset : end])

    async def context(self, session_id: str) -> ContextState:
        live = await self.manager.session(session_id, closing_ok=True)
        return live.session.get_context_state()

    # -- permissions -------------------------------------------------------------------------

    async def set_permission_mode(self, session_id: str, mode: str) -> str:
        """Enter `mode`, done once saved: a refused save puts the mode back and is raised
        (StorageFailed), so a change a client was told of survives a restart. Changes of one
        session's settings take turns (`LiveSession.settings_lock`)."""
        live = await self.manager.session(session_id)
        async with live.settings_lock:
            before = live.session.permission_mode, live.session.rules()
            entered = live.session.set_permission_mode(mode)
            await self._save(live, undo=before)
        return entered

    async def add_rule(self, params: AddRuleParams) -> PermissionRules:
        """Session scope: this session only, done once saved (a refused save takes the rule
        back and is raised). Project scope: persisted for the canonical cwd first — or
        `NotAllowed` and nothing added (G-114) — then applied here (G-115); the project's file
        holds it, so the session's own save is best effort."""
        live = await self.manager.session(params.session_id)
        async with live.settings_lock:  # as for a mode change
            if params.scope == "project":
                rules = await live.session.add_project_rule(params.rule, params.kind)
                await self._save(live)
            else:
                before = live.session.permission_mode, live.session.rules()
                rules = live.session.add_rule(params.rule, params.kind)
                await self._save(live, undo=before)
        return PermissionRules(allow=rules["allow"], ask=rules["ask"], deny=rules["deny"])

    async def _save(
        self, live: LiveSession, *, undo: tuple[str, dict[str, list[str]]] | None = None
    ) -> None:
        """Persist a settings change now. With `undo` (the mode and rules before it) a
        refused save puts them back and is raised; without, it is logged (the next save
        carries the change)."""
        try:
            await live.writer.save(live.session.snapshot())
        except Exception:
            if undo is not None:
                live.session.take_back_permissions(*undo)
                raise
            log.warning(
                "saving a settings change failed",
                exc_info=True,
                extra=fields(session_id=live.session_id),
            )

    # -- export, import, log, search ---------------------------------------------------------

    async def export(self, session_id: str, redact: bool) -> dict[str, Any]:
        """The artifact of the session: the stored record with, for a loaded session, the
        session-owned members as they are now. Writes nothing."""
        record = await self.manager.stored_record(session_id)
        live = self.manager.loaded(session_id)
        if live is not None:
            fresh = live.writer.record_of(
                live.session.snapshot(), updated_at=live.writer.updated_at
            )
            owned = {name: getattr(fresh, name) for name in SESSION_OWNED}
            record = msgspec.structs.replace(record, **owned)
        return export_artifact(record, redact_sensitive if redact else None)

    async def import_session(self, params: ImportParams) -> SessionInfo:
        """A new session from an artifact, decoded by the store's own total decoder and held
        to `robotad.daemon.import_rules` (every defect located under ``$.artifact``), under
        `sessionId` or the artifact's own id; `SessionExists` when taken. The record is
        stored as imported, less the MCP rules an earlier robotad took and robotad now
        refuses (an export of a session not loaded since holds them as its record does):
        those are left out as a stored session's are on load (`robotad.daemon.inert_rules`),
        and robotad's log names them once the session is imported. A refusal writes nothing
        (G-032)."""
        record = import_artifact(params.artifact)
        if params.session_id is not UNSET:
            record = msgspec.structs.replace(record, id=validate_session_id(params.session_id))
        require_importable(record, "$.artifact.record")
        rules, left_out = kept_rules(msgspec.to_builtins(record.settings.permissions))
        if left_out:
            settings = msgspec.structs.replace(record.settings, permissions=Permissions(**rules))
            record = msgspec.structs.replace(record, settings=settings)

        def as_imported(imported: SessionRecord, live: LiveSession) -> SessionRecord:
            return imported

        try:
            live = await self.manager.add(record, new_at="$.artifact.record", written=as_imported)
        except InvalidParams as exc:
            if not left_out:
                raise
            where = "$.artifact.record.settings.permissions"
            raise InvalidParams(as_given(exc.issues, where, left_out)) from None
        log_left_out(f"the import of session {record.id}", left_out)
        return session_info(live)

    async def log(self, session_id: str) -> LogResult:
        """``session/log``: the session log's decoded lines and every problem found, a log
        that does not rebuild the session's history among them (unless a turn runs)."""
        live = self.manager.loaded(session_id)
        if live is not None:
            await live.session.log_written()  # every line logged before the call is read
            live = self.manager.loaded(session_id)
        ids: list[str] | None
        if live is None:
            ids = [m.id for m in (await self.manager.stored_record(session_id)).messages]
        elif live.busy:
            ids = None  # history moves while the log is read: no comparison to make
        else:
            ids = [m.id for m in live.session.get_history()]
        source = FileLogSource.for_session(self.manager.logs_dir, session_id)
        report = await trio.to_thread.run_sync(validate_log, source, ids)
        problems = [
            LogProblem(
                message=problem.get("message", ""),
                line=problem.get("line", UNSET),
                event=problem.get("event", UNSET),
            )
            for problem in report.problems
        ]
        return LogResult(entries=report.entries, complete=report.complete, problems=problems)

    async def search(self, params: SearchParams) -> SearchResult:
        """``history/search`` over the prompt history only (never a record, G-167)."""
        query = params.query if params.query is not UNSET else None
        cwd = params.cwd if params.cwd is not UNSET else None
        try:
            found = await trio.to_thread.run_sync(
                self.manager.prompts.search, query, cwd, params.limit
            )
        except OSError as exc:
            raise unreadable(exc, self.manager.prompts.path, self.manager.state_dir) from None
        entries = [
            HistoryEntry(prompt=e.prompt, session_id=e.session_id, cwd=e.cwd, timestamp=e.timestamp)
            for e in found.entries
        ]
        return SearchResult(entries=entries, unreadable_lines=found.unreadable_lines)


def _tool_choice(choice: Any) -> ToolChoice | None:
    """The wire tool choice as the provider port's."""
    if choice is UNSET:
        return None
    if isinstance(choice, str):
        return choice  # type: ignore[return-value]
    return NamedTool(name=choice.name)


def _turn_result(work_id: str, outcome: WorkOutcome) -> TurnCompleted | TurnWaiting:
    """A turn's or resume's outcome; a ``turnId`` naming a compaction is not a turn."""
    if isinstance(outcome, CompactResult):
        raise NotAllowed(f"{work_id!r} names a compaction, not a turn")
    return outcome
