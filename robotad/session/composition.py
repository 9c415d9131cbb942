"""How a Session's collaborators are built and wired together (one place, one direction).

`compose` builds every collaborator of one session from its construction inputs — the user's
`SessionOptions`, the host's `SessionServices` — and the `SessionCallbacks` into the Session
itself (the current provider and effort, saving, counting a completed turn), and returns them
as `SessionParts`. Each collaborator gets only what it uses; nothing here
holds state of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from protocol.shapes import Message
from robotad.agent.observations import EventBus
from robotad.agent.provider import Provider, provider_idle_timeout
from robotad.agent.tool import Tool
from robotad.session.compaction.procedure import CompactionProcedure
from robotad.session.context_window import DEFAULT_CONTEXT_WINDOW, ContextTracker
from robotad.session.conversation import Conversation
from robotad.session.hooks.lifecycle import HookLifecycle
from robotad.session.hooks.runner import HookRunner
from robotad.session.permissions.classifier import AutoModeGate
from robotad.session.permissions.enforcer import PermissionEnforcer
from robotad.session.ports import SessionCallbacks
from robotad.session.recovery.recoverable import RecoverableExecutions
from robotad.session.reporting import SessionReporter
from robotad.session.settings import SessionOptions, SessionServices
from robotad.session.tool_table import ToolTable
from robotad.session.turn.claim import TurnClaim
from robotad.session.turn.runner import TurnRunner, TurnServices
from robotad.session.turn.tool_admission import GateServices

__all__ = ["SessionCallbacks", "SessionParts", "compose"]


@dataclass(frozen=True)
class SessionParts:
    """Every collaborator of one session."""

    tool_table: ToolTable
    bus: EventBus
    enforcer: PermissionEnforcer
    auto_gate: AutoModeGate | None
    claim: TurnClaim
    reporter: SessionReporter
    lifecycle: HookLifecycle
    conversation: Conversation
    compaction: CompactionProcedure
    gate: GateServices
    runner: TurnRunner
    executions: RecoverableExecutions


def compose(
    *,
    session_id: str,
    cwd: Path,
    provider: Provider,
    tools: Sequence[Tool],
    history: Sequence[Message],
    options: SessionOptions,
    services: SessionServices,
    callbacks: SessionCallbacks,
) -> SessionParts:
    """Build one session's collaborators. Raises `InvalidSetting` for malformed permission
    rules or mode and `TransitionRefused` for auto mode without a classifier."""
    table = ToolTable(tools, services.tool_source)
    enforcer = _enforcer(session_id, cwd, table, options, services)
    auto_gate = AutoModeGate(services.classifier) if services.classifier is not None else None
    reporter = SessionReporter(session_id, services.logger, services.event_sink)
    lifecycle = HookLifecycle(
        bound_hooks(services.hooks, cwd, session_id),
        reporter,
        model=lambda: callbacks.provider().model,
        effort=callbacks.effort,
    )
    conversation = _conversation(history, options, provider, reporter)
    idle_timeout = effective_idle_timeout(options, provider)
    compaction = CompactionProcedure(
        session_id,
        conversation,
        lifecycle,
        reporter,
        callbacks,
        template=options.summary_template,
        idle_timeout=idle_timeout,
    )
    gate = GateServices(session_id, cwd, enforcer, auto_gate, lifecycle, reporter, services.spill)
    bus = EventBus()
    runner = TurnRunner(
        TurnServices(
            session_id=session_id,
            cwd=cwd,
            conversation=conversation,
            reporter=reporter,
            lifecycle=lifecycle,
            gate=gate,
            compaction=compaction,
            tools=table.tools,
            refresh_tools=table.refresh if services.tool_source is not None else None,
            bus=bus,
            callbacks=callbacks,
            idle_timeout=idle_timeout,
        )
    )
    executions = RecoverableExecutions(
        session_id,
        str(cwd),
        conversation,
        reporter,
        runner,
        callbacks,
        discard_settled=services.discard_settled_journals,
        round_cap=options.round_cap,
    )
    return SessionParts(
        tool_table=table,
        bus=bus,
        enforcer=enforcer,
        auto_gate=auto_gate,
        claim=TurnClaim(session_id),
        reporter=reporter,
        lifecycle=lifecycle,
        conversation=conversation,
        compaction=compaction,
        gate=gate,
        runner=runner,
        executions=executions,
    )


def _enforcer(
    session_id: str,
    cwd: Path,
    table: ToolTable,
    options: SessionOptions,
    services: SessionServices,
) -> PermissionEnforcer:
    """The session's permission enforcer over its tools' profiles (validates the rules)."""
    return PermissionEnforcer(
        cwd,
        profiles=table.profiles,
        rules=options.permissions,
        mode=options.permission_mode,
        session_id=session_id,
        classifier_configured=services.classifier is not None,
        persist_project_rule=services.persist_project_rule,
        sensitive=services.sensitive_paths,
    )


def effective_idle_timeout(options: SessionOptions, provider: Provider) -> float:
    """Seconds a model call may stay silent: the session's own, else its provider's
    (PROTOCOL §10.2; every session has one)."""
    if options.idle_timeout is not None:
        return options.idle_timeout
    return provider_idle_timeout(provider)


def _conversation(
    history: Sequence[Message],
    options: SessionOptions,
    provider: Provider,
    reporter: SessionReporter,
) -> Conversation:
    """The history (a new one starts with the system message, if any) and its tracker."""
    messages = list(history)
    if not messages and options.system_message:
        messages.append(Message.system(options.system_message))
    window = options.context_window or provider.context_window or DEFAULT_CONTEXT_WINDOW
    return Conversation(messages, reporter, ContextTracker(window))


def bound_hooks(hooks: HookRunner | None, cwd: Path, session_id: str) -> HookRunner | None:
    """The runner for this session: its cwd and id in every hook input (G-103). A runner
    built for another cwd or id is copied, never changed (it may be shared)."""
    if hooks is None or (hooks.cwd == cwd and hooks.session_id == session_id):
        return hooks
    return HookRunner(
        hooks.config,
        cwd=cwd,
        session_id=session_id,
        executors=hooks.executors,
        default_timeout=hooks.default_timeout,
    )
