"""Graceful shutdown in-process: deadlines, a second signal, stuck clients (PROTOCOL.md §5)."""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import pytest
import trio
import trio.testing

from robotad.server.app import Application, DaemonContext
from robotad.server.lifecycle import DaemonSettings, serve_daemon
from robotad.server.listener import bind_listener
from robotad.server.serve import Server
from tests.server.server_harness import (
    IO_TIMEOUT,
    ProbeApp,
    RawClient,
    descriptor_at,
    short_tmpdir,
)


class StubbornApp(ProbeApp):
    """An application whose drain never finishes on its own."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.draining = trio.Event()
        self.drain_cancelled = False

    async def on_shutdown(self, grace: float) -> None:
        self.shutdown_graces.append(grace)
        self.draining.set()
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            self.drain_cancelled = True
            raise


@contextmanager
def server_for(app: ProbeApp, **options: float) -> Iterator[tuple[Server, Path]]:
    with short_tmpdir() as base:
        path = base / "robotad.sock"
        listener = bind_listener(path)
        try:
            yield Server(listener, app, **options), path  # type: ignore[arg-type]
        finally:
            listener.sock.close()


async def test_overrunning_drain_is_cut_at_grace_plus_margin(
    autojump_clock: trio.testing.MockClock,
) -> None:
    app = StubbornApp()
    with server_for(app, hook_margin=3.0) as (server, path):
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            start = trio.current_time()
            server.request_shutdown(5.0)
            server.request_shutdown(60.0)  # a second request changes nothing
        assert trio.current_time() - start == pytest.approx(8.0)
        assert app.shutdown_graces == [5.0]
        assert app.drain_cancelled
        assert not path.exists()


async def test_force_shutdown_skips_the_drain(autojump_clock: trio.testing.MockClock) -> None:
    app = StubbornApp()
    with server_for(app) as (server, _path):
        async with trio.open_nursery() as nursery:
            await nursery.start(server.run)
            start = trio.current_time()
            server.request_shutdown(30.0)
            await app.draining.wait()
            server.force_shutdown()
        assert trio.current_time() == start  # no deadline had to pass
        assert app.drain_cancelled


async def test_client_that_never_reads_cannot_hold_up_shutdown() -> None:
    """A reply write blocked on a client that does not read is cut off after the flush time."""
    app = ProbeApp()
    rescued = False
    with server_for(app, flush_timeout=0.05) as (server, path):
        client = await RawClient.connect(path)

        async def rescue() -> None:
            # A shielded write ignores deadlines; should the server never cut the client off,
            # closing the client is what lets this test fail instead of hanging.
            nonlocal rescued
            await trio.sleep(IO_TIMEOUT)
            rescued = True
            await client.aclose()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(rescue)
            async with trio.open_nursery() as serving:
                await serving.start(server.run)
                big = "x" * (4 * 1024 * 1024)  # far beyond the socket buffers: the reply blocks
                params = {"value": big}
                await client.send(
                    {"jsonrpc": "2.0", "id": 1, "method": "test/echo", "params": params}
                )
                assert server.connection_count == 1
                server.request_shutdown(0.0)
            nursery.cancel_scope.cancel()
        assert not rescued
        assert server.connection_count == 0


@asynccontextmanager
async def _factory_for(app: ProbeApp, context: DaemonContext) -> AsyncIterator[Application]:
    yield app


async def _start_daemon(nursery: trio.Nursery, settings: DaemonSettings, app: ProbeApp) -> None:
    """`serve_daemon` in `nursery` with `app` as its application; returns once it listens."""
    await nursery.start(
        lambda task_status: serve_daemon(
            settings,
            app_factory=lambda ctx: _factory_for(app, ctx),
            environ={},
            task_status=task_status,
        )
    )


async def test_second_sigterm_while_draining_exits_at_once() -> None:
    """SIGTERM starts the graceful shutdown; a second one during the drain ends it now."""
    app = StubbornApp()
    with short_tmpdir() as base:
        settings = DaemonSettings(socket=base / "robotad.sock")
        with trio.fail_after(IO_TIMEOUT):
            async with trio.open_nursery() as nursery:
                await _start_daemon(nursery, settings, app)
                os.kill(os.getpid(), signal.SIGTERM)
                await app.draining.wait()
                assert app.shutdown_graces == [10.0]  # the default grace
                os.kill(os.getpid(), signal.SIGTERM)
        assert app.drain_cancelled
        assert not (base / "robotad.sock").exists()


async def test_sigint_is_a_graceful_shutdown_too() -> None:
    app = ProbeApp()
    with short_tmpdir() as base:
        settings = DaemonSettings(socket=base / "robotad.sock")
        with trio.fail_after(IO_TIMEOUT):
            async with trio.open_nursery() as nursery:
                await _start_daemon(nursery, settings, app)
                os.kill(os.getpid(), signal.SIGINT)
        assert app.shutdown_graces == [10.0]


@pytest.mark.parametrize("replaced", [False, True])
async def test_a_daemon_whose_socket_file_went_shuts_down(
    autojump_clock: trio.testing.MockClock, replaced: bool
) -> None:
    """logind removes the runtime folder at logout (and systemd-tmpfiles ages a socket out of
    /tmp): the daemon went on unreachable, holding its state folder's lock, so the next
    robotactl could start none ('already running … one robotad owns a state folder') and
    `robotactl shutdown` found nothing to stop. It now notices within seconds and shuts down
    gracefully — an open connection is no reason to stay — leaving a replacement alone."""
    app = ProbeApp()
    with short_tmpdir() as base:
        socket_path = base / "run" / "robotad.sock"
        settings = DaemonSettings(socket=socket_path)
        with trio.fail_after(IO_TIMEOUT):
            async with trio.open_nursery() as nursery:
                await _start_daemon(nursery, settings, app)
                client = await RawClient.connect(socket_path)
                os.unlink(socket_path)
                if replaced:
                    replacement = bind_listener(socket_path)
        await client.aclose()
        assert app.shutdown_graces == [10.0]
        assert os.path.exists(socket_path) == replaced
        if replaced:
            replacement.sock.close()


async def test_an_activated_daemon_neither_watches_nor_removes_systemds_socket_file(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Under socket activation the socket file is systemd's (robotad.socket removes it when it
    stops, and stops robotad with it): the check that stops a daemon whose socket file went is
    not run, and shutdown leaves the file where systemd put it, however it was moved."""
    app = ProbeApp()
    with short_tmpdir() as base:
        path, moved = base / "robotad.sock", base / "moved.sock"
        systemd = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with systemd, descriptor_at(3, systemd):
            systemd.bind(os.fspath(path))
            systemd.listen()
            environ = {
                "LISTEN_PID": str(os.getpid()),
                "LISTEN_FDS": "1",
                "ROBOTA_STATE_DIR": str(base / "state"),
            }
            async with trio.open_nursery() as nursery:
                await nursery.start(
                    lambda task_status: serve_daemon(
                        DaemonSettings(),
                        app_factory=lambda ctx: _factory_for(app, ctx),
                        environ=environ,
                        task_status=task_status,
                    )
                )
                os.rename(path, moved)  # gone from its path, as far as robotad can tell
                await trio.sleep(3600)  # hundreds of the checks a socket of its own gets
                assert app.shutdown_graces == []
                client = await RawClient.connect(moved)
                reply = await client.call("daemon/shutdown", {"graceSeconds": 0})
                assert reply["result"] == {"ok": True}
                await client.aclose()
            assert app.shutdown_graces == [0.0]
            assert moved.is_socket()
