"""What a Session is built with: the user's choices and the host's services, each one value.

A Session is constructed from its working directory, provider, tools and where it starts from
(id, history, turn count, start or resume), plus two frozen values passed down whole instead of
a long list of keyword arguments re-threaded through every layer:

- `SessionOptions`: what the user chose for this session (its system prompt, permission rules
  and mode, compaction threshold, context window, idle timeout, round limit, trace, sandbox) —
  plain data, recorded in the session's record;
- `SessionServices`: what the host (the daemon, a test, an embedding program) provides — the
  ports (store, logger, event sink, live approvals, project-rule persistence, spill store) and
  the shared machinery (hooks, classifier, sensitive paths, extra tool source). Every service is
  optional: an absent port is a Null Object (G-212).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from robotad.sandbox.policy import UNCONFINED, SandboxPolicy
from robotad.session.context_window import AUTO_COMPACT_THRESHOLD
from robotad.session.hooks.runner import HookRunner
from robotad.session.permissions.classifier import Classifier
from robotad.session.permissions.enforcer import PersistRule
from robotad.session.permissions.sensitive_paths import SensitivePaths
from robotad.session.ports import EventSink, PermissionHandler, SessionStorePort
from robotad.session.tool_table import ToolSource
from robotad.storage.session_log import SessionLogger
from robotad.storage.spill import SpillStore

__all__ = [
    "DEFAULT_OPTIONS",
    "NO_SERVICES",
    "SessionOptions",
    "SessionServices",
]


@dataclass(frozen=True, kw_only=True)
class SessionOptions:
    """The user's choices for one session. Validated when the Session is built: malformed
    permission rules, an unknown mode or a threshold out of range are refused then."""

    #: The first message of a new conversation (none: no system message).
    system_message: str | None = None
    #: The session's own permission rules by kind (``allow``/``ask``/``deny``).
    permissions: Mapping[str, Sequence[str]] | None = None
    permission_mode: str = "default"
    auto_compact_threshold: float | Literal[False] = AUTO_COMPACT_THRESHOLD
    #: Tokens; None: the provider's, else the default window.
    context_window: int | None = None
    #: Seconds a model call may stay silent; None: the provider's (PROTOCOL §10.2).
    idle_timeout: float | None = None
    #: The default round limit of a turn; None: no limit.
    round_cap: int | None = None
    #: The project-instruction files its system prompt was built with (None: not recorded).
    instructions: Sequence[str] | None = None
    #: Give every turn a W3C trace context its hooks see (G-136).
    trace: bool = False
    #: The compaction summary prompt; None: the built-in one.
    summary_template: str | None = None
    #: How the tools confine model-run commands (the tools are built with it).
    sandbox: SandboxPolicy = UNCONFINED


@dataclass(frozen=True, kw_only=True)
class SessionServices:
    """What the host provides one session; see the module doc."""

    store: SessionStorePort | None = None
    logger: SessionLogger | None = None
    event_sink: EventSink | None = None
    #: Asked about a live turn's calls that need a person; None: such calls are denied (G-118).
    permission_handler: PermissionHandler | None = None
    persist_project_rule: PersistRule | None = None
    spill: SpillStore | None = None
    hooks: HookRunner | None = None
    classifier: Classifier | None = None
    sensitive_paths: SensitivePaths | None = None
    #: Tools that come and go (MCP servers), looked up at every turn.
    tool_source: ToolSource | None = None
    #: Retire a settled execution journal once its outcome is saved (the daemon hosts them).
    discard_settled_journals: bool = False


#: Every choice at its default.
DEFAULT_OPTIONS = SessionOptions()
#: No port and no shared machinery: a session on its own (every port a Null Object).
NO_SERVICES = SessionServices()
