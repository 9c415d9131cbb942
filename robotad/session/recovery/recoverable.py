"""Recoverable execution: turns that park on approvals, journaled so they survive restarts.

`RecoverableExecutions` runs a session's journaled turns (the Session takes the claim first):

- `run`: journal ``started``, then the turn through the session's `TurnRunner` with the
  execution's `JournalBarrier` on the conversation and a `ParkingApprover` in the gate. A call
  that needs a person parks: its request is durable, the record holding the open round is saved,
  and only then is ``waiting`` returned (G-073…G-077). A call that runs at once waits for the
  same save first, so a crash while it runs never loses the turn it belongs to.
- `resume`: validated completely before anything changes (G-087) — the execution is known and
  journaled for this session id, cwd, provider and model (G-088, G-089), every response names a
  request of it, a response id reused with other content is stale (G-085), an identical
  redelivery is idempotent and returns the latest result (G-084), an uncertain effect is
  `EffectUncertain` (-32015) and never re-run (G-094). Then the answers are journaled and the open
  round continues without a user message and without turn-level hooks (G-080, G-133), under the
  round limit the turn started with (its ``started`` record holds it, so `session/run`'s own
  survives a restart); approved calls are re-checked by the current rules and hooks, denied
  ones stay denied (G-081…G-083).
  A redelivery continues the round too when nothing of it waits for a person any more (robotad
  stopped after the answer was on record and before its call started): it is the same answer,
  and it goes on as ``responses: []`` does; the call runs once. An execution read back from
  its journal that neither waits nor runs ended, with its end mark or — robotad stopped between
  its last durable writes — without it: a redelivery then gets the result its journal shows
  (`Execution.settle_from`: its last reply when that completed the turn), and StaleResponse
  saying why when it has none (it failed, was aborted, or was cut off on its way to its next
  reply). A resume or abandon naming an execution that neither waits nor runs needs no claim
  (`answer_without_running`, `refuse_unless_held`): a session busy with other work still
  answers it as an idle one does — the latest result of an identical redelivery, or
  StaleResponse — never SessionBusy.
- `abandon`: runs nothing and journals nothing; the open calls close in history as failed and
  the session is saved (G-099…G-101), or, when the save is refused, history is put back and
  the execution still waits. A call whose effect started and never finished closes
  with a result starting ``outcome unknown:`` (PROTOCOL.md §10.2), never "not run".
- `recover`: after a load, rebuild the pending execution from the journal and the history —
  results and replies the journal recorded but history lacks are put back, never re-run. When
  what was put back closes every round, the execution ended with the stop; if that completed
  its turn (its last reply is back), the turn is counted and saved as completed, as the save
  the stop cut off would have. The session log, read back once (`log_readback`), gets what
  it lacks of the put-back — each message's ``history_mutation`` (and a result's
  ``tool_result``), the turn's ``turn_completed`` line — and nothing it has already (the stop
  came after the turn logged it, or a recovery whose save failed wrote it): written before
  the save, as a turn's own lines are, each is in the log once however often recovery runs,
  so the log replays to the history recovery made (G-145).

Settled executions are remembered in memory (`SETTLED_KEPT` of them) only to spare a journal
read; a redelivered answer to an older one is judged from its journal, which holds everything.

The journal is the host's (G-099): a settled execution is marked ``finished`` and its records
kept, unless the host lets the session retire journals (``discard_settled``; robotad does), in
which case `journal_retention` decides what is kept. Finishing is shielded: once a turn's
outcome is saved, a cancellation cannot turn it into a failure or skip its journal work.

While an execution waits, or after it failed or was aborted with its round open in history, it
is pending and blocks new input (G-079, G-091, G-092); once its rounds settled, a failure ends it
like an ordinary turn (G-093).

Its size is one concept: run, park, resume, recover and abandon of journaled executions, which
share their invariants.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal

import trio

from protocol.errors import (
    CompactionAborted,
    EffectUncertain,
    InternalError,
    Issue,
    RecordCorrupt,
    RpcError,
    StaleResponse,
    TurnAborted,
)
from protocol.methods import ApprovalResponse
from protocol.shapes import Message, Pending, ToolCall, TurnCompleted, TurnWaiting, new_id
from robotad.agent.loop import CompletedTurn, ParkedTurn, open_calls
from robotad.agent.provider import ToolChoice
from robotad.session.conversation import Conversation
from robotad.session.ports import SessionCallbacks
from robotad.session.recovery.execution_state import (
    Execution,
    JournalBarrier,
    ParkingApprover,
    StaleAnswer,
    journaled_after,
)
from robotad.session.recovery.retention import JournalRetention
from robotad.session.reporting import SessionReporter
from robotad.session.turn.runner import TurnRunner
from robotad.session.turn.tool_admission import GatePolicy
from robotad.session.turn.work import TurnContext
from robotad.storage import log_events
from robotad.storage.failure import storage_failed
from robotad.storage.journal import (
    ExecutionJournal,
    FinishedRecord,
    JournalCorrupt,
    JournalError,
    JournalRecord,
    ResponseRecord,
    StartedRecord,
)
from robotad.storage.log_readback import AlreadyLogged, logged_already
from robotad.storage.refusal import InputRejected
from robotad.storage.session_log import LogSource

__all__ = ["RecoverableExecutions", "uncertain_result_text"]

logger = logging.getLogger("robotad.session.recovery.recoverable")

#: Settled executions remembered in memory (older ones are read back from their journal).
SETTLED_KEPT = 16

Body = Callable[[GatePolicy], Awaitable[CompletedTurn | ParkedTurn]]


#: Tools whose body is a child process robotad started: its process group dies with robotad.
_CHILD_PROCESS_TOOLS = frozenset({"Bash"})


def uncertain_result_text(tool: str) -> str:
    """The failed result closing a call whose outcome a stop of robotad made unknown
    (PROTOCOL.md §10.2): it says what is known and never claims the call did not run."""
    if tool in _CHILD_PROCESS_TOOLS:
        happened = (
            "its command ran in its own process group tied to robotad and was killed when "
            "robotad stopped, so it may have run in part, in full, or not at all"
        )
    else:
        happened = "it ran inside robotad, so it may or may not have taken effect"
    return (
        f"outcome unknown: {tool} was running when robotad stopped; {happened}. "
        "Check its effect before running it again."
    )


class RecoverableExecutions:
    """The journaled executions of one session; see the module doc."""

    def __init__(
        self,
        session_id: str,
        cwd: str,
        conversation: Conversation,
        reporter: SessionReporter,
        runner: TurnRunner,
        session: SessionCallbacks,
        *,
        discard_settled: bool = False,
        round_cap: int | None = None,
    ) -> None:
        self._session_id = session_id
        #: The session's round limit: what an execution whose journal does not record its
        #: own limit is settled with (`Execution.round_limit`).
        self._round_cap = round_cap
        self._retention = JournalRetention(enabled=discard_settled)
        self._cwd = cwd
        self._conversation = conversation
        self._reporter = reporter
        self._runner = runner
        self._provider = session.provider
        self._persist = session.persist
        self._completed = session.completed
        #: The execution that blocks new input, if any.
        self.pending: Execution | None = None
        #: The execution a turn or resume is driving now, if any.
        self._running: Execution | None = None
        self._settled: collections.OrderedDict[str, Execution] = collections.OrderedDict()

    def pending_view(self) -> Pending | None:
        execution = self.pending
        if execution is None:
            return None
        history = self._conversation.messages
        uncertain = [call.id for call in execution.uncertain(history)]
        if not uncertain:
            return Pending(execution.execution_id, execution.approval_requests(history))
        return Pending(
            execution.execution_id, execution.approval_requests(history), uncertain=uncertain
        )

    def turn_id_of(self, execution_id: str) -> str | None:
        execution = self._known(execution_id)
        return execution.turn_id if execution is not None else None

    # -- run ----------------------------------------------------------------------------------

    async def run(
        self,
        turn: TurnContext,
        prompt: str,
        journal: ExecutionJournal,
        *,
        tool_choice: ToolChoice,
        system_context: str | None,
        threshold: float | bool,
    ) -> TurnCompleted | TurnWaiting:
        assert turn.turn_id is not None
        provider = self._provider()
        user = Message.user(prompt)
        execution = Execution(new_id("x-"), turn.turn_id, journal)
        execution.started = StartedRecord(
            id=execution.record_id("started", "0"),
            execution_id=execution.execution_id,
            turn_id=turn.turn_id,
            session_id=self._session_id,
            cwd=self._cwd,
            provider=provider.name,
            model=provider.model,
            user_message_id=user.id,
            max_rounds=turn.round_cap,
        )
        # Staged, not synced on its own: the first record that matters after a crash (a
        # reply, request, effect or compaction) is appended durably to the same file, which
        # makes this line durable too; until then a lost ``started`` loses nothing.
        await self._append(execution, execution.started, durable=False)

        def body(policy: GatePolicy) -> Awaitable[CompletedTurn | ParkedTurn]:
            return self._runner.execute(
                turn,
                prompt,
                policy=policy,
                tool_choice=tool_choice,
                system_context=system_context,
                threshold=threshold,
                user=user,
            )

        return await self._drive(execution, turn, body)

    # -- resume -------------------------------------------------------------------------------

    async def resume(
        self,
        turn: TurnContext,
        execution_id: str,
        journal: ExecutionJournal,
        responses: Sequence[ApprovalResponse],
    ) -> TurnCompleted | TurnWaiting:
        execution, fresh = await self._look_up(execution_id, journal, responses)
        if execution.state != "pending":
            return self._settled_answer(execution, fresh, responses)
        history = self._conversation.messages
        # An effect that started and never finished is checked first: a redelivered answer
        # must meet EffectUncertain too, not a wait with nothing left to answer.
        uncertain = execution.uncertain(history)
        if uncertain:
            raise EffectUncertain(self._session_id, execution_id, [c.id for c in uncertain])
        if not fresh and responses and execution.waits(history):
            return execution.result or self._waiting(execution)
        execution.journal = journal  # the host's journal as it is now (it may have been reopened)
        for answer in fresh:
            record = ResponseRecord(
                id=execution.record_id("response", answer.request_id),
                execution_id=execution_id,
                request_id=answer.request_id,
                response_id=answer.response_id,
                approved=answer.approved,
            )
            await self._append(execution, record)
            execution.responses[answer.request_id] = record
            self._reporter.approval_resolved(
                execution.turn_id, execution_id, answer.request_id, answer.approved
            )
        if execution.waits(history):
            execution.result = self._waiting(execution)
            return execution.result
        turn.prompted = False
        turn.round_cap = execution.round_limit(turn.round_cap)
        return await self._drive(
            execution, turn, lambda policy: self._runner.continue_turn(turn, policy=policy)
        )

    async def answer_without_running(
        self,
        execution_id: str,
        journal: ExecutionJournal,
        responses: Sequence[ApprovalResponse],
    ) -> TurnCompleted | TurnWaiting | None:
        """What `resume` answers for an execution that neither waits nor runs — its latest
        result for an identical redelivery (G-084), else `StaleResponse` (G-086) — judged
        without the claim, so a session busy with other work still answers it; None for the
        execution that waits or runs (its resume needs the claim)."""
        if any(
            held is not None and held.execution_id == execution_id
            for held in (self.pending, self._running)
        ):
            return None
        execution, fresh = await self._look_up(execution_id, journal, responses)
        if execution.state == "pending":  # it began to wait meanwhile
            return None
        return self._settled_answer(execution, fresh, responses)

    def refuse_unless_held(self, execution_id: str) -> None:
        """`StaleResponse` unless `execution_id` waits or runs in this session: an abandon
        of anything else is stale whatever holds the session (G-086)."""
        if not any(
            held is not None and held.execution_id == execution_id
            for held in (self.pending, self._running)
        ):
            raise self._stale(execution_id, reason="no such execution waits in this session")

    async def _look_up(
        self,
        execution_id: str,
        journal: ExecutionJournal,
        responses: Sequence[ApprovalResponse],
    ) -> tuple[Execution, list[ApprovalResponse]]:
        """The execution a resume names, known or read back from its journal, with the
        answers not recorded yet; `StaleResponse` for an abandoned, unknown or foreign one
        and for answers that cannot apply (G-085, G-086, G-089). Changes nothing."""
        known = self._known(execution_id)
        if known is not None and known.state == "abandoned":
            raise self._stale(execution_id, reason="the execution was abandoned")
        records = await self._read(execution_id, journal)
        execution = known or Execution.from_records(execution_id, journal, records)
        if execution is None:
            raise self._stale(execution_id, reason="no such execution waits in this session")
        started = next((r for r in records if isinstance(r, StartedRecord)), None)
        if started is None or not self._ours(started):
            raise self._stale(execution_id, reason="the execution belongs to another session")
        if known is None:
            # Read back from its journal, and neither waiting nor running here: it ended, in
            # an earlier process or beyond what memory keeps — with its end mark, or, when a
            # stop of robotad came before the mark was durable, with what its journal holds.
            execution.settle_from(records, self._round_cap)
        try:
            fresh = execution.fresh_answers(responses)
        except StaleAnswer as exc:
            raise self._stale(execution_id, exc.request_id, exc.reason) from None
        return execution, fresh

    def _settled_answer(
        self,
        execution: Execution,
        fresh: list[ApprovalResponse],
        responses: Sequence[ApprovalResponse],
    ) -> TurnCompleted | TurnWaiting:
        """A resume of an execution that does not wait: a finished one's latest result for
        an identical redelivery (G-084), else `StaleResponse`."""
        result = execution.result
        if execution.state == "finished" and not fresh and responses and result is not None:
            return result
        raise self._stale(execution.execution_id, reason=_why_it_does_not_wait(execution))

    # -- abandon, recover ---------------------------------------------------------------------

    async def abandon(self, execution_id: str) -> None:
        execution = self.pending
        if execution is None or execution.execution_id != execution_id:
            raise self._stale(execution_id, reason="no such execution waits in this session")
        closed = []
        kept = list(self._conversation.messages)
        uncertain = {call.id for call in execution.uncertain(kept)}
        for call in open_calls(kept):
            if call.id in uncertain:
                text = uncertain_result_text(call.name)
            else:
                text = f"not run: the execution waiting for {call.name} was abandoned"
            message = Message.tool(call.id, call.name, text, ok=False, extra={"abandoned": True})
            self._conversation.append(message)
            closed.append(call.id)
        try:
            await self._persist()
        except BaseException:
            # Not abandoned unless saved: a client told it failed finds it still waiting,
            # and a restart finds what the log says (it used to log it abandoned).
            self._conversation.replace(kept)
            raise
        self._reporter.log(
            "execution_abandoned",
            log_events.ExecutionAbandonedEntry(execution_id=execution_id, call_ids=closed),
        )
        execution.state = "abandoned"
        self.pending = None
        self._settle(execution)

    async def recover(self, journal: ExecutionJournal, log: LogSource | None = None) -> None:
        """Rebuild the pending execution, if any, from `journal` and the loaded history.

        Only an execution of this session (id, cwd, provider, model) whose journaled reply
        is the history's open round counts. What it journaled after that reply — results and
        replies the saved record missed — is put back in order, never produced again; if a
        round is still open afterwards, the execution is pending. `log` is the session log as
        it is on disk, read to tell which of the put-back's lines (its messages, the
        ``turn_completed`` of a turn it completes) it has already; without it they are all
        written unchecked."""
        history = self._conversation.messages
        if not open_calls(history) and not self._retention.enabled:
            return
        executions = await journal.executions()
        if open_calls(history):
            anchor = next(m for m in reversed(history) if m.role == "assistant").id
            for execution_id in reversed(executions):  # newest first: it is almost always
                records = await self._read(execution_id, journal)
                execution = Execution.from_records(execution_id, journal, records)
                if (
                    execution is None
                    or execution.started is None
                    or anchor not in execution.replies
                ):
                    continue
                if not self._ours(execution.started):
                    continue
                put_back = journaled_after(records, anchor)
                logged = await self._read_back(log, execution.turn_id, put_back)
                for message in put_back:
                    self._conversation.append(message, logged=message.id in logged.messages)
                if execution.state != "finished":
                    self._recovered(execution, records, completion_logged=logged.completed)
                if put_back:
                    await self._persist()
                break
        pending = self.pending.execution_id if self.pending is not None else None
        await self._retention.prune(journal, executions, pending)

    def _recovered(
        self,
        execution: Execution,
        records: Sequence[JournalRecord],
        *,
        completion_logged: bool,
    ) -> None:
        """After the put-back: an execution whose round is still open is pending; one whose
        rounds all settled was cut off by the stop and ended, and when what was put back
        completed its turn (its last reply, G-084), that turn counts as completed, saved with
        the put-back (the save that completed it never happened), and is logged as one
        unless the log says so already (`completion_logged`)."""
        if open_calls(self._conversation.messages):
            execution.state = "pending"
            execution.result = self._waiting(execution)
            self.pending = execution
            return
        execution.settle_from(records, self._round_cap)
        if execution.result is not None:
            self._completed()
            if not completion_logged:
                entry = log_events.TurnCompletedEntry(turn_id=execution.turn_id, status="completed")
                self._reporter.log("turn_completed", entry)
        self._settle(execution)

    async def _read_back(
        self, log: LogSource | None, turn_id: str, put_back: Sequence[Message]
    ) -> AlreadyLogged:
        """What `log` holds already of the lines a put-back of `put_back` writes: those
        messages' ``history_mutation`` lines and the ``turn_completed`` line of turn
        `turn_id` (one read serves both; none when nothing is put back, as then the round
        stays open and nothing is written). Without `log` nothing is checked and every line
        is written; a log that cannot be read gets none of them (it cannot be told which are
        there, and writing to it would likely fail)."""
        if log is None or not put_back:
            return AlreadyLogged(frozenset(), completed=False)
        ids = [message.id for message in put_back]
        try:
            return await trio.to_thread.run_sync(logged_already, log, turn_id, ids)
        except OSError as exc:
            logger.warning(
                "cannot read the session log of %s to put back turn %s: %s",
                self._session_id,
                turn_id,
                exc,
            )
            return AlreadyLogged(frozenset(ids), completed=True)

    # -- the shared drive ---------------------------------------------------------------------

    async def _drive(
        self, execution: Execution, turn: TurnContext, body: Body
    ) -> TurnCompleted | TurnWaiting:
        """Run `body` with the execution's barrier and approver, then settle the execution."""
        barrier = JournalBarrier(execution)
        saving = trio.Lock()

        async def before_effect(call: ToolCall) -> None:
            # The open round reaches the record before anything it asks for runs, as it does
            # before a park: killed while a command runs, robotad then finds the prompt, the
            # reply and the round in the record, and puts back what the journal holds after
            # it (results; a call that never finished as uncertain), never losing the turn.
            async with saving:
                if not self._conversation.saved:
                    await self._persist()
            await barrier.before_effect(call)

        policy = GatePolicy(
            ParkingApprover(execution),
            denied=execution.denied_calls(),
            before_effect=before_effect,
        )
        execution.state = "running"
        self.pending = None
        self._running = execution
        self._conversation.barrier = barrier
        try:
            outcome = await body(policy)
        except BaseException as exc:
            self._conversation.barrier = None
            aborted = isinstance(exc, TurnAborted | CompactionAborted | trio.Cancelled)
            with trio.CancelScope(shield=True):
                await self._after_failure(execution, "aborted" if aborted else "failed")
            self._running = None
            raise
        self._conversation.barrier = None
        try:
            if isinstance(outcome, ParkedTurn):
                return await self._park(execution, turn)
            execution.result = TurnCompleted(
                turn_id=execution.turn_id,
                response=outcome.response,
                stop_reason=outcome.stop_reason,
            )
            with trio.CancelScope(shield=True):  # saved already: finishing must not be cut short
                await self._finish(execution, "completed")
            return execution.result
        finally:
            self._running = None

    async def _park(self, execution: Execution, turn: TurnContext) -> TurnWaiting:
        execution.state = "pending"
        self.pending = execution
        try:
            await self._persist()  # the open round must be on disk before "waiting" (G-075)
        except Exception as exc:
            logger.error("saving a waiting execution failed", exc_info=True)
            error = storage_failed(exc, self._session_id) or InternalError(
                f"the waiting execution could not be saved ({type(exc).__name__})"
            )
            await self._reporter.turn_finished(
                execution.turn_id, "failed", error=error, hook_failures=turn.hook_failures
            )
            raise error from exc
        waiting = self._waiting(execution)
        execution.result = waiting
        self._reporter.approval_requested(
            execution.turn_id, execution.execution_id, waiting.requests
        )
        self._reporter.log(
            "turn_completed",
            log_events.TurnCompletedEntry(turn_id=execution.turn_id, status="waiting"),
        )
        await self._reporter.turn_finished(
            execution.turn_id, "waiting", hook_failures=turn.hook_failures
        )
        return waiting

    async def _after_failure(
        self, execution: Execution, status: Literal["failed", "aborted"]
    ) -> None:
        """A failure or abort with the round open keeps the execution pending; otherwise the
        execution is over like an ordinary turn."""
        if open_calls(self._conversation.messages):
            execution.state = "pending"
            execution.result = self._waiting(execution)
            self.pending = execution
            return
        await self._finish(execution, status)

    async def _finish(
        self, execution: Execution, status: Literal["completed", "failed", "aborted"]
    ) -> None:
        execution.state = "finished"
        execution.ending = status
        if status != "completed":  # nothing waits any more: no "waiting" to hand back (G-084)
            execution.result = None
        self._settle(execution)
        if self._retention.enabled and not execution.requests and self._conversation.saved:
            # Nobody can redeliver an answer to it and the saved record holds its outcome.
            await self._retention.retire(execution.journal, execution.execution_id)
            return
        # The mark is read only to answer a redelivered resume after a restart (G-084), so it
        # must be durable only for an execution that had requests to answer.
        record = FinishedRecord(
            id=execution.record_id("finished", "0"),
            execution_id=execution.execution_id,
            status=status,
        )
        try:
            await execution.journal.append(record, durable=bool(execution.requests))
        except Exception:  # history holds the outcome; a missing mark only costs a lookup
            logger.warning("journaling the end of execution %s failed", execution.execution_id)
        await self._retention.keep(execution.journal, execution.execution_id)

    # -- helpers ------------------------------------------------------------------------------

    def _waiting(self, execution: Execution) -> TurnWaiting:
        requests = execution.approval_requests(self._conversation.messages)
        return TurnWaiting(
            turn_id=execution.turn_id, execution_id=execution.execution_id, requests=requests
        )

    def _known(self, execution_id: str) -> Execution | None:
        if self.pending is not None and self.pending.execution_id == execution_id:
            return self.pending
        return self._settled.get(execution_id)

    def _settle(self, execution: Execution) -> None:
        self._settled[execution.execution_id] = execution
        while len(self._settled) > SETTLED_KEPT:
            self._settled.popitem(last=False)

    def _ours(self, started: StartedRecord) -> bool:
        provider = self._provider()
        return (started.session_id, started.cwd, started.provider, started.model) == (
            self._session_id,
            self._cwd,
            provider.name,
            provider.model,
        )

    def _stale(
        self, execution_id: str, request_id: str | None = None, reason: str = ""
    ) -> StaleResponse:
        return StaleResponse(self._session_id, execution_id, request_id, reason)

    async def _append(
        self, execution: Execution, record: JournalRecord, *, durable: bool = True
    ) -> None:
        try:
            await execution.journal.append(record, durable=durable)
        except JournalError as exc:
            raise _persistence(exc, self._session_id) from exc

    async def _read(self, execution_id: str, journal: ExecutionJournal) -> list[JournalRecord]:
        try:
            return await journal.read(execution_id)
        except InputRejected:
            return []  # not an id any execution could have
        except JournalError as exc:
            raise _persistence(exc, self._session_id) from exc


def _why_it_does_not_wait(execution: Execution) -> str:
    """StaleResponse's reason for a resume of an execution that waits no more."""
    if execution.ending == "stopped":
        return (
            "robotad stopped before the execution's next reply, so it ended there with its "
            "calls' results in the session's history; nothing of it waits (send a new prompt "
            "to go on)"
        )
    if execution.ending in ("failed", "aborted"):
        return f"the execution ended {execution.ending} and does not wait any more"
    return "the execution does not wait any more"


def _persistence(exc: JournalError, session_id: str) -> RpcError:
    """A journal failure as the wire error it is: a damaged journal file is RecordCorrupt
    naming the file and each bad line (never read as "nothing pending", and never an
    internal error: the session cannot load until the file is restored or moved aside)."""
    if isinstance(exc, JournalCorrupt):
        issues: list[Issue] = [
            {
                "path": f"line {issue['line']}" if issue["line"] else "file",
                "message": issue["message"],
            }
            for issue in exc.issues
        ]
        return RecordCorrupt(session_id, issues, path=exc.path)
    refused = storage_failed(exc, session_id)
    return refused or InternalError(f"the execution journal failed: {exc}")
