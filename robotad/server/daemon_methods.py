"""The daemon's own methods (PROTOCOL.md §5 "Daemon"): ``initialize``, ``daemon/status``,
``daemon/shutdown``.

``initialize`` and ``daemon/status`` never wait, so they are answered inline by the reader.
``daemon/shutdown`` answers ``{ok: true}`` and only *requests* the shutdown: the server stops
accepting, drains and exits after the reply has gone out, so the caller always hears back.

``initialize`` tolerates members it does not know: LSP-style editors send their usual
``initialize`` parameters (``processId``, ``rootUri``, ``capabilities``…) and must not be
refused for it. The other two are strict like every method of the protocol, and decode into
`protocol.methods`' own params types.
"""

from __future__ import annotations

import importlib.metadata
import os
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from msgspec import UNSET, Struct, UnsetType

from protocol.methods import (
    PROTOCOL_VERSION,
    DaemonCapabilities,
    DaemonStatus,
    Empty,
    InitializeResult,
    OkResult,
    ServerInfo,
    ShutdownParams,
)
from protocol.peer import CallContext, Router
from protocol.shapes import format_timestamp
from robotad.server.app import Application

__all__ = [
    "DEFAULT_GRACE_SECONDS",
    "PROTOCOL_VERSION",
    "DaemonInfo",
    "InitializeParams",
    "daemon_version",
    "register_daemon_methods",
]

#: The grace a shutdown by signal gives running turns: what ``daemon/shutdown`` gives by default.
DEFAULT_GRACE_SECONDS: Final = float(ShutdownParams().grace_seconds)
FRAMINGS: Final = ("ndjson", "content-length")


# -- params ---------------------------------------------------------------------------------


class ClientInfo(Struct, frozen=True):
    """Who the client says it is; informational only (logged, never trusted)."""

    name: str
    version: str | UnsetType = UNSET


class InitializeParams(Struct, rename="camel", frozen=True):
    """``{clientInfo?: {name, version?}}``; other members (LSP's) are accepted and ignored.

    Deliberately not `protocol.methods.InitializeParams`: that one is what a robota client
    sends (strict, ``version`` required, as PROTOCOL.md writes it), while the daemon must also
    accept an LSP editor's ``initialize`` — extra members, a ``clientInfo`` without a version.
    """

    client_info: ClientInfo | UnsetType = UNSET


# -- the daemon's facts ---------------------------------------------------------------------


@dataclass(frozen=True)
class DaemonInfo:
    """What ``daemon/status`` reports besides the session counts."""

    version: str
    pid: int
    started_at: datetime
    socket_path: str
    state_dir: Path


def daemon_version() -> str:
    """The installed distribution's version, or pyproject's when running from a source tree."""
    try:
        return importlib.metadata.version("robota")
    except importlib.metadata.PackageNotFoundError:
        pass
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    try:
        project: Any = tomllib.loads(pyproject.read_text("utf-8")).get("project", {})
        return str(project["version"])
    except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError):
        return "0+unknown"


# -- registration ---------------------------------------------------------------------------


def register_daemon_methods(
    router: Router,
    info: DaemonInfo,
    app: Application,
    request_shutdown: Callable[[float], None],
) -> None:
    """Add ``initialize``, ``daemon/status`` and ``daemon/shutdown`` to `router`.

    `request_shutdown(grace)` must only schedule the shutdown and return at once.
    """
    initialize_result = InitializeResult(
        protocol_version=PROTOCOL_VERSION,
        server_info=ServerInfo(name="robotad", version=info.version),
        capabilities=DaemonCapabilities(framings=list(FRAMINGS)),
    )

    @router.method("initialize", InitializeParams, inline=True)
    async def initialize(params: InitializeParams, ctx: CallContext) -> InitializeResult:
        return initialize_result

    # What never changes while the daemon runs, formatted once (status is polled).
    started_at = format_timestamp(info.started_at)
    state_dir = os.fspath(info.state_dir)

    @router.method("daemon/status", Empty, inline=True)
    async def status(params: Empty, ctx: CallContext) -> DaemonStatus:
        return DaemonStatus(
            version=info.version,
            protocol_version=PROTOCOL_VERSION,
            pid=info.pid,
            started_at=started_at,
            socket_path=info.socket_path,
            state_dir=state_dir,
            sessions=app.session_counts(),
        )

    @router.method("daemon/shutdown", ShutdownParams, inline=False)
    async def shutdown(params: ShutdownParams, ctx: CallContext) -> OkResult:
        # float(): an absent graceSeconds decodes to the protocol's default, the literal 10.
        request_shutdown(float(params.grace_seconds))
        return OkResult()
