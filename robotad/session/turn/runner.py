"""One turn of a session, from ``turn_started`` to ``turn_finished``.

`TurnRunner.execute` runs a turn whose claim the caller already holds:

1. ``turn_started``; auto-compaction when usage has reached the threshold fixed when the run
   began (G-054, G-188), before the new prompt is processed (G-189) — a failure fails the run
   and the prompt is never sent (G-179), an abort ends the turn "aborted" (G-182);
2. UserPromptSubmit (G-125), then the user message is committed;
3. the agent loop (`run_turn`) with the session's gate, its commit path and callbacks that
   emit ``context_updated`` estimated before each provider call and exact after it (G-045),
   log each request (its history by reference, see `logged_request`) and response (G-144)
   and stream ``text_delta``; model-call hooks run fire-and-forget in the turn's background
   nursery (G-050, G-051);
4. the end: completed — turn count, Stop, save, ``turn_finished`` (G-126, G-010); failed —
   ``turn_failed`` logged with its detail, StopFailure, history saved up to the failure, then
   `ProviderFailed` (or the failure's own error) raised (G-127, G-206…G-208); aborted — the
   partial reply is already committed as interrupted by the loop (G-191), the session is saved
   and `TurnAborted` raised once everything has stopped (G-192).

A parked outcome is returned as it is, for the recoverable-execution layer to journal.

Its size is one concept: the turn's steps above, in their order, with the placing and storing
of each request's log line (decision 62) that the order of a turn's lines depends on.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import msgspec
import trio

from protocol.errors import (
    CompactionAborted,
    CompactionFailed,
    InternalError,
    ProviderFailed,
    RpcError,
    TurnAborted,
)
from protocol.shapes import Message, new_id
from robotad.agent.loop import (
    CompletedTurn,
    ModelCallFailed,
    ParkedTurn,
    TurnAbortedError,
    TurnCallbacks,
    TurnOptions,
    TurnOutcome,
    run_turn,
)
from robotad.agent.observations import EventBus
from robotad.agent.provider import ModelReply, ModelRequest, Provider, ToolChoice
from robotad.agent.tool import Tool, ToolContext
from robotad.session.compaction.procedure import CompactionProcedure
from robotad.session.context_window import should_auto_compact
from robotad.session.conversation import Conversation
from robotad.session.hooks.lifecycle import HookLifecycle
from robotad.session.ports import SessionCallbacks
from robotad.session.reporting import SessionReporter, logged_request
from robotad.session.turn.tool_admission import GatePolicy, GateServices, SessionToolGate
from robotad.session.turn.work import RequestLine, TurnContext
from robotad.storage import log_events
from robotad.storage.failure import storage_failed
from robotad.storage.journal import JournalError

__all__ = ["TurnRunner", "TurnServices"]

logger = logging.getLogger("robotad.session.turn")


@dataclass
class TurnServices:
    """What a turn needs from its session. The callables read values that can change between
    turns (the provider can be swapped, the effort set)."""

    session_id: str
    cwd: Path
    conversation: Conversation
    reporter: SessionReporter
    lifecycle: HookLifecycle
    gate: GateServices
    compaction: CompactionProcedure
    tools: dict[str, Tool]
    bus: EventBus
    #: The Session's current provider and effort, its saving (a completed turn is
    #: acknowledged only once persisted) and its turn count.
    callbacks: SessionCallbacks
    idle_timeout: float | None = None
    #: Brings `tools` up to date before each turn's loop (added tools, e.g. MCP servers').
    refresh_tools: Callable[[], Awaitable[None]] | None = None


class TurnRunner:
    """Runs the turns of one session; see the module doc."""

    def __init__(self, services: TurnServices) -> None:
        self.session = services

    async def execute(
        self,
        turn: TurnContext,
        prompt: str,
        *,
        policy: GatePolicy,
        tool_choice: ToolChoice,
        system_context: str | None,
        threshold: float | bool,
        user: Message | None = None,
    ) -> CompletedTurn | ParkedTurn:
        """Run a new turn for `prompt` (`user`: its message, when the caller needs its id
        first); raises the error its requester gets."""
        assert turn.turn_id is not None
        self.session.reporter.turn_started(turn.turn_id, prompt)
        try:
            if threshold is not False and should_auto_compact(
                self.session.conversation.state(), threshold
            ):
                await self.session.compaction.run(turn, trigger="auto")
        except CompactionAborted as exc:
            await self.aborted(turn, exc)
        except CompactionFailed as exc:
            await self.failed(turn, exc, str(exc), save=False)
        except Exception as exc:
            await self.failed(
                turn, _internal(exc, self.session.session_id), f"compaction failed: {exc!r}"
            )
        with turn.abort.scope():
            await self.session.lifecycle.prompt_submit(turn, prompt)
        if turn.abort.aborted:
            await self.aborted(turn, TurnAborted(self.session.session_id, turn.turn_id))
        await self.session.conversation.close_unheld_round()
        user = user if user is not None else Message.user(prompt)
        await self.session.conversation.commit(user)
        self.session.reporter.log("user_message", log_events.UserMessageEntry(message=user))
        return await self.continue_turn(
            turn, policy=policy, tool_choice=tool_choice, system_context=system_context
        )

    async def continue_turn(
        self,
        turn: TurnContext,
        *,
        policy: GatePolicy,
        tool_choice: ToolChoice = "auto",
        system_context: str | None = None,
    ) -> CompletedTurn | ParkedTurn:
        """Run the loop on the history as it stands (a new turn's user message already
        committed, or an open round to continue) and finish a completed turn. Failures and
        aborts are finished here and raised; a parked outcome is returned unfinished."""
        outcome = await self._loop(turn, policy, tool_choice, system_context)
        if isinstance(outcome, ParkedTurn):
            return outcome
        await self.completed(turn, outcome)
        return outcome

    # -- the loop ---------------------------------------------------------------------------

    async def _loop(
        self,
        turn: TurnContext,
        policy: GatePolicy,
        tool_choice: ToolChoice,
        system_context: str | None,
    ) -> TurnOutcome:
        provider = self.session.callbacks.provider()
        gate = SessionToolGate(self.session.gate, turn, policy)
        callbacks = TurnCallbacks(
            on_text=lambda delta: self._on_text(turn, delta),
            on_request=lambda request: self._on_request(turn, provider, request, system_context),
            on_reply=lambda reply: self._on_reply(turn, provider, reply),
        )
        outcome: TurnOutcome | None = None
        error: Exception | None = None
        if self.session.refresh_tools is not None:
            # Under the abort scope: starting a tool server is part of the turn. An abort
            # here reaches the loop below, which ends the turn as aborted at once.
            with turn.abort.scope():
                await self.session.refresh_tools()
        async with trio.open_nursery() as background:
            turn.background = background
            try:
                outcome = await run_turn(
                    provider=provider,
                    tools=self.session.tools,
                    history=self.session.conversation.messages,
                    commit=self.session.conversation.commit,
                    gate=gate,
                    ctx=ToolContext(
                        cwd=self.session.cwd,
                        session_id=self.session.session_id,
                        policy=self.session.gate.enforcer,
                    ),
                    options=TurnOptions(
                        tool_choice=tool_choice,
                        system_context=system_context,
                        effort=self.session.callbacks.effort(),
                        idle_timeout=self.session.idle_timeout,
                        round_cap=turn.round_cap,
                    ),
                    callbacks=callbacks,
                    bus=self.session.bus,
                    abort=turn.abort,
                )
            except Exception as exc:
                error = exc
        turn.background = None
        if outcome is not None:
            return outcome
        assert error is not None
        await self._raise_failure(turn, provider, error)

    async def _raise_failure(
        self, turn: TurnContext, provider: Provider, error: Exception
    ) -> NoReturn:
        if isinstance(error, TurnAbortedError):
            self._close_request(turn, "aborted")
            await self.aborted(
                turn, TurnAborted(self.session.session_id, turn.turn_id), cause=error
            )
        if isinstance(error, ModelCallFailed):
            self._close_request(turn, error.reason, error.refused)
            wire = ProviderFailed(
                self.session.session_id, turn.turn_id, provider.name, error.reason
            )
            await self.failed(turn, wire, error.reason, cause=error)
        self._close_request(turn, "the turn failed")
        rpc = error if isinstance(error, RpcError) else _internal(error, self.session.session_id)
        await self.failed(turn, rpc, f"{type(error).__name__}: {error}", cause=error)

    async def _on_request(
        self,
        turn: TurnContext,
        provider: Provider,
        request: ModelRequest,
        system_context: str | None,
    ) -> None:
        turn.rounds += 1
        state = self.session.conversation.tracker.state(request.messages)
        self.session.reporter.context_updated(turn.turn_id, "estimated", state)
        turn.open_request = request_id = new_id("req-")
        history = self.session.conversation.messages  # unchanged until the reply is committed

        def request_entry() -> log_events.ProviderRequestEntry:
            return log_events.ProviderRequestEntry(
                request_id=request_id,
                provider=provider.name,
                model=provider.model,
                request=logged_request(request, history, system_context),
            )

        # The line (the request with its tools' schemas: the turn's biggest) is written while
        # the request is on its way: the background task runs at the provider call's first
        # checkpoint and logs it there, and a tool set the log does not hold yet is stored on
        # a worker thread meanwhile, what is logged in between waiting behind the line
        # (decision 62). In any case it comes before anything else of this request: what
        # comes before that task ran places the line first (`_place_request`), and the task
        # still does the storing.
        line = RequestLine(request_entry)
        turn.unplaced_request = line
        if turn.background is not None:
            turn.background.start_soon(self._log_request_soon, turn, line)
        else:
            turn.unplaced_request = None
            await self.session.reporter.store_and_log("provider_request", request_entry())
        self.session.lifecycle.pre_model_call(turn, request, provider.name)

    async def _log_request_soon(self, turn: TurnContext, line: RequestLine) -> None:
        if turn.unplaced_request is line:
            self._place_request(turn)
        if line.pending is not None:
            await self.session.reporter.store_pending(line.pending)

    def _place_request(self, turn: TurnContext) -> None:
        """Give the open request's ``provider_request`` line its place in the log unless it
        has one: written now when the log holds its tool set, else placed for its task
        (`_log_request_soon`) to store and write, every later line waiting behind it."""
        line, turn.unplaced_request = turn.unplaced_request, None
        if line is not None:
            line.pending = self.session.reporter.place("provider_request", line.entry())

    def _on_text(self, turn: TurnContext, delta: str) -> None:
        self._place_request(turn)
        self.session.reporter.text_delta(turn.turn_id, delta, turn.open_request)

    async def _on_reply(self, turn: TurnContext, provider: Provider, reply: ModelReply) -> None:
        self._place_request(turn)
        self.session.conversation.tracker.update_from_reply(reply.usage)
        if turn.open_request is not None:
            normalized = log_events.NormalizedResponseEntry(
                text=reply.text,
                tool_calls=list(reply.tool_calls),
                usage=reply.usage,
                stop_reason=reply.stop_reason,
            )
            self.session.reporter.log(
                "provider_response",
                log_events.ProviderResponseEntry(
                    request_id=turn.open_request,
                    native_raw=reply.raw,
                    raw=msgspec.to_builtins(reply),
                    normalized=normalized,
                ),
            )
            turn.open_request = None
        self.session.reporter.context_updated(
            turn.turn_id, "exact", self.session.conversation.state()
        )
        self.session.lifecycle.post_model_call(turn, reply, provider.name)

    def _close_request(self, turn: TurnContext, error: str, sent: ModelReply | None = None) -> None:
        """Answer, in the log, a provider request that got no response, or whose reply (`sent`)
        was refused: that reply is logged too, as what came back (G-144)."""
        self._place_request(turn)
        if turn.open_request is not None:
            entry = log_events.ProviderResponseEntry(request_id=turn.open_request, error=error)
            if sent is not None:
                entry.native_raw, entry.raw = sent.raw, msgspec.to_builtins(sent)
            self.session.reporter.log("provider_response", entry)
            turn.open_request = None

    # -- ends of a turn ---------------------------------------------------------------------

    async def completed(self, turn: TurnContext, outcome: CompletedTurn) -> None:
        assert turn.turn_id is not None
        self.session.callbacks.completed()
        with turn.abort.scope():  # settled: a late abort stops the hook, the reply stands
            await self.session.lifecycle.stop(turn)
        self.session.reporter.log(
            "turn_completed",
            log_events.TurnCompletedEntry(turn_id=turn.turn_id, status="completed"),
        )
        await self._save_completed(turn)
        await self.session.reporter.turn_finished(
            turn.turn_id,
            "completed",
            response=outcome.response,
            stop_reason=outcome.stop_reason,
            hook_failures=turn.hook_failures,
        )

    async def _save_completed(self, turn: TurnContext) -> None:
        """Save a completed turn before it is acknowledged. A refused write fails the turn
        with `StorageFailed` (PROTOCOL.md §10.1): the previous record stands, the history
        stays in memory, and the session's next save writes all of it."""
        assert turn.turn_id is not None
        try:
            with trio.CancelScope(shield=True):
                await self.session.callbacks.persist()
        except Exception as exc:
            error = _internal(exc, self.session.session_id)
            await self.session.reporter.turn_finished(
                turn.turn_id, "failed", error=error, hook_failures=turn.hook_failures
            )
            raise error from exc

    async def failed(
        self,
        turn: TurnContext,
        error: RpcError,
        detail: str,
        *,
        save: bool = True,
        cause: BaseException | None = None,
    ) -> NoReturn:
        """Log the failure with its detail, fire StopFailure, save, report; raise `error`.
        The failure decides the turn's outcome: an abort from here on only cuts the hook
        short (`AbortSignal.settle`)."""
        assert turn.turn_id is not None
        turn.abort.settle()
        self.session.reporter.log(
            "turn_failed", log_events.TurnFailedEntry(turn_id=turn.turn_id, error=detail)
        )
        with turn.abort.scope():  # a (late) abort stops the hook, not the failure's report
            await self.session.lifecycle.stop_failure(turn, error.message)
        if save:
            with trio.CancelScope(shield=True):
                await self.session.callbacks.save()
        await self.session.reporter.turn_finished(
            turn.turn_id, "failed", error=error, hook_failures=turn.hook_failures
        )
        raise error from cause

    async def aborted(
        self, turn: TurnContext, error: RpcError, *, cause: BaseException | None = None
    ) -> NoReturn:
        """Log the abort, save what was committed, report; raise `error`. No Stop hook."""
        assert turn.turn_id is not None
        self.session.reporter.log("turn_aborted", log_events.TurnAbortedEntry(turn_id=turn.turn_id))
        with trio.CancelScope(shield=True):
            await self.session.callbacks.save()
        await self.session.reporter.turn_finished(
            turn.turn_id, "aborted", error=error, hook_failures=turn.hook_failures
        )
        raise error from cause


def _internal(exc: Exception, session_id: str | None = None) -> RpcError:
    refused = storage_failed(exc, session_id)
    if refused is not None:  # the disk refused a durable write: say which and why
        logger.error("turn failed: %s", refused.message)
        return refused
    if isinstance(exc, JournalError):  # a persistence failure, even while aborting (G-194)
        logger.error("the execution journal failed: %s", exc)
        return InternalError(f"the execution journal failed: {exc}")
    logger.error("turn failed unexpectedly: %s", type(exc).__name__, exc_info=exc)
    return InternalError(f"the turn failed: {type(exc).__name__}")
