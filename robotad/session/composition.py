"""How a Session's collaborators are built and wired together (one place, one direction).

`compose` builds every collaborator of one session from its construction inputs and a few
callbacks into the Session (the current provider and effort, saving, counting a completed turn),
and returns them as `SessionParts`. Each collaborator gets only what it uses; nothing here
holds state of its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from protocol.shapes import Message
from robotad.agent.observations import EventBus
from robotad.agent.provider import Provider
from robotad.agent.tool import Tool, ToolProfile
from robotad.session.compaction.procedure import CompactionProcedure
from robotad.session.context_window import DEFAULT_CONTEXT_WINDOW, ContextTracker
from robotad.session.conversation import Conversation
from robotad.session.hooks.lifecycle import HookLifecycle
from robotad.session.hooks.runner import HookRunner
from robotad.session.permissions.classifier import AutoModeGate, Classifier
from robotad.session.permissions.enforcer import PermissionEnforcer, PersistRule
from robotad.session.permissions.sensitive_paths import SensitivePaths
from robotad.session.ports import EventSink
from robotad.session.recovery.recoverable import RecoverableExecutions
from robotad.session.reporting import SessionReporter
from robotad.session.tool_table import ToolSource, ToolTable
from robotad.session.turn.claim import TurnClaim
from robotad.session.turn.runner import TurnRunner, TurnServices
from robotad.session.turn.tool_admission import GateServices
from robotad.storage.session_log import SessionLogger
from robotad.storage.spill import SpillStore

__all__ = ["SessionCallbacks", "SessionParts", "compose"]


@dataclass(frozen=True)
class SessionCallbacks:
    """What the collaborators read from, or tell, the Session itself."""

    provider: Callable[[], Provider]
    effort: Callable[[], str | None]
    save: Callable[[], Awaitable[bool]]
    persist: Callable[[], Awaitable[None]]
    completed: Callable[[], None]


@dataclass(frozen=True)
class SessionParts:
    """Every collaborator of one session."""

    tools: dict[str, Tool]
    profiles: dict[str, ToolProfile]
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
    callbacks: SessionCallbacks,
    tools: Sequence[Tool],
    history: Sequence[Message],
    system_message: str | None,
    permissions: Mapping[str, Sequence[str]] | None,
    permission_mode: str,
    hooks: HookRunner | None,
    classifier: Classifier | None,
    context_window: int | None,
    idle_timeout: float | None,
    logger: SessionLogger | None,
    event_sink: EventSink | None,
    persist_project_rule: PersistRule | None,
    spill: SpillStore | None,
    summary_template: str | None,
    discard_settled_journals: bool = False,
    sensitive_paths: SensitivePaths | None = None,
    tool_source: ToolSource | None = None,
) -> SessionParts:
    """Build one session's collaborators. Raises `InvalidParams` for malformed permission
    rules or mode and `TransitionRefused` for auto mode without a classifier."""
    table = ToolTable(tools, tool_source)
    tool_map, profiles = table.tools, table.profiles
    enforcer = PermissionEnforcer(
        cwd,
        profiles=profiles,
        rules=permissions,
        mode=permission_mode,
        session_id=session_id,
        classifier_configured=classifier is not None,
        persist_project_rule=persist_project_rule,
        sensitive=sensitive_paths,
    )
    auto_gate = AutoModeGate(classifier) if classifier is not None else None
    reporter = SessionReporter(session_id, logger, event_sink)
    lifecycle = HookLifecycle(
        bound_hooks(hooks, cwd, session_id),
        reporter,
        model=lambda: callbacks.provider().model,
        effort=callbacks.effort,
    )
    messages = list(history)
    if not messages and system_message:
        messages.append(Message.system(system_message))
    window = context_window or provider.context_window or DEFAULT_CONTEXT_WINDOW
    conversation = Conversation(messages, reporter, ContextTracker(window))
    compaction = CompactionProcedure(
        session_id=session_id,
        conversation=conversation,
        lifecycle=lifecycle,
        reporter=reporter,
        provider=callbacks.provider,
        save=callbacks.save,
        persist=callbacks.persist,
        template=summary_template,
        idle_timeout=idle_timeout,
    )
    gate = GateServices(session_id, cwd, enforcer, auto_gate, lifecycle, reporter, spill)
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
            tools=tool_map,
            refresh_tools=table.refresh if tool_source is not None else None,
            bus=bus,
            provider=callbacks.provider,
            effort=callbacks.effort,
            save=callbacks.save,
            persist=callbacks.persist,
            completed=callbacks.completed,
            idle_timeout=idle_timeout,
        )
    )
    executions = RecoverableExecutions(
        session_id=session_id,
        cwd=str(cwd),
        conversation=conversation,
        reporter=reporter,
        runner=runner,
        provider=callbacks.provider,
        persist=callbacks.persist,
        discard_settled=discard_settled_journals,
    )
    return SessionParts(
        tools=tool_map,
        profiles=profiles,
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
