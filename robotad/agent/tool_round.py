"""One round's tool calls: admitted in call order, run concurrently, committed in call order.

`ToolRound` takes the calls of one assistant message that still lack results and drives them:

1. Structural failures first, without asking the gate: an unknown tool (G-204), argument text
   that was not JSON (``raw_arguments`` set, G-205), arguments the tool's decoder refuses.
2. Every other call is admitted by the gate one at a time, in call order, each once one of the
   `MAX_CONCURRENT_TOOLS` slots is free. `Refuse` is a failed result (G-202, G-203); `Admit`
   starts the body at once; `Park` ends admission for the round (see below).
3. Bodies run concurrently. A body that raises becomes a failed result; its result goes through
   `gate.settle` and is committed, while `gate.after_settle` (PostToolUse) runs: an abort
   then cuts the hooks short, never the result of a body that finished. A result's text
   holding a lone surrogate — a file name's undecodable byte as `os` decodes it (Grep,
   Glob) — has each written out first (``\\xff``; U+FFFD for any other surrogate): no JSON,
   journal or spill file can hold one, and the turn failed -32603 with the result lost.
4. Results are committed in call order — a result waits for every earlier call's — so history
   reads in the order the model asked, whichever tool finished first.

Park: the parked call and every call after it are not started. Calls already running settle and
their results are committed (still in call order); `park` then names the parked call and
`held` the calls after it, and the round stays open in history for a later continuation.

Abort (cancellation of an enclosing scope): running bodies are cancelled and settle; `run`
propagates the cancellation. The caller then calls `close_after_abort` outside the cancelled
scope, which commits, in call order, every result not yet committed: real results of calls that
finished, and for the rest a failed result with state ``"interrupted"`` and
``metadata.aborted: true`` — so history stays paired. The one exception is a parked round:
its parked and held calls stay open (their approval request is saved and may still be resumed).

Failure: an exception from the gate or from `commit` cancels the running bodies and propagates
from `run` after they settle; nothing further is committed, the round is left as it is.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec
import trio

from protocol.shapes import Message, ToolCall, utc_now
from robotad.agent.gate import Admit, Park, Refuse, ToolGate
from robotad.agent.model_text import LONE_SURROGATE
from robotad.agent.observations import EventBus, ObservedOutcome, ToolBodyObserved
from robotad.agent.tool import ArgumentError, Tool, ToolContext, ToolResult, missing_tool_reason

__all__ = ["MAX_CONCURRENT_TOOLS", "ParkedCall", "ToolRound"]

logger = logging.getLogger("robotad.agent.tools")

#: At most this many tool bodies of one round run at the same time.
MAX_CONCURRENT_TOOLS = 5

Commit = Callable[[Message], Awaitable[None]]
_SlotState = Literal["waiting", "admitting", "running", "done", "parked", "held", "interrupted"]


@dataclass(frozen=True)
class ParkedCall:
    """A call the gate parked, with the gate's reason."""

    call: ToolCall
    reason: str


@dataclass(eq=False)
class _Slot:
    """One call's progress. `resolved` is set once nothing more will happen to it in this
    round: it has a result (`message`), or it is parked or held."""

    call: ToolCall
    state: _SlotState = "waiting"
    message: Message | None = None
    committed: bool = False
    resolved: trio.Event = field(default_factory=trio.Event)

    def finish(self, message: Message) -> None:
        self.message = message
        self.state = "done"
        self.resolved.set()


