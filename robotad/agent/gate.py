"""The tool-gate port: what the loop asks before a tool body runs, and tells after it ran.

The Session implements it with its permission enforcer, PreToolUse/PostToolUse hooks, approval
journal and spill store; the loop knows none of that. The loop consults the gate only for calls
that could run at all — a known tool whose argument JSON parsed and whose arguments decode.
Unknown tools, unparseable argument text and arguments the tool refuses become failed tool
results without asking anyone (nobody should be asked to approve a call that cannot run).

Decisions:

- `Admit(arguments, real_path)`: run the body with these (possibly canonicalised or
  hook-rewritten) arguments; the loop decodes them again with the tool before running, and
  hands the body the real path the check judged (`ToolContext.real_path`).
- `Refuse(reason)`: the call gets a failed tool result carrying `reason`, paired with it in
  history — never an exception (G-202, G-203).
- `Park(reason)`: a person must decide and none is live (a checkpointed approval whose request
  the gate has already saved). The loop starts no further call of that round, lets running
  calls settle, commits their results and returns a parked outcome with the round left open.

Calls are admitted one at a time, in call order (so a live approver is asked one question at a
time), and a call is admitted only once a concurrency slot is free: `Admit` means the body
starts now, unless the turn is aborted first.

An exception raised by `admit`, `settle` or `after_settle` is the gate's own failure
(typically a journal write) and propagates out of the turn; it is never turned into a tool
result. A cancelled `admit` (an abort while waiting for a live approver) leaves the call not
run; an abort during `after_settle` leaves the settled result as it is.
"""

from __future__ import annotations

from typing import Any, Protocol

from msgspec import Struct

from protocol.shapes import ToolCall
from robotad.agent.tool import Tool, ToolResult

__all__ = ["Admission", "Admit", "AdmitAll", "Park", "Refuse", "ToolGate"]


class Admit(Struct, frozen=True):
    """Run the call's body with `arguments` (a JSON object for `Tool.decode_arguments`).
    `real_path`: the path argument with its symlinks resolved, as the permission check judged
    it (None when nothing was judged); the body gets it as `ToolContext.real_path`."""

    arguments: dict[str, Any]
    real_path: str | None = None


class Refuse(Struct, frozen=True):
    """Do not run it; the model reads `reason` as the call's failed result."""

    reason: str


class Park(Struct, frozen=True):
    """Do not run it now: the call waits for a person (its request is already saved)."""

    reason: str


Admission = Admit | Refuse | Park


class ToolGate(Protocol):
    async def admit(self, call: ToolCall, tool: Tool) -> Admission:
        """Decide one runnable call before its body starts."""
        ...

    async def settle(self, call: ToolCall, tool: Tool, result: ToolResult) -> ToolResult:
        """Told of an admitted body's result (a raised exception already turned into a failed
        result) before its tool message is committed; returns the result to commit — the place
        for spilling oversized output and telling clients the call finished. Not called for
        refused, parked, structurally failed or abort-interrupted calls."""
        ...

    async def after_settle(self, call: ToolCall, tool: Tool, result: ToolResult) -> None:
        """Told of a settled call's body result as the body returned it (before `settle`
        changed it): the place for PostToolUse hooks. The settled result stands whatever
        happens here — an abort cuts this short, it does not undo the call."""
        ...

    def reject(self, call: ToolCall, reason: str) -> None:
        """Told of a call that failed before admission — an unknown tool, arguments that are
        not JSON or that the tool refuses — whose failed result (`reason`) is committed; the
        gate never decided it, so this is the one word a client gets of it."""
        ...


class AdmitAll:
    """A gate that admits every call with its own arguments and changes no result.
    For tests and for trusted in-process use only: it enforces no permission."""

    async def admit(self, call: ToolCall, tool: Tool) -> Admission:
        return Admit(call.arguments)

    async def settle(self, call: ToolCall, tool: Tool, result: ToolResult) -> ToolResult:
        return result

    async def after_settle(self, call: ToolCall, tool: Tool, result: ToolResult) -> None:
        pass

    def reject(self, call: ToolCall, reason: str) -> None:
        pass
