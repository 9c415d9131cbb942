"""Direct tool invocation: one tool call run by the host, outside any turn (G-067…G-070).

The caller holds the session's claim for the whole call, so a turn or another direct call is
refused meanwhile (G-067), and releases it only after the body has settled — also when the
caller is cancelled (G-068), which is what lets shutdown drain it (G-069). The call passes the
same gate as a turn's calls (rules, mode, classifier, hooks, spilling), but nobody can be asked:
a call that would need a person is denied at once (G-070). Nothing enters history; the call and
its result are written to the session log.

An abort of the session stops the body; the call then settles as a failed, interrupted result
(one taken while its long result was being stored removes it from the spill store again). An
abort once the call has settled only cuts its PostToolUse hooks short: the result stands.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import msgspec

from protocol.shapes import ToolCall, new_id
from robotad.agent.gate import Admit
from robotad.agent.tool import ArgumentError, Tool, ToolContext, ToolResult
from robotad.session.turn.tool_admission import (
    GatePolicy,
    GateServices,
    RefusingApprover,
    SessionToolGate,
)
from robotad.session.turn.work import TurnContext

__all__ = ["invoke_directly"]

logger = logging.getLogger("robotad.session.direct")


async def invoke_directly(
    services: GateServices,
    turn: TurnContext,
    tools: Mapping[str, Tool],
    name: str,
    arguments: dict[str, Any],
) -> ToolResult:
    """Run tool `name` with `arguments` through the gate; always a `ToolResult` (a refusal,
    an unknown tool or bad arguments are failed results). Cancellation propagates once the
    body has settled."""
    call = ToolCall(new_id("call_"), name, dict(arguments))
    tool = tools.get(name)
    result: ToolResult | None = None
    if tool is None:
        known = ", ".join(sorted(tools)) or "none"
        result = ToolResult(False, f"unknown tool {name!r} (available tools: {known})")
    else:
        problem = _argument_problem(tool, call.arguments)
        if problem is not None:
            result = ToolResult(False, problem)
    if result is None:
        assert tool is not None
        policy = GatePolicy(RefusingApprover("a direct invocation cannot ask anyone"))
        gate = SessionToolGate(services, turn, policy)
        ran: ToolResult | None = None
        with turn.abort.scope() as scope:
            result, ran = await _gated(
                gate, call, tool, ToolContext(services.cwd, services.session_id, services.enforcer)
            )
        if scope.cancelled_caught or not turn.abort.settle():
            _discard_spilled(services, result)
            result = ToolResult(False, f"interrupted: {name} was aborted", {"aborted": True})
        elif ran is not None:
            with turn.abort.scope():  # settled: a late abort cuts PostToolUse, the result stands
                await gate.after_settle(call, tool, ran)
    services.reporter.tool_result(call.id, name, result.ok, result.content)
    return result


async def _gated(
    gate: SessionToolGate, call: ToolCall, tool: Tool, ctx: ToolContext
) -> tuple[ToolResult, ToolResult | None]:
    """The call's settled result, and its body's own result when the body ran."""
    decision = await gate.admit(call, tool)
    if not isinstance(decision, Admit):
        return ToolResult(False, decision.reason), None
    problem = _argument_problem(tool, decision.arguments)
    if problem is not None:
        return ToolResult(False, problem), None
    typed = tool.decode_arguments(decision.arguments)
    if decision.real_path is not None:
        ctx = msgspec.structs.replace(ctx, real_path=decision.real_path)
    try:
        result = await tool.run(typed, ctx)
    except Exception as exc:
        logger.warning("tool %s raised %s", call.name, type(exc).__name__)
        result = ToolResult(False, f"{call.name} failed: {type(exc).__name__}: {exc}")
    return await gate.settle(call, tool, result), result


def _discard_spilled(services: GateServices, result: ToolResult | None) -> None:
    """Remove the stored result an interrupted call's settled `result` names (an abort that
    came while it was being stored): nothing will ever name it."""
    if result is not None and result.metadata.get("spilled") is True and services.spill is not None:
        services.spill.discard(result.content)


def _argument_problem(tool: Tool, arguments: dict[str, Any]) -> str | None:
    try:
        tool.decode_arguments(arguments)
    except ArgumentError as exc:
        return str(exc)
    except Exception as exc:
        return f"invalid arguments for {tool.name}: {type(exc).__name__}"
    return None
