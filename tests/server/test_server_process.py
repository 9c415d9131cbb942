"""The real ``python -m robotad`` process: single instance, stale sockets, directory rules,
signals, readiness, socket activation and sd_notify (PROTOCOL.md §1).

Readiness is never guessed: the daemon writes a byte on ``--ready-fd`` once serving, and
systemd-socket-activate's "Listening on" line says when its socket exists.
"""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.full_disk import fill, remount_read_only, small_tmpfs
from tests.server.server_harness import (
    IO_TIMEOUT,
    REPO,
    RawClient,
    daemon_command,
    daemon_environ,
    error_code,
    read_fd_to_eof,
    read_until,
    running_daemon,
    short_tmpdir,
)

#: Starting a Python process is slow on a loaded machine; this bounds it, it does not time it.
START_TIMEOUT = 30.0


@contextmanager
def private_base() -> Iterator[Path]:
    with short_tmpdir() as base:
        (base / "state").mkdir(mode=0o700)
        yield base


@asynccontextmanager
async def daemon_process(
    socket_path: Path, base: Path, *args: str, env: dict[str, str] | None = None
) -> AsyncIterator[trio.Process]:
    """A daemon subprocess that has announced readiness on its ready pipe; killed on exit.
    `env`: variables beside the state folder's."""
    read_end, write_end = os.pipe()
    with open(base / "stderr", "ab") as stderr:
        process = await trio.lowlevel.open_process(
            daemon_command("--socket", str(socket_path), "--ready-fd", str(write_end), *args),
            pass_fds=(write_end,),
            env=daemon_environ(ROBOTA_STATE_DIR=str(base / "state"), **(env or {})),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    os.close(write_end)
    try:
        with trio.fail_after(START_TIMEOUT):
            ready = await read_fd_to_eof(read_end)
        assert ready == b"\n", (base / "stderr").read_text()
        yield process
    finally:
        if process.returncode is None:
            process.kill()
        with trio.fail_after(IO_TIMEOUT):
            await process.wait()


async def run_daemon_to_exit(socket_path: Path, base: Path, *args: str) -> tuple[int, str]:
    """Run a daemon that is expected to refuse to start; its exit code and stderr."""
    with trio.fail_after(START_TIMEOUT):
        done = await trio.run_process(
            daemon_command("--socket", str(socket_path), *args),
            env=daemon_environ(ROBOTA_STATE_DIR=str(base / "state")),
            check=False,
            capture_stdout=True,
            capture_stderr=True,
            stdin=subprocess.DEVNULL,
        )
    return done.returncode, done.stderr.decode()


async def status_of(socket_path: Path) -> dict[str, Any]:
    client = await RawClient.connect(socket_path)
    try:
        reply = await client.call("daemon/status")
    finally:
        await client.aclose()
    result: dict[str, Any] = reply["result"]
    return result


async def test_daemon_creates_private_dir_and_socket_then_exits_0_on_sigterm() -> None:
    """Missing runtime dir created 0700, socket 0600; SIGTERM: graceful exit 0, socket gone."""
    with private_base() as base:
        socket_path = base / "missing" / "robota" / "robotad.sock"
        async with daemon_process(socket_path, base) as process:
            info = os.lstat(socket_path.parent)
            assert stat.S_IMODE(info.st_mode) == 0o700
            assert stat.S_ISSOCK(os.lstat(socket_path).st_mode)
            assert stat.S_IMODE(os.lstat(socket_path).st_mode) == 0o600
            lock = socket_path.parent / "robotad.lock"
            assert lock.read_text().strip() == str(process.pid)
            assert (await status_of(socket_path))["pid"] == process.pid
            process.send_signal(signal.SIGTERM)
            with trio.fail_after(IO_TIMEOUT):
                assert await process.wait() == 0
        assert not socket_path.exists()
        assert lock.exists()


async def test_second_instance_is_refused_naming_the_pid() -> None:
    with private_base() as base:
        socket_path = base / "run" / "robotad.sock"
        async with daemon_process(socket_path, base) as first:
            code, stderr = await run_daemon_to_exit(socket_path, base)
            assert code == 1
            assert f"pid {first.pid}" in stderr
            assert "already running" in stderr
            # the live socket was neither unlinked nor rebound
            assert (await status_of(socket_path))["pid"] == first.pid


async def test_a_second_daemon_on_the_same_state_folder_is_refused() -> None:
    """A daemon for a socket in another folder, over the same state folder, must not start:
    it would open, delete and overwrite the sessions, journals and logs the first holds (a
    session deleted through it came back with a damaged log)."""
    with private_base() as base:
        first_socket = base / "run" / "robotad.sock"
        other_socket = base / "other" / "robotad.sock"
        async with daemon_process(first_socket, base) as first:
            code, stderr = await run_daemon_to_exit(other_socket, base)
            assert code == 1
            assert f"pid {first.pid}" in stderr
            assert str(base / "state" / "robotad.lock") in stderr
            assert "ROBOTA_STATE_DIR" in stderr
            assert not other_socket.exists()
            assert (await status_of(first_socket))["pid"] == first.pid


async def test_a_state_folder_that_is_the_socket_folder_is_locked_once() -> None:
    with private_base() as base:
        socket_path = base / "state" / "robotad.sock"
        async with daemon_process(socket_path, base) as process:
            assert (await status_of(socket_path))["pid"] == process.pid


async def test_stale_socket_after_sigkill_is_replaced() -> None:
    with private_base() as base:
        socket_path = base / "run" / "robotad.sock"
        async with daemon_process(socket_path, base) as first:
            first.kill()
            with trio.fail_after(IO_TIMEOUT):
                await first.wait()
        assert stat.S_ISSOCK(os.lstat(socket_path).st_mode)  # left behind by the killed daemon
        with pytest.raises(ConnectionRefusedError):
            await trio.open_unix_socket(os.fspath(socket_path))
        async with daemon_process(socket_path, base) as second:
            assert (await status_of(socket_path))["pid"] == second.pid
            client = await RawClient.connect(socket_path)
            reply = await client.call("daemon/shutdown", {"graceSeconds": 0})
            assert reply["result"] == {"ok": True}
            with trio.fail_after(IO_TIMEOUT):
                assert await second.wait() == 0
        assert not socket_path.exists()


async def test_failed_start_closes_the_ready_pipe_without_a_byte() -> None:
    """A client waiting on --ready-fd learns of a failed start from end-of-file, not a hang."""
    with private_base() as base:
        run = base / "run"
        run.mkdir()
        os.chmod(run, 0o755)
        read_end, write_end = os.pipe()
        with trio.fail_after(START_TIMEOUT):
            process = await trio.lowlevel.open_process(
                daemon_command("--socket", str(run / "robotad.sock"), "--ready-fd", str(write_end)),
                pass_fds=(write_end,),
                env=daemon_environ(ROBOTA_STATE_DIR=str(base / "state")),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            os.close(write_end)
            assert await read_fd_to_eof(read_end) == b""
            assert await process.wait() == 1


@pytest.mark.parametrize("used_before", [True, False])
async def test_a_read_only_state_folder_is_refused_naming_it_and_what_to_do(
    used_before: bool,
) -> None:
    """A state folder on a read-only file system (a disk the kernel remounted after an error,
    a read-only bind mount): robotad said only 'cannot open lock file …/robotad.lock:
    Read-only file system', or 'cannot use state folder …' for one it had to create. It now
    names the folder, why it needs to write there and what to do, and leaves no socket."""
    with private_base() as base, small_tmpfs(base / "state"):
        if used_before:  # a daemon ran over it: the lock file is there already
            (base / "state" / "robotad.lock").write_text("12\n")
        remount_read_only(base / "state")
        state = base / "state" if used_before else base / "state" / "robota"
        socket_path = base / "run" / "robotad.sock"
        with trio.fail_after(START_TIMEOUT):
            done = await trio.run_process(
                daemon_command("--socket", str(socket_path)),
                env=daemon_environ(ROBOTA_STATE_DIR=str(state)),
                check=False,
                capture_stderr=True,
                stdin=subprocess.DEVNULL,
            )
        assert done.returncode == 1
        assert done.stderr.decode() == (
            f"Error: robotad cannot write to its state folder {state} (Read-only file system), "
            "where it keeps its sessions, journals and logs, so it does not start: remount it "
            "read-write, or point ROBOTA_STATE_DIR at a folder it can write\n"
        )
        assert not os.path.lexists(socket_path)


@pytest.mark.parametrize("mode", [0o755, 0o770])
async def test_loose_runtime_dir_is_refused(mode: int) -> None:
    with private_base() as base:
        run = base / "run"
        run.mkdir()
        os.chmod(run, mode)
        code, stderr = await run_daemon_to_exit(run / "robotad.sock", base)
        assert code == 1
        assert str(run) in stderr
        assert "group or others" in stderr
        assert not (run / "robotad.sock").exists()


async def test_a_socket_path_naming_a_file_is_refused_leaving_its_folder_as_it_was() -> None:
    """``--socket`` at a regular file: robotad refuses before it makes anything beside it
    (no lock file, no log), and the file is left byte for byte."""
    with private_base() as base:
        run = base / "run"
        run.mkdir(mode=0o700)
        (run / "notes.txt").write_text("mine")
        code, stderr = await run_daemon_to_exit(run / "notes.txt", base)
        assert code == 1
        assert f"{run / 'notes.txt'} exists and is not a socket" in stderr
        assert [p.name for p in run.iterdir()] == ["notes.txt"]
        assert (run / "notes.txt").read_text() == "mine"


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
async def test_foreign_runtime_dir_is_refused() -> None:
    with private_base() as base:
        run = base / "run"
        run.mkdir(mode=0o700)
        os.chown(run, 65534, 65534)
        code, stderr = await run_daemon_to_exit(run / "robotad.sock", base)
        assert code == 1
        assert "owned by uid 65534" in stderr


async def test_bad_ready_fd_and_bad_options_are_refused() -> None:
    with private_base() as base:
        socket_path = base / "run" / "robotad.sock"
        code, stderr = await run_daemon_to_exit(socket_path, base, "--ready-fd", "97")
        assert code == 1
        assert "--ready-fd 97" in stderr
        assert not socket_path.exists()
        code, stderr = await run_daemon_to_exit(socket_path, base, "--max-message-bytes", "0")
        assert code == 2


_FOREIGN_CLIENT = r"""
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
s.connect(sys.argv[1])
try:
    s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"daemon/status"}\n')
except OSError:
    pass
data = b""
try:
    while chunk := s.recv(65536):
        data += chunk
except ConnectionResetError:
    pass
sys.stdout.write(repr(data))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="running a client as another uid needs root")
@pytest.mark.skipif(not os.path.exists("/usr/bin/python3"), reason="needs a system python")
async def test_client_of_another_uid_is_disconnected_unanswered() -> None:
    """A peer whose SO_PEERCRED uid differs is closed without a byte of reply — even when the
    socket's mode would let it in (as a careless SocketMode= could)."""
    async with running_daemon() as daemon:
        base = daemon.socket_path.parent.parent
        os.chmod(base, 0o711)
        os.chmod(daemon.socket_path.parent, 0o711)
        os.chmod(daemon.socket_path, 0o666)
        with trio.fail_after(START_TIMEOUT):
            done = await trio.run_process(
                ["/usr/bin/python3", "-c", _FOREIGN_CLIENT, str(daemon.socket_path)],
                user=65534,
                group=65534,
                extra_groups=[],
                cwd="/",
                env={"PATH": "/usr/bin:/bin"},
                capture_stdout=True,
                capture_stderr=True,
            )
        assert done.returncode == 0, done.stderr.decode()
        assert done.stdout == b"b''"
        # the same client as this user is answered
        assert (await status_of(daemon.socket_path))["pid"] == os.getpid()


ACTIVATE = "/usr/bin/systemd-socket-activate"


@pytest.mark.skipif(not os.path.exists(ACTIVATE), reason="systemd-socket-activate is missing")
async def test_socket_activation_with_sd_notify() -> None:
    """fd 3 from systemd-socket-activate is served (no --socket); READY=1, WATCHDOG=1 and
    STOPPING=1 reach a NOTIFY_SOCKET; systemd's socket file is left in place; the lock goes
    beside it."""
    with private_base() as base:
        run = base / "run"
        run.mkdir(mode=0o700)
        socket_path = run / "robotad.sock"
        notify = trio.socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        await notify.bind(os.fspath(base / "notify"))
        command = [
            ACTIVATE,
            "-l",
            str(socket_path),
            f"--setenv=NOTIFY_SOCKET={base / 'notify'}",
            "--setenv=WATCHDOG_USEC=60000000",
            f"--setenv=PYTHONPATH={REPO}",
            f"--setenv=ROBOTA_STATE_DIR={base / 'state'}",
            sys.executable,
            "-m",
            "robotad",
            "--log-level",
            "debug",
        ]
        process = await trio.lowlevel.open_process(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        assert process.stderr is not None
        try:
            with trio.fail_after(START_TIMEOUT):
                seen = b""
                while b"Listening on" not in seen:
                    chunk = await process.stderr.receive_some(4096)
                    assert chunk, seen.decode()
                    seen += chunk
                client = await RawClient.connect(socket_path)  # this connection starts robotad
                await client.send({"jsonrpc": "2.0", "id": 1, "method": "daemon/status"})
                ready = await notify.recv(4096)
                status = (await client.receive())["result"]
            assert ready.split(b"\n")[0] == b"READY=1"
            assert status["pid"] == process.pid  # systemd-socket-activate execs in place
            assert status["socketPath"] == str(socket_path)
            assert (run / "robotad.lock").read_text().strip() == str(process.pid)
            with trio.fail_after(IO_TIMEOUT):
                assert await notify.recv(4096) == b"WATCHDOG=1"
            reply = await client.call("daemon/shutdown", {"graceSeconds": 0}, request_id=2)
            assert reply["result"] == {"ok": True}
            with trio.fail_after(IO_TIMEOUT):
                stopping = await notify.recv(4096)
                assert stopping.split(b"\n")[0] == b"STOPPING=1"
                assert await process.wait() == 0
            assert stat.S_ISSOCK(os.lstat(socket_path).st_mode)  # systemd's, not ours to remove
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            notify.close()


async def test_in_process_daemon_refuses_a_second_in_process_daemon() -> None:
    """The lock is per open file, so even the same process cannot serve one socket twice."""
    from robotad.server.lifecycle import DaemonSettings, StartupError, serve_daemon

    async with running_daemon() as daemon:
        with pytest.raises(StartupError, match=f"pid {os.getpid()}"):
            await serve_daemon(DaemonSettings(socket=daemon.socket_path), environ={})
        client = await RawClient.connect(daemon.socket_path)
        reply = await client.call("daemon/status")
        assert reply["result"]["pid"] == os.getpid()
        reply = await client.call("nope", request_id=2)
        assert error_code(reply) == -32601


async def test_a_full_disk_under_a_new_state_folder_does_not_stop_the_start() -> None:
    """robotad's first start over a state folder on a full disk: its pid cannot be written
    into the new ``robotad.lock``, which only serves to name it to a second daemon. It serves
    anyway (reads work, and the README promises no restart once space is freed); the lock
    still keeps a second daemon out, which then cannot name the holder."""
    with private_base() as base, small_tmpfs(base / "state"):
        filler = fill(base / "state")
        socket_path = base / "run" / "robotad.sock"
        async with daemon_process(socket_path, base) as process:
            assert (await status_of(socket_path))["pid"] == process.pid
            assert "cannot write its pid" in (base / "stderr").read_text()
            code, stderr = await run_daemon_to_exit(base / "other" / "robotad.sock", base)
            assert code == 1
            assert "already running (another process (pid unknown)" in stderr
            filler.unlink()


async def test_a_daemon_started_while_the_last_one_shuts_down_waits_for_it() -> None:
    """``robotactl shutdown`` while a session is closing (a turn finishing in its grace, a slow
    SessionEnd hook), then any command: its autostarted robotad found the lock held by a
    daemon whose socket was already gone, and exited 'already running' — a daemon nobody
    could reach. The stopping one now says so in its lock, and the new one waits for it to
    exit, then serves."""
    with private_base() as base:
        socket_path = base / "run" / "robotad.sock"
        hook_started, release = base / "hook-started", base / "release"
        os.mkfifo(hook_started)
        os.mkfifo(release)
        config = base / "config.toml"
        hook = f"echo started > {hook_started}; read line < {release}"
        config.write_text(
            f"[[hooks.SessionEnd]]\nhooks = [{{type = 'command', command = {hook!r}, "
            "timeout = 60}]\n"
        )
        env = {"ROBOTA_CONFIG": str(config)}
        async with daemon_process(socket_path, base, env=env) as first:
            client = await RawClient.connect(socket_path)
            reply = await client.call("session/create", {"cwd": str(base)})
            assert "result" in reply, reply
            reply = await client.call("daemon/shutdown", {"graceSeconds": 0}, request_id=2)
            assert reply["result"] == {"ok": True}
            with trio.fail_after(IO_TIMEOUT):  # the first daemon is closing its session
                assert await trio.to_thread.run_sync(hook_started.read_text) == "started\n"
            assert not socket_path.exists()
            second = await trio.lowlevel.open_process(
                daemon_command("--socket", str(socket_path)),
                env=daemon_environ(ROBOTA_STATE_DIR=str(base / "state")),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            assert second.stderr is not None
            try:
                with trio.fail_after(START_TIMEOUT):
                    waiting = await read_until(second.stderr, b"waiting for it to exit")
                assert f"pid {first.pid}".encode() in waiting
                with trio.fail_after(IO_TIMEOUT):
                    await trio.to_thread.run_sync(release.write_text, "go\n")
                    assert await first.wait() == 0
                with trio.fail_after(START_TIMEOUT):
                    await read_until(second.stderr, b"serving")
                assert (await status_of(socket_path))["pid"] == second.pid
            finally:
                second.kill()
                with trio.fail_after(IO_TIMEOUT):
                    await second.wait()
                await client.aclose()
