"""The Session: one conversation with permission-gated tools, hooks, context and compaction.

A facade over composed collaborators (the seeds' "Facade + Decorator + Composition"): the
`TurnClaim` (one turn at a time), the `PermissionEnforcer` with the auto-mode gate, the
`HookLifecycle`, the `Conversation` (history, its one commit path and the context tracker),
the `CompactionProcedure`, the `TurnRunner` around the agent loop, and every tool wrapped by the
session's gate (G-211). Ports are Null Objects when absent: no store writes nothing (G-212), no
logger logs nothing, no event sink emits nothing.

Lifecycle: construct (synchronous; the working directory is required and is the root of every
hook, permission and record, G-103, G-104) → ``await start()`` (SessionStart once, G-124; a
first `run` starts it implicitly) → turns → ``await shutdown()`` (idempotent: drains the holder
of the claim, saves, SessionEnd once, closes the provider; each step best-effort, G-129…G-132).
A session whose start never came (its host failed to activate it) ends with ``await
release()`` instead: what it holds let go, nothing saved or fired. Either lets go once.

Turns, compactions and direct invocations claim the session synchronously before their first
``await`` (G-058) and are refused with `SessionBusy` while anything holds it (G-059…G-061,
G-067). `abort()` signals the holder and never releases (G-064, G-065).

`run` asks a live `permission_handler` (none: denied, G-118); `run_recoverable`,
`resume_recoverable`, `recover`, `get_pending_execution` and `abandon_pending_execution` are the
journaled, checkpointed-approval path (`robotad.session.recovery.recoverable`).

Its size is the façade: the seeds' whole public Session API, each method a few lines delegating
to its room.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import trio

from protocol.errors import ExecutionPending, NotAllowed
from protocol.methods import ApprovalResponse
from protocol.shapes import ContextState, Message, Pending, TurnCompleted, TurnWaiting, new_id
from robotad.agent.abort import AbortSignal
from robotad.agent.provider import Provider, ToolChoice
from robotad.agent.tool import Tool, ToolResult
from robotad.sandbox.policy import SandboxPolicy
from robotad.session.composition import compose, effective_idle_timeout
from robotad.session.context_window import (
    parse_auto_compact_threshold,
)
from robotad.session.direct import invoke_directly
from robotad.session.errors import InvalidSetting
from robotad.session.hooks.trace import TraceContext
from robotad.session.ports import (
    CompactOutcome,
    NullStore,
    SessionCallbacks,
    SessionSnapshot,
    SessionStorePort,
)
from robotad.session.runtime_settings import RuntimeSettings
from robotad.session.settings import (
    DEFAULT_OPTIONS,
    NO_SERVICES,
    SessionOptions,
    SessionServices,
)
from robotad.session.turn.claim import ClaimKind, ClaimToken
from robotad.session.turn.tool_admission import GatePolicy, LiveApprover, RefusingApprover
from robotad.session.turn.work import TurnContext
from robotad.storage import log_events
from robotad.storage.ids import session_id_problem
from robotad.storage.journal import ExecutionJournal
from robotad.storage.session_log import LogSource

__all__ = ["Session"]

logger = logging.getLogger("robotad.session")


class Session(RuntimeSettings):
    """One session; see the module doc for the exact API."""

    def __init__(
        self,
        *,
        cwd: Path,
        provider: Provider,
        tools: Sequence[Tool] = (),
        options: SessionOptions = DEFAULT_OPTIONS,
        services: SessionServices = NO_SERVICES,
        session_id: str | None = None,
        history: Sequence[Message] = (),
        turn_count: int = 0,
        source: Literal["startup", "resume"] = "startup",
    ) -> None:
        """Build a session (not started). `options` are the user's choices, `services` what
        the host provides (`robotad.session.settings`); `session_id`, `history`,
        `turn_count` and `source` say where it starts from: a new session, or a stored one
        being loaded ("resume")."""
        cwd = Path(cwd)
        if not cwd.is_absolute() or not cwd.is_dir():
            message = "must be the absolute path of an existing directory"
            raise InvalidSetting([{"path": "$.cwd", "message": message}])
        if session_id and (problem := session_id_problem(session_id)):
            raise InvalidSetting([{"path": "$.sessionId", "message": problem}])
        self.session_id = session_id or new_id("s-")
        self.cwd = cwd
        self.options = options
        self.turn_count = turn_count
        self.source = source
        self.permission_handler = services.permission_handler
        self.model_effort: str | None = None
        self.tool_choice: ToolChoice = "auto"
        self.active_preset: str | None = None
        self.parallel_subagents = False
        self._threshold = parse_auto_compact_threshold(options.auto_compact_threshold)
        self._context_window = options.context_window
        self._effective_idle_timeout = effective_idle_timeout(options, provider)
        #: The default round limit of this session's turns (None: no limit).
        self.round_cap = options.round_cap
        self._provider = provider
        self._store: SessionStorePort = services.store or NullStore()
        callbacks = SessionCallbacks(
            provider=lambda: self._provider,
            effort=lambda: self.model_effort,
            save=self._save,
            persist=self._persist,
            completed=self._turn_completed,
        )
        parts = compose(
            session_id=self.session_id,
            cwd=cwd,
            provider=provider,
            tools=tools,
            history=history,
            options=options,
            services=services,
            callbacks=callbacks,
        )
        #: Content-free observations of the running turn (G-042); subscribe to it.
        self.bus = parts.bus
        self._tool_table = parts.tool_table
        self._tools = parts.tool_table.tools
        self._profiles = parts.tool_table.profiles
        self._enforcer = parts.enforcer
        self._auto_gate = parts.auto_gate
        self._claim = parts.claim
        self._reporter = parts.reporter
        self._lifecycle = parts.lifecycle
        self._conversation = parts.conversation
        self._compaction = parts.compaction
        self._gate = parts.gate
        self._runner = parts.runner
        self._executions = parts.executions
        self._started = False
        self._closing = False
        self._shutdown_done: trio.Event | None = None

    @property
    def system_message(self) -> str | None:
        return self.options.system_message

    @property
    def sandbox(self) -> SandboxPolicy:
        """How the tools confine model-run commands; the tools were built with it."""
        return self.options.sandbox

    @property
    def instructions(self) -> list[str] | None:
        """The project-instruction files its system prompt was built with (None: not
        recorded)."""
        files = self.options.instructions
        return list(files) if files is not None else None

    # -- identity and state ---------------------------------------------------------------

    def is_running(self) -> bool:
        """Authoritative: true from a claim until its holder has fully stopped (G-064)."""
        return self._claim.running

    @property
    def auto_compact_threshold(self) -> float | Literal[False]:
        return self._threshold

    @auto_compact_threshold.setter
    def auto_compact_threshold(self, value: float | Literal[False]) -> None:
        """Validated (G-052); a run reads it once when it begins (G-054)."""
        self._threshold = parse_auto_compact_threshold(value)

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """Fire SessionStart (source "startup" or "resume") — once, however often called."""
        if self._started or self._closing:
            return
        self._started = True
        self._reporter.log(
            "session_start", log_events.SessionStartEntry(source=self.source, cwd=str(self.cwd))
        )
        await self._conversation.log_whole(even_empty=self.source == "resume")
        await self._lifecycle.session_start(self.source)

    async def run(
        self,
        prompt: str,
        *,
        turn_id: str | None = None,
        tool_choice: ToolChoice | None = None,
        system_context: str | None = None,
        max_rounds: int | None = None,
    ) -> str:
        """Run one turn; returns the final response. Live approvals go to the permission
        handler; with none, a call needing approval is denied (G-118). Raises `SessionBusy`,
        `ExecutionPending`, `TurnAborted`, `ProviderFailed`, `CompactionFailed`,
        `CompactionAborted`."""
        with self._claimed("turn", turn_id or new_id("turn-")) as token:
            threshold = self._threshold
            await self.start()
            turn = self._turn_context(token, max_rounds)
            approver = (
                LiveApprover(self.permission_handler, self._enforcer, turn)
                if self.permission_handler is not None
                else RefusingApprover()
            )
            outcome = await self._runner.execute(
                turn,
                prompt,
                policy=GatePolicy(approver),
                tool_choice=tool_choice if tool_choice is not None else self.tool_choice,
                system_context=system_context,
                threshold=threshold,
            )
            assert outcome.kind == "completed", "a live approver never parks"
            return outcome.response  # type: ignore[union-attr]

    async def run_recoverable(
        self,
        prompt: str,
        journal: ExecutionJournal,
        *,
        turn_id: str | None = None,
        tool_choice: ToolChoice | None = None,
        system_context: str | None = None,
        max_rounds: int | None = None,
        abort: AbortSignal | None = None,
    ) -> TurnCompleted | TurnWaiting:
        """Run one journaled turn: a call that needs a person parks it and ``waiting`` comes
        back once its request is durable (see `robotad.session.recovery.recoverable`).
        `max_rounds` overrides the session's round limit for this turn (and its
        continuations); `abort` is the turn's signal when the caller made it (a daemon that
        answered "running" before the turn began must be able to abort it)."""
        with self._claimed("turn", turn_id or new_id("turn-"), abort) as token:
            threshold = self._threshold
            await self.start()
            return await self._executions.run(
                self._turn_context(token, max_rounds),
                prompt,
                journal,
                tool_choice=tool_choice if tool_choice is not None else self.tool_choice,
                system_context=system_context,
                threshold=threshold,
            )

    async def resume_recoverable(
        self,
        execution_id: str,
        journal: ExecutionJournal,
        responses: Sequence[ApprovalResponse],
        *,
        abort: AbortSignal | None = None,
    ) -> TurnCompleted | TurnWaiting:
        """Answer a waiting execution's requests and continue it without new input; raises
        `SessionBusy`, `StaleResponse`, or a reconciliation error for an uncertain effect.
        `abort` as for `run_recoverable`."""
        turn_id = self._executions.turn_id_of(execution_id)
        with self._claimed("resume", turn_id, abort) as token:
            await self.start()
            return await self._executions.resume(
                TurnContext(token, round_cap=self.round_cap), execution_id, journal, responses
            )

    async def resume_answer_without_running(
        self,
        execution_id: str,
        journal: ExecutionJournal,
        responses: Sequence[ApprovalResponse],
    ) -> TurnCompleted | TurnWaiting | None:
        """What `resume_recoverable` answers, judged without the claim, for an execution
        that neither waits nor runs (a redelivery's latest result, or `StaleResponse`); None
        when it needs the claim."""
        return await self._executions.answer_without_running(execution_id, journal, responses)

    async def recover(self, journal: ExecutionJournal, log: LogSource | None = None) -> None:
        """After a load: rebuild the waiting execution, if any, from `journal` and history.
        `log` reads back the session's log, so a turn the recovery completes is logged
        completed once (without it, the line is written unchecked). Returns, or raises, once
        what it put back is in the log, before anyone reads or appends to it again."""
        try:
            with self._claimed("resume", None, AbortSignal.settled_now()):
                await self._executions.recover(journal, log)
        finally:
            await self._reporter.written()  # shielded: its stores always end

    def get_pending_execution(self) -> Pending | None:
        """The execution whose open round blocks new input, with its unanswered requests."""
        return self._executions.pending_view()

    async def abandon_pending_execution(self, execution_id: str) -> None:
        """Give the waiting execution up: nothing runs, nothing is journaled, its open calls
        close as failed in history, and the session is saved (`StaleResponse` if it does not
        wait, judged first: whatever holds the session, an execution that neither waits nor
        runs is stale, not busy)."""
        self._executions.refuse_unless_held(execution_id)
        turn_id = self._executions.turn_id_of(execution_id)
        with self._claimed("resume", turn_id, AbortSignal.settled_now()):  # nothing to abort
            await self._executions.abandon(execution_id)

    def abort(self) -> bool:
        """Signal the running turn, compaction or direct call to stop; True when it ends
        aborted for it, False when nothing ran or its outcome was already decided (then only
        its closing hooks are cut short). The claim stays held until it has stopped (G-064)."""
        return self._claim.abort()

    async def compact(
        self,
        instructions: str | None = None,
        *,
        trigger: Literal["manual", "auto"] = "manual",
        abort: AbortSignal | None = None,
    ) -> CompactOutcome:
        """Summarise the conversation now (G-176 instructions; G-183 no-op). Its hooks get no
        TRACEPARENT (G-137). Raises `SessionBusy`, `CompactionFailed`, `CompactionAborted`.
        `abort` as for `run_recoverable`."""
        with self._claimed("compaction", None, abort) as token:
            await self.start()
            turn = TurnContext(token)
            return await self._compaction.run(turn, trigger=trigger, instructions=instructions)

    async def invoke_tool(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Run one tool directly (no history, no approval prompt); see `robotad.session.direct`."""
        with self._claimed("direct", None) as token:
            await self.start()
            return await invoke_directly(
                self._gate, TurnContext(token), self._tools, name, arguments
            )

    async def log_written(self) -> None:
        """Return once every line the session logged so far is in its log: a line naming a
        sidecar not stored yet waits for it, stored on a worker thread (decision 76)."""
        await self._reporter.written()

    async def save_when_idle(self) -> None:
        """Once nothing holds the claim, save what is not saved yet; raises when the store
        does (a close that must not unload a history it could not write)."""
        await self._claim.wait_released()
        await self._persist()  # an unchanged snapshot is not written again

    async def shutdown(self) -> None:
        """Drain whatever holds the claim, save, fire SessionEnd once, close the provider.
        Idempotent: a second call waits for the first. Each step is best-effort (G-132): a
        cancellation (a deadline) can cut the drain and the SessionEnd hooks short, never a
        save under way nor the letting go of what the session holds (`_let_go`). Cut short
        in the drain, it logs no ``session_end``: the holder still runs, and what it logs
        from then on is dropped, so the log is cut off mid-turn and says so (a load closes
        it with ``recovered``); the lines logged before are written all the same, and the
        log's file closed once they are (`SessionLogger.close`)."""
        if self._shutdown_done is not None:
            await self._shutdown_done.wait()
            return
        self._shutdown_done = done = trio.Event()
        self._closing = True
        try:
            await self._claim.wait_released()
            with trio.CancelScope(shield=True):
                await self._save()
            try:
                await self._lifecycle.session_end("shutdown")
            except Exception:
                logger.warning("SessionEnd hooks failed", exc_info=True)
            finally:
                # Also when the daemon's shutdown deadline cut the hooks short: the log says
                # the session ended, or its recovery would take it for one cut off mid-turn.
                self._reporter.log("session_end", log_events.SessionEndEntry(reason="shutdown"))
                await self._reporter.written()  # shielded: the log is whole once shut down
        finally:
            await self._let_go()
            done.set()

    async def release(self) -> None:
        """Let go of what a session that never started holds — its log's file, its provider,
        its added tools (an MCP server of its own) — when what was to start it failed (its
        journal, its recovery, its record's first save, a requester that left): nothing is
        saved, logged or fired, as no SessionStart was. Returns once the lines it logged (a
        recovery's put-back) are written. The session refuses everything afterwards. After
        or during `shutdown`, which lets go of the same, it waits for it and does nothing
        more: whichever comes first lets go, once."""
        if self._shutdown_done is not None:
            await self._shutdown_done.wait()
            return
        self._shutdown_done = done = trio.Event()
        self._closing = True
        try:
            await self._reporter.written()  # shielded: its stores always end
        finally:
            await self._let_go()
            done.set()

    async def _let_go(self) -> None:
        """The one way a session lets go of what it holds, run once, by whichever of
        `shutdown` (cut short or not) and `release` comes first: no hook fires and nothing is
        emitted or logged after it; the log's file is closed (at once, or once the lines
        still waiting for their sidecars are written: `SessionLogger.close`); then, shielded,
        the provider and the added tools are closed, each failure logged, never raised."""
        self._lifecycle.close()
        self._reporter.closed = True
        with trio.CancelScope(shield=True):
            try:
                await self._provider.aclose()
            except Exception:
                logger.warning("closing provider %s failed", self.provider_name, exc_info=True)
            try:
                await self._tool_table.aclose()
            except Exception:
                logger.warning("closing the added tools failed", exc_info=True)

    # -- history and context --------------------------------------------------------------

    def get_history(self) -> list[Message]:
        return list(self._conversation.messages)

    def inject_message(self, message: Message) -> None:
        """Append a message between turns (refused while anything runs)."""
        self._refuse_while_running()
        self._conversation.append(message)

    def clear_history(self) -> None:
        """Drop every message but the system messages (refused while anything runs)."""
        self._refuse_while_running()
        kept = [m for m in self._conversation.messages if m.role == "system"]
        self._conversation.replace(kept)
        self._conversation.tracker.reset()

    @property
    def idle_timeout_ms(self) -> int:
        """The effective idle timeout of a model call, in milliseconds (SessionInfo's)."""
        return max(1, round(self._effective_idle_timeout * 1000))

    def get_context_state(self) -> ContextState:
        return self._conversation.state()

    # -- persistence ----------------------------------------------------------------------

    def snapshot(self) -> SessionSnapshot:
        """The session-owned record members as they are now."""
        idle_timeout = self.options.idle_timeout
        remaining = getattr(self._provider, "remaining_steps", None)
        script = remaining() if callable(remaining) else None
        return SessionSnapshot(
            session_id=self.session_id,
            cwd=str(self.cwd),
            messages=list(self._conversation.messages),
            system_prompt=self.system_message,
            tool_schemas=[tool.schema for tool in self._tools.values()],
            provider=self._provider.name,
            model=self._provider.model,
            permission_mode=self._enforcer.mode,
            permissions=self._enforcer.rules(),
            auto_compact_threshold=self.auto_compact_threshold,
            turn_count=self.turn_count,
            context_window=self._context_window,
            idle_timeout_ms=(None if idle_timeout is None else max(1, round(idle_timeout * 1000))),
            script=script if isinstance(script, list) else None,
            max_rounds=self.round_cap,
            instructions=self.instructions,
            sandbox=self.sandbox,
        )

    async def _persist(self) -> None:
        """Save a snapshot; raises when the store does."""
        revision = self._conversation.revision
        await self._store.save(self.snapshot())
        self._conversation.mark_saved(revision)

    async def _save(self) -> bool:
        """Save a snapshot; a failure is logged, not raised — the next save writes the whole
        state again. Returns whether it was saved."""
        try:
            await self._persist()
        except Exception:
            logger.error("saving session %s failed", self.session_id, exc_info=True)
            return False
        return True

    # -- internals ------------------------------------------------------------------------

    @contextmanager
    def _claimed(
        self, kind: ClaimKind, turn_id: str | None, abort: AbortSignal | None = None
    ) -> Iterator[ClaimToken]:
        """Hold the claim for the block. Claims on entry, synchronously (G-058), or refuses:
        shut down (`NotAllowed`), busy (`SessionBusy`), an execution waiting
        (`ExecutionPending`, for new input). Released by this holder only, on exit (G-062).
        `abort`: the holder's signal, made by a caller that may fire it before the claim."""
        if self._closing:
            raise NotAllowed(f"session {self.session_id} is shut down")
        token = self._claim.claim(kind, turn_id, abort)
        try:
            pending = self._executions.pending
            if pending is not None and kind in ("turn", "compaction"):
                raise ExecutionPending(self.session_id, pending.execution_id)
            yield token
        finally:
            self._claim.release(token)

    def _turn_context(self, token: ClaimToken, max_rounds: int | None = None) -> TurnContext:
        """A new turn's context; its round limit is `max_rounds`, else the session's."""
        return TurnContext(
            token,
            trace=TraceContext.new_root() if self.options.trace else None,
            round_cap=max_rounds if max_rounds is not None else self.round_cap,
        )

    def _turn_completed(self) -> None:
        self.turn_count += 1
