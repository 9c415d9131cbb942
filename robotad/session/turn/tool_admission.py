"""The Session's tool gate: what decides each runnable tool call before its body starts.

`SessionToolGate` implements the loop's `ToolGate` port for one turn (or one direct call).
`admit` decides a call in this order:

1. the path argument is canonicalised against the session's cwd, so the enforcer, the hooks,
   the log and the tool all see one spelling (G-116, G-117) — except a ``tool-result:``
   reference given to a tool that reads stored results (Read), which names no file;
2. the permission enforcer: deny rules, ask rules, allow rules, the mode table (G-111, G-112);
3. in auto mode, for an ``ask`` that needs no person, the auto-mode gate and its classifier
   (G-119, G-120; after a denial streak it hands the call back to a person, G-123);
4. PreToolUse hooks, fail-closed: a deny blocks the call, an ``ask`` sends an allowed call to
   a person; an ``allow`` never overrides an ask — a hook cannot grant what a person must;
5. the PermissionDecision hook and a ``permission_decided`` event for each decision (G-128);
6. for ``ask``: the `Approver` — a live permission handler in ``run``, a refusal where nobody
   can be asked (no handler, G-118; a direct invocation, G-070), or a park in a recoverable run
   (where a saved approval answers its own call only, re-checked by steps 2–5, G-081).

Reading back a stored result is not judged by step 2 or 3: the reference is no path, and
what it names is a result of a call this session already admitted — the reference is what the
conversation shows in its place (G-200). It is allowed in every mode, whatever the rules (a
PreToolUse hook still sees it and may block it); the store gives a session only its own
results (and its source's, for a fork), so any other reference reads as unknown.

A continuation passes the calls a person already denied: they are refused before anything else,
however permissive the policy has become since (G-083). `before_effect` (the journal's
``effect_started``) is awaited last, right before a body is admitted.

A refusal — by a rule, the mode, the classifier, a hook or a person — is a failed tool result,
never an exception (G-202, G-203), and is recorded with `note_denial`. An abort while a live
approval waits resolves it as a denial: the call never runs (G-066).

`settle` spills a result longer than `spill_threshold` characters to the spill store, so the
model reads an opaque ``tool-result:`` reference instead (G-195), and reports the call finished;
`after_settle` then runs PostToolUse, which an abort cuts short without undoing the result.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, Protocol

import trio

from protocol.errors import NotAllowed
from protocol.shapes import ApprovalRequest, ToolCall, new_id
from robotad.agent.gate import Admission, Admit, Park, Refuse
from robotad.agent.tool import Tool, ToolResult
from robotad.session.hooks.lifecycle import HookLifecycle
from robotad.session.permissions.classifier import AutoModeGate
from robotad.session.permissions.enforcer import PermissionEnforcer
from robotad.session.ports import ApprovalAnswer, PermissionHandler
from robotad.session.reporting import SessionReporter
from robotad.session.turn.work import TurnContext
from robotad.storage.spill import REFERENCE_PREFIX, SpillError, SpillStore

__all__ = [
    "DEFAULT_SPILL_THRESHOLD",
    "READS_BACK",
    "Approver",
    "GatePolicy",
    "GateServices",
    "LiveApprover",
    "RefusingApprover",
    "SessionToolGate",
]

logger = logging.getLogger("robotad.session.gate")

#: Tool results longer than this (characters) go to the spill store.
DEFAULT_SPILL_THRESHOLD: Final = 64 * 1024

#: The reason given for reading back a stored result (see the module doc).
READS_BACK: Final = "reads back a result this session stored (no file is read)"

Outcome = Literal["allow", "ask", "deny"]


class Approver(Protocol):
    """Answers a call that needs a person: `Admit` (with the arguments to run), `Refuse`, or
    `Park` (the request is saved for a later answer). Cancellation means "no answer"."""

    async def approve(
        self, call: ToolCall, arguments: dict[str, Any], reason: str, *, rules_reason: bool = True
    ) -> Admission:
        """`rules_reason`: `reason` is the rules' and mode's own (the same action and rules
        give the same words), not a hook's or the classifier's free text."""
        ...


class RefusingApprover:
    """Nobody can be asked here: the call is denied at once (G-070, G-118)."""

    def __init__(self, why: str = "no one is available to approve it") -> None:
        self.why = why

    async def approve(
        self, call: ToolCall, arguments: dict[str, Any], reason: str, *, rules_reason: bool = True
    ) -> Admission:
        return Refuse(f"{call.name} needs approval ({reason}) and {self.why}; denied")


class LiveApprover:
    """Asks the session's permission handler and waits for its answer. An answer arriving
    after the turn was aborted is a denial, whatever it says (G-066)."""

    def __init__(
        self, handler: PermissionHandler, enforcer: PermissionEnforcer, turn: TurnContext
    ) -> None:
        self._handler = handler
        self._enforcer = enforcer
        self._turn = turn

    async def approve(
        self, call: ToolCall, arguments: dict[str, Any], reason: str, *, rules_reason: bool = True
    ) -> Admission:
        request = ApprovalRequest(
            request_id=new_id("req-"),
            execution_id=self._turn.turn_id or "direct",
            tool=call.name,
            arguments=dict(arguments),
            reason=reason,
        )
        try:
            answer = await self._handler(request)
        except Exception as exc:
            logger.warning("permission handler raised %s; denied", type(exc).__name__)
            return Refuse(f"the approval could not be obtained ({type(exc).__name__}); denied")
        if self._turn.abort.aborted:
            return Refuse("the turn was aborted while waiting for approval; denied")
        if isinstance(answer, bool):
            answer = ApprovalAnswer(answer)
        if not answer.approved:
            return Refuse(answer.reason or f"{call.name} was denied by the user")
        if answer.remember != "once":
            try:
                await self._enforcer.remember(call.name, arguments, answer.remember)
            except NotAllowed as exc:
                return Refuse(f"the approval was rejected: {exc.message}")
        return Admit(dict(arguments))


@dataclass(frozen=True)
class GatePolicy:
    """How one turn's gate treats what needs a person. `denied` maps the calls a person
    already denied to the reason (binding, whatever the policy says now); `before_effect` is
    awaited right before a body is admitted (a recoverable execution's ``effect_started``)."""

    approver: Approver
    denied: Mapping[str, str] = field(default_factory=dict)
    before_effect: Callable[[ToolCall], Awaitable[None]] | None = None


@dataclass
class GateServices:
    """The session-wide collaborators every gate of the session shares."""

    session_id: str
    cwd: Path
    enforcer: PermissionEnforcer
    auto_gate: AutoModeGate | None
    lifecycle: HookLifecycle
    reporter: SessionReporter
    spill: SpillStore | None = None
    spill_threshold: int = DEFAULT_SPILL_THRESHOLD


class SessionToolGate:
    """The gate of one turn (or one direct invocation); see the module doc."""

    def __init__(self, services: GateServices, turn: TurnContext, policy: GatePolicy) -> None:
        self._s = services
        self._turn = turn
        self._approver = policy.approver
        self._denied = policy.denied
        self._before_effect = policy.before_effect
        #: Effective arguments of admitted calls, for their PostToolUse input.
        self._admitted: dict[str, dict[str, Any]] = {}

    async def admit(self, call: ToolCall, tool: Tool) -> Admission:
        s = self._s
        stored = _reads_stored_result(call, tool)
        args = (
            dict(call.arguments)
            if stored
            else s.enforcer.canonical_arguments(call.name, call.arguments)
        )
        s.reporter.tool_call(call.id, call.name, args)
        if call.id in self._denied:
            return await self._refuse(call, args, self._denied[call.id])
        outcome, reason, real_path, rules_reason = (
            ("allow", READS_BACK, None, True) if stored else await self._judged(call, args)
        )
        if outcome == "deny":
            return await self._refuse(call, args, reason)
        verdict_of_hooks = await s.lifecycle.pre_tool_use(self._turn, call.id, call.name, args)
        if verdict_of_hooks.outcome == "deny":
            why = verdict_of_hooks.reason or "no reason given"
            return await self._refuse(call, args, f"blocked by a PreToolUse hook: {why}")
        if verdict_of_hooks.outcome == "ask" and outcome == "allow":
            outcome = "ask"
            reason = verdict_of_hooks.reason or "a PreToolUse hook asks for approval"
            rules_reason = False
        if outcome == "ask":
            await self._decided(call, args, "ask", reason)
            try:
                admission = await self._approver.approve(
                    call, args, reason, rules_reason=rules_reason
                )
            except trio.Cancelled:
                self._note_refused(call, args, "aborted while waiting for approval")
                raise
            if isinstance(admission, Refuse):
                return await self._refuse(call, args, admission.reason)
            if isinstance(admission, Park):
                return admission
            args, reason = admission.arguments, "approved"
        await self._decided(call, args, "allow", reason)
        if self._before_effect is not None:
            await self._before_effect(call)
        self._admitted[call.id] = args
        s.reporter.tool_started(self._turn.turn_id, call.id, call.name, args)
        return Admit(args, real_path=real_path)

    async def settle(self, call: ToolCall, tool: Tool, result: ToolResult) -> ToolResult:
        result = await self._spilled(result)
        self._s.reporter.tool_finished(
            self._turn.turn_id, call.id, call.name, result.ok, result.content
        )
        return result

    async def after_settle(self, call: ToolCall, tool: Tool, result: ToolResult) -> None:
        """PostToolUse, with the body's whole result and the call's effective arguments. An
        abort cuts it short; the call's result is settled already and stands."""
        args = self._admitted.pop(call.id, call.arguments)
        await self._s.lifecycle.post_tool_use(
            self._turn, call.id, call.name, args, result.ok, result.content
        )

    def reject(self, call: ToolCall, reason: str) -> None:
        """A call that could not run at all finishes failed where clients watch: a
        ``tool_finished`` (it never started, so no ``tool_started``) with the reason."""
        self._s.reporter.tool_finished(self._turn.turn_id, call.id, call.name, False, reason)

    # -- helpers ----------------------------------------------------------------------------

    async def _judged(
        self, call: ToolCall, args: dict[str, Any]
    ) -> tuple[Outcome, str, str | None, bool]:
        """The rules and the mode on the call, and in auto mode the classifier on an ask
        it may answer: the outcome, its reason, the path as judged (`Admit.real_path`) and
        whether the reason is the rules' own (not the classifier's words)."""
        s = self._s
        decision = s.enforcer.evaluate(call.name, args)
        outcome: Outcome = decision.outcome
        reason = decision.reason
        if (
            outcome == "ask"
            and decision.classifier_eligible
            and s.auto_gate is not None
            and s.enforcer.mode == "auto"
        ):
            verdict = await s.auto_gate.decide(
                session_id=s.session_id, cwd=s.cwd, tool_name=call.name, tool_input=args
            )
            if verdict.outcome != "ask-person":
                outcome = verdict.outcome
            return outcome, verdict.reason, decision.real_path, False
        return outcome, reason, decision.real_path, True

    async def _decided(
        self, call: ToolCall, args: dict[str, Any], decision: Outcome, reason: str
    ) -> None:
        self._s.reporter.permission_decided(
            self._turn.turn_id, call.id, call.name, decision, reason
        )
        await self._s.lifecycle.permission_decision(
            self._turn, call.id, call.name, args, decision, reason
        )

    async def _refuse(self, call: ToolCall, args: dict[str, Any], reason: str) -> Refuse:
        self._s.enforcer.note_denial(call.name, args, reason)
        await self._decided(call, args, "deny", reason)
        return Refuse(reason)

    def _note_refused(self, call: ToolCall, args: dict[str, Any], reason: str) -> None:
        """A refusal reported without awaiting anything (the turn is being cancelled)."""
        self._s.enforcer.note_denial(call.name, args, reason)
        self._s.reporter.permission_decided(self._turn.turn_id, call.id, call.name, "deny", reason)

    async def _spilled(self, result: ToolResult) -> ToolResult:
        """`result`, or its reference in the spill store when it is too long to show; cut
        short, saying why, when the store refuses it.

        The write runs on a worker thread (`SpillStore.put`), shielded: the body has finished,
        so its result stands (decision 45) — an abort while it is written is met once it is
        whole and referenced, never with a half-written file or a reference to none."""
        s = self._s
        size = len(result.content)
        if s.spill is None or size <= s.spill_threshold:
            return result
        metadata = {**result.metadata, "spilled": True, "chars": size}
        try:
            with trio.CancelScope(shield=True):
                reference = await s.spill.put(result.content)
        except SpillError as exc:
            logger.warning("tool result not spilled (%s); truncated instead", exc)
            kept = result.content[: s.spill_threshold]
            note = (
                f"\n[truncated: {size - s.spill_threshold} more characters not shown; "
                f"the whole result could not be stored: {exc}]"
            )
            return ToolResult(result.ok, kept + note, {**metadata, "spilled": False})
        return ToolResult(result.ok, reference, metadata)


def _reads_stored_result(call: ToolCall, tool: Tool) -> bool:
    """Whether `call` gives a ``tool-result:`` reference to a tool that reads stored results."""
    profile = tool.profile
    key = profile.argument_key
    value = call.arguments.get(key) if key is not None else None
    return profile.stored_results and isinstance(value, str) and value.startswith(REFERENCE_PREFIX)
