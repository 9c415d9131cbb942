"""Socket activation of a real robotad process, handed its listener as systemd hands it
(`activated_command`): how the variables are read (`sd_listen_fds`), what robotad refuses
rather than bind a socket of its own, and that systemd's socket file stays systemd's
(PROTOCOL.md §1)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import pytest
import trio

from tests.server.server_harness import (
    IO_TIMEOUT,
    RawClient,
    activated_command,
    daemon_environ,
    read_fd_to_eof,
    read_to_eof,
    short_tmpdir,
)

#: Starting a Python process is slow on a loaded machine; this bounds it, it does not time it.
START_TIMEOUT = 30.0


@contextmanager
def systemd_socket(base: Path) -> Iterator[tuple[socket.socket, Path]]:
    """A listening socket at robotad's default path under ``XDG_RUNTIME_DIR=base/run``, as
    robotad.socket makes it."""
    folder = base / "run" / "robota"
    folder.mkdir(parents=True, mode=0o700)
    path = folder / "robotad.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(os.fspath(path))
        listener.listen()
        yield listener, path


def environ_for(base: Path) -> dict[str, str]:
    return daemon_environ(ROBOTA_STATE_DIR=str(base / "state"), XDG_RUNTIME_DIR=str(base / "run"))


async def run_to_exit(command: list[str], base: Path, fd: int) -> tuple[int, str]:
    """Run robotad, expected to refuse to start; its exit code and stderr."""
    with trio.fail_after(START_TIMEOUT):
        done = await trio.run_process(
            command,
            env=environ_for(base),
            pass_fds=(fd,),
            check=False,
            capture_stdout=True,
            capture_stderr=True,
            stdin=subprocess.DEVNULL,
        )
    return done.returncode, done.stderr.decode()


@asynccontextmanager
async def activated(
    listener: socket.socket,
    base: Path,
    *args: str,
    ours: bool = True,
    stderr: int = subprocess.PIPE,
) -> AsyncIterator[trio.Process]:
    """robotad socket-activated on `listener` (``LISTEN_PID`` its own unless not `ours`),
    once it reported ready; killed on the way out if it is still running."""
    read_end, write_end = os.pipe()
    command = activated_command(
        listener.fileno(), "1", *args, "--ready-fd", str(write_end), ours=ours
    )
    process = await trio.lowlevel.open_process(
        command,
        env=environ_for(base),
        pass_fds=(listener.fileno(), write_end),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )
    os.close(write_end)
    try:
        with trio.fail_after(START_TIMEOUT):
            assert await read_fd_to_eof(read_end) == b"\n"
        yield process
    finally:
        if process.returncode is None:
            process.kill()
            with trio.fail_after(IO_TIMEOUT):
                await process.wait()


def inode(path: Path) -> tuple[int, int]:
    info = os.lstat(path)
    return info.st_dev, info.st_ino


@pytest.mark.parametrize("listen_fds", ["abc", "0", "", "-1"])
async def test_a_malformed_activation_stops_robotad_and_spares_systemds_socket(
    listen_fds: str,
) -> None:
    """``LISTEN_PID`` naming robotad with a ``LISTEN_FDS`` it cannot read: robotad took itself
    for not activated and bound its own socket at the default path, which under the units is
    systemd's: it unlinked systemd's socket file and served in its place. It now refuses to
    start, naming the variable and what to do, and systemd's socket file stays as it was."""
    with short_tmpdir() as base, systemd_socket(base) as (listener, path):
        before = inode(path)
        code, stderr = await run_to_exit(
            activated_command(listener.fileno(), listen_fds), base, listener.fileno()
        )
        assert code == 1, stderr
        assert "socket activation: LISTEN_PID names this robotad (pid " in stderr
        assert f"but LISTEN_FDS is {listen_fds!r}, not a number of sockets (1 or more)" in stderr
        assert "unset LISTEN_PID and LISTEN_FDS to let it bind its own" in stderr
        assert inode(path) == before
        assert [entry.name for entry in path.parent.iterdir()] == ["robotad.sock"]  # no lock


async def test_a_descriptor_that_is_no_listener_stops_robotad() -> None:
    """fd 3 a connected socket (a socket unit with Accept=yes) or a file: refused, named."""
    with short_tmpdir() as base:
        (base / "run").mkdir(mode=0o700)
        left, right = socket.socketpair()
        with left, right:
            code, stderr = await run_to_exit(
                activated_command(left.fileno(), "1"), base, left.fileno()
            )
        assert code == 1, stderr
        assert "socket activation: fd 3 is not listening (a socket unit with Accept=yes" in stderr
        assert not (base / "run" / "robota").exists()  # no socket of its own
        with open(base / "file", "w") as file:
            code, stderr = await run_to_exit(
                activated_command(file.fileno(), "1"), base, file.fileno()
            )
        assert code == 1, stderr
        assert "socket activation: fd 3 is not a socket;" in stderr


async def test_activation_meant_for_another_process_is_ignored_and_said() -> None:
    """``LISTEN_PID`` of another process (inherited from an activated ancestor): robotad binds
    its own socket as `sd_listen_fds` says, never serves the descriptor, and now says why."""
    with short_tmpdir() as base, systemd_socket(base) as (listener, path):
        own = base / "own" / "robotad.sock"
        async with activated(listener, base, "--socket", str(own), ours=False) as process:
            client = await RawClient.connect(own)
            status = (await client.call("daemon/status"))["result"]
            await client.aclose()
            assert status["pid"] == process.pid
            assert status["socketPath"] == str(own)
            process.send_signal(signal.SIGTERM)
            assert process.stderr is not None
            with trio.fail_after(IO_TIMEOUT):
                stderr = await read_to_eof(process.stderr)
                assert await process.wait() == 0
        assert b"LISTEN_PID names another process" in stderr
        assert path.is_socket()


async def test_systemds_socket_file_outlives_the_activated_daemon() -> None:
    """Under activation the socket file is systemd's: a SIGTERM'd robotad stops serving and
    leaves it in place (its own socket, when not activated, it removes: see
    test_server_process)."""
    with short_tmpdir() as base, systemd_socket(base) as (listener, path):
        before = inode(path)
        async with activated(listener, base, stderr=subprocess.DEVNULL) as process:
            client = await RawClient.connect(path)
            status = (await client.call("daemon/status"))["result"]
            await client.aclose()
            assert status["pid"] == process.pid
            process.send_signal(signal.SIGTERM)
            with trio.fail_after(IO_TIMEOUT):
                assert await process.wait() == 0
        assert inode(path) == before
