"""The daemon's session layer (docs/architecture.md): live sessions, idempotent turns, event
fan-out, idle unload, and the session methods of PROTOCOL §5.

- `SessionManager` (manager.py) — load/create/close/delete/list, idle unload, shutdown drain;
- `SessionOperations` (operations.py) — what each session method does;
- `SessionAssembler` (assembly.py) — configuration and records into Sessions; `LiveSession`
  (live.py), `fork_history` (fork.py), `ProjectRules` (project_rules.py), SessionInfo
  (info.py), `KeyedLocks` (keyed_locks.py);
- `register_session_methods` (methods.py) — the router registrations;
- `session_application` (app.py) — the `ApplicationFactory` ``robotad`` serves by default;
- `EventHub` (events.py), `TurnRegistry` (turns.py) — seq + replay buffer, turnId registry.
"""

from __future__ import annotations

from robotad.daemon.app import (
    SessionApplication,
    session_application,
    session_application_factory,
)
from robotad.daemon.manager import DEFAULT_IDLE_UNLOAD_SECONDS, SessionManager
from robotad.daemon.methods import register_session_methods
from robotad.daemon.operations import SessionOperations

__all__ = [
    "DEFAULT_IDLE_UNLOAD_SECONDS",
    "SessionApplication",
    "SessionManager",
    "SessionOperations",
    "register_session_methods",
    "session_application",
    "session_application_factory",
]
