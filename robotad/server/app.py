"""What the server serves: the application seam between transport and sessions.

The server knows nothing of sessions. Its caller composes an `Application`: a `Router` that
already holds the application's methods (the server adds the daemon methods to it), a count of
sessions for ``daemon/status``, what the ``serving`` log line says of it, and a shutdown hook
that drains turns before the daemon exits.
The session manager (robotad.daemon) is one such application; `StandaloneApplication` — no
sessions at all — is what the daemon runs until one is composed in, and what tests use.

An application is handed to the daemon by an `ApplicationFactory`: an async context manager
opened around the whole serving life, so the application can run background tasks in its own
nursery (idle unload, timers) and release everything on exit, after the server has drained.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from protocol.methods import DaemonSessionCounts
from protocol.peer import Router

__all__ = [
    "Application",
    "ApplicationFactory",
    "DaemonContext",
    "SessionCounts",
    "StandaloneApplication",
    "standalone_application",
]


#: ``daemon/status``'s ``sessions`` member, as the protocol defines it.
SessionCounts = DaemonSessionCounts


class Application(Protocol):
    """The application half of the daemon, as the server sees it."""

    @property
    def router(self) -> Router:
        """The router every connection's peer dispatches to (shared by all connections)."""
        ...

    def session_counts(self) -> SessionCounts:
        """Current session counts; called inline by ``daemon/status``, so it must not block."""
        ...

    def serving_fields(self) -> Mapping[str, str]:
        """What the daemon's ``serving`` log line says of the application, after the
        server's own fields (the session application: the config file it read, or that it
        found none). Called once, when the daemon serves."""
        ...

    async def on_shutdown(self, grace: float) -> None:
        """Let running turns finish within `grace` seconds, abort the rest, close sessions.

        Called once, after the server stopped accepting and while existing connections are
        still served (so waiting ``session/run`` callers get their answers). The server cancels
        it if it overruns its deadline by the server's margin.
        """
        ...


@dataclass(frozen=True)
class DaemonContext:
    """What an application may want to know about the daemon it runs in."""

    state_dir: Path
    socket_path: str
    event_buffer: int
    trace: bool


#: Builds the application around the daemon's serving life.
ApplicationFactory = Callable[[DaemonContext], AbstractAsyncContextManager[Application]]


@dataclass
class StandaloneApplication:
    """An application with no sessions: only the daemon methods, zero counts, nothing to drain."""

    router: Router = field(default_factory=Router)

    def session_counts(self) -> SessionCounts:
        return SessionCounts(loaded=0, running=0, waiting=0)

    def serving_fields(self) -> Mapping[str, str]:
        return {}  # it reads no configuration

    async def on_shutdown(self, grace: float) -> None:
        return None


@asynccontextmanager
async def standalone_application(context: DaemonContext) -> AsyncIterator[Application]:
    """The `ApplicationFactory` of `StandaloneApplication`."""
    yield StandaloneApplication()
