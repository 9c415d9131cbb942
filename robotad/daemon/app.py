"""The session application: what ``robotad`` serves by default.

`session_application(context, idle_unload_seconds=...)` is an `ApplicationFactory`: it loads
the configuration (a bad file is a `StartupError` listing every problem, before anything is
announced as ready), creates the spill store under the runtime folder, and opens a nursery
for the whole serving life in which the `SessionManager` runs its hubs, turns and idle unload,
and spilled results are removed as they expire.
The router it hands to the server holds every session method (`register_session_methods`);
the server adds the daemon methods.

Shutdown: the server calls `on_shutdown(grace)` while connections are still served, so a
client waiting on a turn hears how it ended; the manager finishes or aborts the running work
and closes every session, then every MCP server is stopped and the pooled SDK clients the
sessions shared (`robotad.providers.clients`) are closed. Leaving the factory closes
whatever is still open (after a forced shutdown), removes the spill store and cancels the
nursery.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import trio

from protocol.errors import InvalidParams
from protocol.peer import Router
from robotad.config import ConfigError, read_config, runtime_dir
from robotad.daemon.assembly import SessionAssembler
from robotad.daemon.manager import DEFAULT_IDLE_UNLOAD_SECONDS, SessionManager
from robotad.daemon.mcp_methods import register_mcp_methods
from robotad.daemon.methods import register_session_methods
from robotad.daemon.operations import SessionOperations
from robotad.mcp.hub import McpHub
from robotad.providers import new_sdk_client
from robotad.providers.clients import ClientPool
from robotad.sandbox import SandboxProbe
from robotad.server.app import Application, ApplicationFactory, DaemonContext, SessionCounts
from robotad.server.lifecycle import StartupError
from robotad.storage.spill import SpillError, SpillStore, sweep_abandoned

__all__ = ["SessionApplication", "session_application", "session_application_factory"]

log = logging.getLogger("robotad.daemon")

#: How long closing the sessions left after the server stopped may take.
_FINAL_CLOSE_TIMEOUT = 10.0

#: How often the spilled results past their time are removed.
_SPILL_PURGE_INTERVAL = 60.0


@dataclass
class SessionApplication:
    """The `Application` the server serves: the session router, counts and drain."""

    manager: SessionManager
    router: Router = field(default_factory=Router)
    mcp: McpHub | None = None
    clients: ClientPool | None = None
    #: The config file read at start, or that there was none and where it was looked for.
    config_source: str = ""

    def session_counts(self) -> SessionCounts:
        loaded, running, waiting = self.manager.counts()
        return SessionCounts(loaded=loaded, running=running, waiting=waiting)

    def serving_fields(self) -> Mapping[str, str]:
        return {"config": self.config_source} if self.config_source else {}

    async def on_shutdown(self, grace: float) -> None:
        await self.manager.shutdown(grace)
        if self.mcp is not None:
            await self.mcp.aclose()
        if self.clients is not None:
            await self.clients.aclose()


@asynccontextmanager
async def session_application(
    context: DaemonContext, *, idle_unload_seconds: float = DEFAULT_IDLE_UNLOAD_SECONDS
) -> AsyncIterator[Application]:
    """The session application around the daemon's serving life (see the module doc)."""
    try:
        loaded = read_config()
    except ConfigError as exc:
        raise StartupError(str(exc)) from None
    config = loaded.config
    swept = sweep_abandoned(runtime_dir())  # a killed daemon's spilled results
    if swept:
        log.info("removed %d spill folder(s) a stopped robotad left behind", swept)
    try:
        spill = SpillStore(runtime_dir())
    except SpillError as exc:
        raise StartupError(f"cannot create the tool-result spill store: {exc}") from None
    mcp = McpHub(config.mcp_servers, spill=spill)
    sandbox_probe = SandboxProbe()
    clients = ClientPool(new_sdk_client)
    try:
        try:
            assembler = SessionAssembler.from_config(
                config,
                state_dir=context.state_dir,
                spill=spill,
                trace=context.trace,
                mcp=mcp,
                sandbox_probe=sandbox_probe,
                clients=clients,
            )
        except InvalidParams as exc:
            located = [
                {"path": i["path"].removeprefix("$").removeprefix("."), "message": i["message"]}
                for i in exc.issues
            ]
            raise StartupError(str(ConfigError(loaded.path, located))) from None
        async with trio.open_nursery() as nursery:
            await nursery.start(mcp.run)
            manager = SessionManager(
                state_dir=context.state_dir,
                assembler=assembler,
                nursery=nursery,
                event_buffer=context.event_buffer,
                idle_unload_seconds=idle_unload_seconds,
            )
            await nursery.start(manager.run)
            # Probed beside serving, not before it: a create needing the answer waits for it.
            nursery.start_soon(sandbox_probe.current)
            nursery.start_soon(_purge_expired, spill)
            app = SessionApplication(
                manager, mcp=mcp, clients=clients, config_source=loaded.source()
            )
            register_session_methods(app.router, SessionOperations(manager))
            register_mcp_methods(app.router, manager, mcp)
            try:
                yield app
            finally:
                with trio.move_on_after(_FINAL_CLOSE_TIMEOUT) as deadline:
                    deadline.shield = True
                    await manager.shutdown(0.0)
                    await mcp.aclose()
                    await clients.aclose()
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await clients.aclose()  # a start that failed before serving
        spill.close()


async def _purge_expired(spill: SpillStore) -> None:
    """Remove spilled results as they expire (G-201), whether or not anything is stored or
    read meanwhile: the store purges on a put or a get, so a daemon left idle kept a result
    in the runtime folder past its 24 hours, until the next one or its stop."""
    while True:
        await trio.sleep(_SPILL_PURGE_INTERVAL)
        removed = spill.purge_expired()
        if removed:
            log.info("removed %d expired tool result(s)", removed)


def session_application_factory(
    *, idle_unload_seconds: float = DEFAULT_IDLE_UNLOAD_SECONDS
) -> ApplicationFactory:
    """The `ApplicationFactory` of a daemon unloading idle sessions after the given time
    (0: never)."""
    return functools.partial(session_application, idle_unload_seconds=idle_unload_seconds)
