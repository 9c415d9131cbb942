"""SIGTERM and SIGINT before robotad serves: the start-up stops cleanly, saying so, and leaves
no socket file, no held lock and no ready byte behind (robotad/startup_signals.py,
robotad/server/lifecycle.py)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import pytest
import trio

from robotad import startup_signals
from robotad.server.app import Application, DaemonContext, StandaloneApplication
from robotad.server.lifecycle import DaemonSettings, serve_daemon
from robotad.server.lock import AlreadyRunning, InstanceLock
from tests.server.server_harness import (
    IO_TIMEOUT,
    daemon_command,
    daemon_environ,
    read_fd_to_eof,
    read_to_eof,
    read_until,
    short_tmpdir,
)

#: Starting a Python process is slow on a loaded machine; this bounds it, it does not time it.
START_TIMEOUT = 30.0


def lock_is_free(path: Path) -> bool:
    try:
        with InstanceLock(path):
            return True
    except AlreadyRunning:
        return False


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_a_signal_while_waiting_for_a_stopping_predecessor_ends_the_start_cleanly(
    signum: signal.Signals,
) -> None:
    """robotad bound its socket and waited (up to 60 s) for the daemon that still held the
    state folder to exit: SIGTERM then killed it outright, leaving its socket file behind
    (clients met a socket nobody answered), and SIGINT ended it 'Aborted!' with status 1.
    Either now stops the start-up: its socket file removed, its lock free, exit 0, a log line
    that says why, and no ready byte."""
    with short_tmpdir() as base:
        (base / "state").mkdir(mode=0o700)
        socket_path = base / "run" / "robotad.sock"
        read_end, write_end = os.pipe()
        with InstanceLock(base / "state" / "robotad.lock") as predecessor:
            predecessor.mark_stopping()  # this test process, alive: "still shutting down"
            process = await trio.lowlevel.open_process(
                daemon_command("--socket", str(socket_path), "--ready-fd", str(write_end)),
                pass_fds=(write_end,),
                env=daemon_environ(ROBOTA_STATE_DIR=str(base / "state")),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            os.close(write_end)
            assert process.stderr is not None
            try:
                with trio.fail_after(START_TIMEOUT):
                    await read_until(process.stderr, b"waiting for it to exit")
                assert socket_path.is_socket()  # bound before the state folder's lock
                process.send_signal(signum)
                with trio.fail_after(START_TIMEOUT):
                    rest = await read_to_eof(process.stderr)
                    code = await process.wait()
                    ready = await read_fd_to_eof(read_end)
            finally:
                if process.returncode is None:
                    process.kill()
                    with trio.fail_after(IO_TIMEOUT):
                        await process.wait()
        assert code == 0, rest.decode()
        assert f"{signum.name} during start-up: stopping before serving".encode() in rest
        assert b"stopped before serving" in rest
        assert ready == b""
        assert not os.path.lexists(socket_path)
        assert lock_is_free(socket_path.parent / "robotad.lock")


@contextmanager
def held_signals() -> Iterator[None]:
    """`startup_signals.hold()` as ``robotad run`` does, undone afterwards."""
    saved = {signum: signal.getsignal(signum) for signum in startup_signals.HELD_SIGNALS}
    startup_signals.hold()
    try:
        yield
    finally:
        startup_signals.take()
        for signum, handler in saved.items():
            signal.signal(signum, handler)


async def test_a_signal_held_before_the_daemon_ran_stops_it_before_it_makes_anything(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A SIGTERM that came during robotad's imports (held by `startup_signals`): the daemon
    stops before it creates a folder, a lock or a socket."""
    with short_tmpdir() as base, held_signals():
        os.kill(os.getpid(), signal.SIGTERM)
        settings = DaemonSettings(socket=base / "run" / "robotad.sock")
        with caplog.at_level(logging.INFO, "robotad.server"), trio.fail_after(IO_TIMEOUT):
            await serve_daemon(settings, environ={"ROBOTA_STATE_DIR": str(base / "state")})
        assert list(base.iterdir()) == []
        assert "SIGTERM during start-up: stopping before serving" in caplog.text


async def test_a_signal_while_the_application_opens_undoes_the_start() -> None:
    """SIGTERM while the application opens (robotad loads its configuration, recovers its
    sessions): the opening is cancelled at its next wait, the socket file goes and both locks
    are released; nothing is announced."""
    opening, closed = trio.Event(), trio.Event()

    @asynccontextmanager
    async def slow_application(context: DaemonContext) -> AsyncIterator[Application]:
        opening.set()
        try:
            await trio.sleep_forever()
        finally:
            closed.set()
        yield StandaloneApplication()  # never reached

    with short_tmpdir() as base, held_signals():
        socket_path = base / "run" / "robotad.sock"
        settings = DaemonSettings(socket=socket_path)
        environ = {"ROBOTA_STATE_DIR": str(base / "state")}
        with trio.fail_after(IO_TIMEOUT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(
                    lambda: serve_daemon(settings, app_factory=slow_application, environ=environ)
                )
                await opening.wait()
                assert socket_path.is_socket()
                os.kill(os.getpid(), signal.SIGTERM)
        assert closed.is_set()
        assert not os.path.lexists(socket_path)
        assert lock_is_free(socket_path.parent / "robotad.lock")
        assert lock_is_free(base / "state" / "robotad.lock")
