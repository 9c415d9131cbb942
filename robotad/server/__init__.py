"""The daemon's socket server: listener, socket activation, sd_notify, peer-cred check,
one JSON-RPC peer per connection, graceful shutdown (docs/architecture.md).

`serve_daemon` runs the whole daemon life; `Server` serves one listener for an `Application`
composed by the caller (its router, session counts and shutdown hook).
"""

from __future__ import annotations

from robotad.server.app import (
    Application,
    ApplicationFactory,
    DaemonContext,
    SessionCounts,
    StandaloneApplication,
    standalone_application,
)
from robotad.server.lifecycle import DaemonSettings, StartupError, serve_daemon
from robotad.server.serve import Server

__all__ = [
    "Application",
    "ApplicationFactory",
    "DaemonContext",
    "DaemonSettings",
    "Server",
    "SessionCounts",
    "StandaloneApplication",
    "StartupError",
    "serve_daemon",
    "standalone_application",
]