class ToolRound:
    """Drives one round's calls; `run` once, then read `park`/`held`, or `close_after_abort`."""

    def __init__(
        self,
        calls: Sequence[ToolCall],
        *,
        round_number: int,
        tools: Mapping[str, Tool],
        gate: ToolGate,
        ctx: ToolContext,
        commit: Commit,
        bus: EventBus | None,
        max_concurrent: int = MAX_CONCURRENT_TOOLS,
    ) -> None:
        self._slots = [_Slot(call) for call in calls]
        self._round = round_number
        self._tools = tools
        self._gate = gate
        self._ctx = ctx
        self._commit = commit
        self._bus = bus
        self._limiter = trio.CapacityLimiter(max_concurrent)
        self._failure: Exception | None = None
        self._nursery: trio.Nursery | None = None
        self.park: ParkedCall | None = None

    @property
    def held(self) -> tuple[ToolCall, ...]:
        """Calls after the parked one, never started (empty unless parked)."""
        return tuple(slot.call for slot in self._slots if slot.state == "held")

    async def run(self) -> None:
        """Run the round to completion or to a park. Raises the gate's or commit's exception;
        propagates cancellation once every started body has settled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._admit_in_order)
            await self._commit_in_order()
        if self._failure is not None:
            raise self._failure

    async def close_after_abort(self) -> tuple[ToolCall, ...]:
        """After an aborted `run`: commit every uncommitted call's result in call order (an
        interrupted failure for calls that produced none). Returns the calls left open — the
        parked and held calls of a parked round, else none. Must not run under the cancelled
        scope; a commit failure propagates."""
        left_open: list[ToolCall] = []
        for slot in self._slots:
            if slot.committed:
                continue
            if slot.state in ("parked", "held"):
                left_open.append(slot.call)
                continue
            message = slot.message if slot.message is not None else _interrupted(slot)
            await self._commit(message)
            slot.committed = True
        return tuple(left_open)

    # -- the two halves of `run` ------------------------------------------------------------

    async def _commit_in_order(self) -> None:
        for slot in self._slots:
            await slot.resolved.wait()
            if slot.message is None:
                continue
            try:
                await self._commit(slot.message)
            except Exception as exc:
                self._fail(exc)
                return
            slot.committed = True

    async def _admit_in_order(self) -> None:
        try:
            for index, slot in enumerate(self._slots):
                tool = self._runnable(slot.call)
                if isinstance(tool, str):
                    self._gate.reject(slot.call, tool)
                    slot.finish(_failed(slot.call, tool))
                    continue
                if not await self._admit(slot, tool):
                    for later in self._slots[index + 1 :]:
                        later.state = "held"
                        later.resolved.set()
                    return
        except Exception as exc:
            self._fail(exc)

    async def _admit(self, slot: _Slot, tool: Tool) -> bool:
        """Admit one call; returns False when it parked (admission of the round stops)."""
        await self._limiter.acquire_on_behalf_of(slot)
        started = False
        try:
            slot.state = "admitting"
            decision = await self._gate.admit(slot.call, tool)
            if isinstance(decision, Admit):
                slot.state = "running"
                assert self._nursery is not None
                ctx = self._ctx
                if decision.real_path is not None:
                    ctx = msgspec.structs.replace(ctx, real_path=decision.real_path)
                self._nursery.start_soon(self._run_body, slot, tool, decision.arguments, ctx)
                started = True
            elif isinstance(decision, Refuse):
                slot.finish(_failed(slot.call, decision.reason))
            elif isinstance(decision, Park):
                slot.state = "parked"
                self.park = ParkedCall(slot.call, decision.reason)
                slot.resolved.set()
                return False
            else:
                raise TypeError(f"gate returned {type(decision).__name__}, not an Admission")
        finally:
            if not started:
                self._limiter.release_on_behalf_of(slot)
        return True

    async def _run_body(
        self, slot: _Slot, tool: Tool, arguments: dict[str, Any], ctx: ToolContext
    ) -> None:
        try:
            try:
                typed = tool.decode_arguments(arguments)
            except Exception as exc:
                slot.finish(_failed(slot.call, _argument_problem(slot.call, exc)))
                return
            try:
                result = await tool.run(typed, ctx)
            except Exception as exc:
                logger.warning("tool %s raised %s", slot.call.name, type(exc).__name__)
                result = ToolResult(False, f"{slot.call.name} failed: {type(exc).__name__}: {exc}")
            except BaseException:
                slot.state = "interrupted"
                self._observe("cancelled")
                raise
            self._observe("ok" if result.ok else "failed")
            result = _encodable(result)
            try:
                settled = await self._gate.settle(slot.call, tool, result)
            except Exception as exc:
                self._fail(exc)
                return
            except BaseException:
                slot.state = "interrupted"
                raise
            slot.finish(_result_message(slot.call, settled))
            try:  # the result stands: an abort from here on only cuts PostToolUse short
                await self._gate.after_settle(slot.call, tool, result)
            except Exception as exc:
                self._fail(exc)
        finally:
            self._limiter.release_on_behalf_of(slot)

    # -- helpers ----------------------------------------------------------------------------

    def _runnable(self, call: ToolCall) -> Tool | str:
        """The call's tool, or the reason the call cannot run at all."""
        tool = self._tools.get(call.name)
        if tool is None:
            if (reason := missing_tool_reason(self._tools, call.name)) is not None:
                return reason
            known = ", ".join(sorted(self._tools)) or "none"
            return f"unknown tool {call.name!r} (available tools: {known})"
        if isinstance(call.raw_arguments, str):
            return f"the arguments of {call.name} are not valid JSON; nothing was run"
        try:
            tool.decode_arguments(call.arguments)
        except Exception as exc:
            return _argument_problem(call, exc)
        return tool

    def _fail(self, exc: Exception) -> None:
        """Record the round's failure and stop everything still running in it."""
        if self._failure is None:
            self._failure = exc
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    def _observe(self, outcome: ObservedOutcome) -> None:
        if self._bus is not None:
            self._bus.publish(ToolBodyObserved(utc_now(), self._round, outcome))


def _argument_problem(call: ToolCall, exc: Exception) -> str:
    if isinstance(exc, ArgumentError):
        return str(exc)
    return f"invalid arguments for {call.name}: {type(exc).__name__}"


def _failed(call: ToolCall, reason: str) -> Message:
    return Message.tool(call.id, call.name, reason, ok=False)


def _written_out(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else "\ufffd"


def _encodable(result: ToolResult) -> ToolResult:
    """`result` with its text UTF-8 can encode (see the module doc, step 3)."""
    if LONE_SURROGATE.search(result.content) is None:
        return result
    return ToolResult(result.ok, LONE_SURROGATE.sub(_written_out, result.content), result.metadata)


def _result_message(call: ToolCall, result: ToolResult) -> Message:
    return Message.tool(call.id, call.name, result.content, ok=result.ok, extra=result.metadata)


def _interrupted(slot: _Slot) -> Message:
    if slot.state == "interrupted":
        text = f"interrupted: the turn was aborted while {slot.call.name} was running"
    else:
        text = f"not run: the turn was aborted before {slot.call.name} started"
    message = Message.tool(slot.call.id, slot.call.name, text, ok=False, extra={"aborted": True})
    message.state = "interrupted"
    return message
