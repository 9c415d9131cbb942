"""The session's hook lifecycle: which event fires when, with what input and which trace.

`HookLifecycle` wraps the session's `HookRunner` (or none) and knows the Session's sequencing
rules (G-124…G-143):

- SessionStart once at start (``source`` "startup"/"resume"), SessionEnd once from shutdown —
  neither with a TRACEPARENT (G-137);
- UserPromptSubmit before a turn's first provider call, Stop after a completed turn,
  StopFailure after a failed one (G-125…G-127) — with the turn root's TRACEPARENT (G-135);
  none of the three for a no-input continuation (G-133);
- PreModelCall / PostModelCall around each provider call: fire-and-forget in the turn's
  background nursery, effort "auto" when unset, never able to change the call (G-050, G-051);
- PreToolUse (the one enforcing event, fail-closed), PermissionDecision and PostToolUse for
  each gated call, with the TRACEPARENT of the call's context (the turn root, G-138);
- PreCompact / PostCompact with the triggering turn's TRACEPARENT for an auto-compaction and
  none for a user-requested one (G-136, G-137).

Advisory failures are written to the session log (``hook_failure``) and collected on the turn
for ``turn_finished.hookFailures``; they never fail anything (G-143). After `close` no hook
fires again (G-131).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from robotad.agent.provider import ModelReply, ModelRequest
from robotad.session.hooks.runner import HookFailure, HookRunner, HookVerdict, model_call_input
from robotad.session.reporting import SessionReporter
from robotad.session.turn.work import TurnContext

__all__ = ["HookLifecycle"]


class HookLifecycle:
    """Fires one session's hooks. `model` and `effort` are read at each firing (the provider
    can be swapped, the effort changed)."""

    def __init__(
        self,
        hooks: HookRunner | None,
        reporter: SessionReporter,
        *,
        model: Callable[[], str],
        effort: Callable[[], str | None],
    ) -> None:
        self.hooks = hooks
        self._reporter = reporter
        self._model = model
        self._effort = effort
        self.closed = False

    def close(self) -> None:
        """No hook fires after this."""
        self.closed = True

    # -- session ----------------------------------------------------------------------------

    async def session_start(self, source: str) -> None:
        await self._advisory(None, "SessionStart", {"source": source})

    async def session_end(self, reason: str) -> None:
        await self._advisory(None, "SessionEnd", {"reason": reason})

    # -- turn -------------------------------------------------------------------------------

    async def prompt_submit(self, turn: TurnContext, prompt: str) -> None:
        if not turn.prompted:
            return
        await self._advisory(turn, "UserPromptSubmit", {"prompt": prompt, "turn_id": turn.turn_id})

    async def stop(self, turn: TurnContext) -> None:
        if not turn.prompted:
            return
        await self._advisory(turn, "Stop", {"turn_id": turn.turn_id, "stop_hook_active": False})

    async def stop_failure(self, turn: TurnContext, reason: str) -> None:
        if not turn.prompted:
            return
        await self._advisory(turn, "StopFailure", {"turn_id": turn.turn_id, "error": reason})

    def pre_model_call(self, turn: TurnContext, request: ModelRequest, provider: str) -> None:
        payload = model_call_input(
            self._model(),
            request.effort if request.effort is not None else self._effort(),
            turn_id=turn.turn_id,
            round=turn.rounds,
            provider=provider,
            tool_choice=msgspec.to_builtins(request.tool_choice),
        )
        self._in_background(turn, "PreModelCall", payload)

    def post_model_call(self, turn: TurnContext, reply: ModelReply, provider: str) -> None:
        payload = model_call_input(
            self._model(),
            self._effort(),
            turn_id=turn.turn_id,
            round=turn.rounds,
            provider=provider,
            stop_reason=reply.stop_reason,
            usage=msgspec.to_builtins(reply.usage),
        )
        self._in_background(turn, "PostModelCall", payload)

    # -- compaction -------------------------------------------------------------------------

    async def pre_compact(
        self, turn: TurnContext | None, trigger: str, instructions: str | None
    ) -> None:
        payload = {"trigger": trigger, "custom_instructions": instructions or ""}
        await self._advisory(turn, "PreCompact", payload)

    async def post_compact(self, turn: TurnContext | None, trigger: str, summarized: int) -> None:
        payload = {"trigger": trigger, "compacted_messages": summarized}
        await self._advisory(turn, "PostCompact", payload)

    # -- tools ------------------------------------------------------------------------------

    async def pre_tool_use(
        self, turn: TurnContext, call_id: str, tool: str, arguments: Mapping[str, Any]
    ) -> HookVerdict:
        """The enforcing event: its verdict, or ``none`` when no hook is configured."""
        if self.hooks is None or self.closed:
            return HookVerdict("none")
        return await self.hooks.run_pre_tool_use(
            tool,
            arguments,
            tool_use_id=call_id,
            traceparent=turn.traceparent,
            extra={"turn_id": turn.turn_id},
        )

    async def permission_decision(
        self,
        turn: TurnContext,
        call_id: str,
        tool: str,
        arguments: Mapping[str, Any],
        decision: str,
        reason: str,
    ) -> None:
        payload = {
            "tool_name": tool,
            "tool_input": dict(arguments),
            "tool_use_id": call_id,
            "decision": decision,
            "reason": reason,
            "turn_id": turn.turn_id,
        }
        await self._advisory(turn, "PermissionDecision", payload)

    async def post_tool_use(
        self,
        turn: TurnContext,
        call_id: str,
        tool: str,
        arguments: Mapping[str, Any],
        ok: bool,
        content: str,
    ) -> None:
        payload = {
            "tool_name": tool,
            "tool_input": dict(arguments),
            "tool_use_id": call_id,
            "tool_response": {"ok": ok, "content": content},
            "turn_id": turn.turn_id,
        }
        await self._advisory(turn, "PostToolUse", payload)

    # -- plumbing ---------------------------------------------------------------------------

    def report(self, turn: TurnContext | None, failures: list[HookFailure]) -> None:
        """Log advisory failures and keep them on the turn for ``turn_finished``."""
        if not failures:
            return
        self._reporter.hook_failures(failures)
        if turn is not None:
            turn.hook_failures.extend(failures)

    async def _advisory(
        self, turn: TurnContext | None, event: str, payload: Mapping[str, Any]
    ) -> None:
        if self.hooks is None or self.closed:
            return
        traceparent = turn.traceparent if turn is not None else None
        failures = await self.hooks.run_advisory(event, payload, traceparent=traceparent)
        self.report(turn, failures)

    def _in_background(self, turn: TurnContext, event: str, payload: Mapping[str, Any]) -> None:
        """Start an advisory event without waiting for it, in the turn's background nursery;
        an abort of the turn stops it."""
        hooks = self.hooks
        nursery = turn.background
        if (
            hooks is None
            or self.closed
            or nursery is None
            or not hooks.select(event, payload).fires
        ):
            return

        async def fire() -> None:
            with turn.abort.scope():
                failures = await hooks.run_advisory(event, payload, traceparent=turn.traceparent)
                self.report(turn, failures)

        nursery.start_soon(fire)
