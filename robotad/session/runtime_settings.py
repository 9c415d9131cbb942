"""The runtime settings of a session: permission mode and rules, tools, provider, effort.

`RuntimeSettings` is the part of the Session facade that reads and changes configuration
between turns; `robotad.session.session.Session` inherits it. Nothing here runs a turn.
Changes that would disturb a running turn or a waiting execution (swapping the provider) are
refused while anything holds the session.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocol.errors import ExecutionPending, SessionBusy
from robotad.agent.provider import Provider
from robotad.agent.tool import Tool, ToolProfile
from robotad.session.context_window import DEFAULT_CONTEXT_WINDOW
from robotad.session.conversation import Conversation
from robotad.session.permissions.classifier import AutoModeGate
from robotad.session.permissions.enforcer import (
    Denial,
    ModeGuard,
    PermissionEnforcer,
    parse_permission_mode,
)
from robotad.session.recovery.recoverable import RecoverableExecutions
from robotad.session.registered_tool import register
from robotad.session.turn.claim import ClaimToken, TurnClaim

__all__ = ["RuntimeSettings"]


class RuntimeSettings:
    """Settings accessors over the collaborators the Session composes."""

    session_id: str
    model_effort: str | None
    _provider: Provider
    _context_window: int | None
    _tools: dict[str, Tool]
    _profiles: dict[str, ToolProfile]
    _enforcer: PermissionEnforcer
    _auto_gate: AutoModeGate | None
    _claim: TurnClaim
    _conversation: Conversation
    _executions: RecoverableExecutions

    # -- provider ---------------------------------------------------------------------------

    @property
    def provider_name(self) -> str:
        return self._provider.name

    @property
    def model(self) -> str:
        return self._provider.model

    def get_model_effort(self) -> str:
        """The model effort, "auto" when unset (the provider picks its default, G-050)."""
        return self.model_effort or "auto"

    def get_provider(self) -> Provider:
        return self._provider

    def swap_provider(self, provider: Provider) -> None:
        """Use `provider` from the next turn on (refused while anything runs). The caller
        closes the previous provider."""
        self._refuse_while_running()
        self._provider = provider
        if self._context_window is None:
            window = provider.context_window or DEFAULT_CONTEXT_WINDOW
            self._conversation.tracker.max_tokens = window

    # -- tools ------------------------------------------------------------------------------

    def add_tools(self, tools: Sequence[Tool]) -> None:
        """Register more tools; they are gated like every other (G-211) from the next call."""
        for tool in tools:
            self._tools[tool.name] = register(tool)
            self._profiles[tool.name] = tool.profile

    # -- permissions ------------------------------------------------------------------------

    @property
    def permission_mode(self) -> str:
        return self._enforcer.mode

    def set_permission_mode(self, mode: str) -> str:
        """Enter `mode`; `TransitionRefused` when the guard refuses or auto mode has no
        classifier (G-105, G-107), `InvalidSetting` for an unknown mode. Leaving auto mode
        forgets the classifier's denial streak."""
        previous = self._enforcer.mode
        new = self._enforcer.set_mode(mode)
        if previous == "auto" and new != "auto" and self._auto_gate is not None:
            self._auto_gate.reset()
        return new

    def set_mode_guard(self, guard: ModeGuard | None) -> None:
        """Install (None: remove) the synchronous mode-transition guard (G-105, G-106)."""
        self._enforcer.set_mode_guard(guard)

    def rules(self) -> dict[str, list[str]]:
        return self._enforcer.rules()

    def add_rule(self, rule: str, kind: str) -> dict[str, list[str]]:
        """Add a session-scoped rule; `InvalidSetting` when malformed."""
        return self._enforcer.add_rule(rule, kind)

    async def add_project_rule(self, rule: str, kind: str) -> dict[str, list[str]]:
        """Persist through `persist_project_rule`, then apply; `NotAllowed` and nothing added
        without one or when it fails (G-114)."""
        return await self._enforcer.add_project_rule(rule, kind)

    def take_back_permissions(self, mode: str, rules: dict[str, list[str]]) -> None:
        """Undo a mode or rule change whose save was refused: back to `mode` and `rules`, as
        `permission_mode` and `rules()` gave them before it."""
        self._enforcer.take_back(parse_permission_mode(mode), rules)

    def recent_denials(self) -> list[Denial]:
        """Calls refused in this session, newest first."""
        return self._enforcer.recent_denials()

    # -- guards -----------------------------------------------------------------------------

    @property
    def current_turn_id(self) -> str | None:
        holder = self._claim.holder
        return holder.turn_id if holder is not None else None

    @property
    def claim_holder(self) -> ClaimToken | None:
        """What holds the session now (its kind and turn id), if anything."""
        return self._claim.holder

    def _refuse_while_running(self) -> None:
        """For edits between turns: refused while anything runs or an execution waits."""
        holder = self._claim.holder
        if holder is not None:
            raise SessionBusy(self.session_id, holder.turn_id, holder.kind)
        pending = self._executions.pending
        if pending is not None:
            raise ExecutionPending(self.session_id, pending.execution_id)
