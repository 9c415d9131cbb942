"""robotactl.autostart in-process: what the started daemon inherits, where its output goes,
the deadline, and the lock that makes concurrent clients take turns."""

from __future__ import annotations

import fcntl
import os
import re
import signal
from pathlib import Path

import pytest
import trio
import trio.testing

from robotactl.autostart import (
    LOG_NAME,
    _daemon_environment,
    _DaemonLog,
    autostart_lock,
    start_daemon,
)
from robotactl.connection import DaemonStartFailed, connect

from .conftest import PROCESS_TIMEOUT, REPO, Pidfds


def test_daemon_environment_drops_systemd_unit_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """A robotactl run from a unit must not hand robotad that unit's notify socket or fds."""
    for name in ("NOTIFY_SOCKET", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES", "WATCHDOG_USEC"):
        monkeypatch.setenv(name, "x")
    monkeypatch.setenv("ROBOTA_CONFIG", "/c.toml")
    env = _daemon_environment()
    assert not {
        "NOTIFY_SOCKET",
        "LISTEN_PID",
        "LISTEN_FDS",
        "LISTEN_FDNAMES",
        "WATCHDOG_USEC",
    } & set(env)
    assert env["ROBOTA_CONFIG"] == "/c.toml"


def test_daemon_environment_finds_an_uninstalled_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    entries = _daemon_environment()["PYTHONPATH"].split(os.pathsep)
    if (REPO / "robotad" / "__init__.py").is_file() and "site-packages" not in str(REPO):
        assert entries == [str(REPO), "/elsewhere"]
    else:
        assert entries == ["/elsewhere"]


# -- the log -----------------------------------------------------------------------------------


def test_log_goes_beside_the_socket_in_a_private_directory(socket_dir: Path) -> None:
    log = _DaemonLog.open(socket_dir)
    try:
        assert log.path == socket_dir / LOG_NAME
        assert (log.path.stat().st_mode & 0o777) == 0o600
        os.write(log.fd, b"old run\n")
    finally:
        log.close()
    again = _DaemonLog.open(socket_dir)
    try:
        os.write(again.fd, b"  Error: this run's reason  \n")
        assert again.read_new_output() == "Error: this run's reason"  # not the older lines
    finally:
        again.close()
    assert (socket_dir / LOG_NAME).read_text() == "old run\n  Error: this run's reason  \n"


def test_oversized_log_is_rotated_once(socket_dir: Path) -> None:
    (socket_dir / LOG_NAME).write_bytes(b"x" * (1 << 20) + b"end\n")
    _DaemonLog.open(socket_dir).close()
    assert (socket_dir / f"{LOG_NAME}.1").read_bytes().endswith(b"end\n")
    assert (socket_dir / LOG_NAME).read_bytes() == b""


@pytest.mark.parametrize("mode", [0o755, 0o750, 0o701])
def test_no_log_in_a_directory_others_can_enter(socket_dir: Path, mode: int) -> None:
    shared = socket_dir / "shared"
    shared.mkdir()
    shared.chmod(mode)
    log = _DaemonLog.open(shared)
    try:
        assert log.path is None
        os.write(log.fd, b"robotad: refused\n")
        assert log.read_new_output() == "robotad: refused"
    finally:
        log.close()
    assert list(shared.iterdir()) == []


def test_a_planted_link_is_not_followed(socket_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "victim"
    target.write_text("precious\n")
    (socket_dir / LOG_NAME).symlink_to(target)
    log = _DaemonLog.open(socket_dir)
    try:
        assert log.path is None
        os.write(log.fd, b"x\n")
    finally:
        log.close()
    assert target.read_text() == "precious\n"


def test_missing_socket_directory_is_created_private(socket_dir: Path) -> None:
    fresh = socket_dir / "robota"
    _DaemonLog.open(fresh).close()
    assert (fresh.stat().st_mode & 0o777) == 0o700


# -- the deadline ------------------------------------------------------------------------------


async def test_a_daemon_missing_the_deadline_is_reported_and_left_running(
    socket_dir: Path,
) -> None:
    """ready_timeout=0 expires before any child could answer; the daemon keeps starting, and
    the error names its pid. (It is our child here, so we stop and reap it.)"""
    path = socket_dir / "robotad.sock"
    with pytest.raises(DaemonStartFailed, match=r"did not report ready within 0 s") as caught:
        await start_daemon(path, ready_timeout=0)
    match = re.search(r"robotad \(pid (\d+)\)", str(caught.value))
    assert match is not None
    pid = int(match.group(1))
    pidfd = os.pidfd_open(pid)
    try:
        assert os.waitpid(pid, os.WNOHANG) == (0, 0)  # still running
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        with trio.fail_after(PROCESS_TIMEOUT):
            await trio.lowlevel.wait_readable(pidfd)
        os.waitpid(pid, 0)
    finally:
        os.close(pidfd)


async def test_connect_autostarts_and_the_peer_works(socket_dir: Path) -> None:
    path = socket_dir / "robotad.sock"
    with trio.fail_after(PROCESS_TIMEOUT):
        async with connect(path, autostart=True) as peer:
            status = await peer.request("daemon/status", {})
        pid = status["pid"]
        pidfd = os.pidfd_open(pid)
        try:
            async with connect(path, autostart=False) as peer:
                assert await peer.request("daemon/shutdown", {"graceSeconds": 0}) == {"ok": True}
            await trio.lowlevel.wait_readable(pidfd)
        finally:
            os.close(pidfd)
    _, status_code = os.waitpid(pid, 0)  # our child: reap it
    assert os.waitstatus_to_exitcode(status_code) == 0


async def test_a_daemon_shutting_down_gets_its_successor_more_time(
    socket_dir: Path, stray_daemons: Pidfds
) -> None:
    """The next command after ``robotactl shutdown``, while a turn still finishes: the robotad
    it starts waits for the stopping one (its socket gone, its lock held and marked stopping)
    to exit, so robotactl gives it that much longer than `ready_timeout` (here 0 s, which no
    start could meet: it failed 'did not report ready within 0 s')."""
    from robotad.server.lock import InstanceLock

    path = socket_dir / "robotad.sock"
    stopping = InstanceLock(socket_dir / "robotad.lock")  # the stopping daemon's, in-process
    stopping.acquire()
    stopping.mark_stopping()
    log = socket_dir / LOG_NAME
    with trio.fail_after(PROCESS_TIMEOUT):
        async with trio.open_nursery() as nursery:

            async def release_once_waited_for() -> None:
                while "waiting for it to exit" not in (log.read_text() if log.exists() else ""):
                    await trio.sleep(0.05)
                stopping.release()

            nursery.start_soon(release_once_waited_for)
            try:
                pid = await _status_then_shutdown(path)
            except DaemonStartFailed as exc:  # before the fix: 'within 0 s'; stop that daemon
                stopping.release()
                started = re.search(r"robotad \(pid (\d+)\)", str(exc))
                if started:
                    stray_daemons.track(int(started.group(1)))
                raise
    _, status_code = os.waitpid(pid, 0)  # our child: reap it
    assert os.waitstatus_to_exitcode(status_code) == 0
    assert f"robotad pid {os.getpid()} is shutting down" in log.read_text()


async def _status_then_shutdown(path: Path) -> int:
    """Autostart (ready_timeout 0) a daemon at `path`, then shut it down; its pid once exited."""
    async with connect(path, autostart=True, ready_timeout=0) as peer:
        pid: int = (await peer.request("daemon/status", {}))["pid"]
        pidfd = os.pidfd_open(pid)
        try:
            assert await peer.request("daemon/shutdown", {"graceSeconds": 0}) == {"ok": True}
            await trio.lowlevel.wait_readable(pidfd)
        finally:
            os.close(pidfd)
    return pid


# -- the lock ----------------------------------------------------------------------------------


async def test_autostart_lock_makes_clients_take_turns(socket_dir: Path) -> None:
    path = socket_dir / "robotad.sock"
    order: list[str] = []
    first_holds, release_first = trio.Event(), trio.Event()

    async def first() -> None:
        async with autostart_lock(path, lock_timeout=PROCESS_TIMEOUT):
            first_holds.set()
            await release_first.wait()
            order.append("first leaves")

    async def second() -> None:
        await first_holds.wait()
        async with autostart_lock(path, lock_timeout=PROCESS_TIMEOUT):
            order.append("second enters")

    with trio.fail_after(PROCESS_TIMEOUT):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(first)
            nursery.start_soon(second)
            await first_holds.wait()
            # Without the lock, `second` would have entered by the time everyone is blocked.
            await trio.testing.wait_all_tasks_blocked()
            release_first.set()
    assert order == ["first leaves", "second enters"]


async def test_autostart_lock_gives_up_after_its_timeout(socket_dir: Path) -> None:
    path = socket_dir / "robotad.sock"
    async with autostart_lock(path, lock_timeout=1):
        with pytest.raises(DaemonStartFailed, match="another robotactl"):
            async with autostart_lock(path, lock_timeout=0):
                pass


async def test_no_lock_without_a_private_directory(socket_dir: Path) -> None:
    shared = socket_dir / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    async with (
        autostart_lock(shared / "s", lock_timeout=0),
        autostart_lock(shared / "s", lock_timeout=0),
    ):
        # neither took a lock (the second would have raised): the folder is free to lock
        fd = os.open(shared, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)


@pytest.mark.parametrize("autostart", [False, True])
async def test_a_socket_path_too_long_says_how_long_and_what_to_do(
    socket_dir: Path, autostart: bool
) -> None:
    """A deep XDG_RUNTIME_DIR or ROBOTA_SOCKET: connect(2) refuses the path before any
    daemon could answer; robotactl said only 'AF_UNIX path too long'."""
    from robotactl.connection import DaemonUnavailable, connect_blocking

    path = socket_dir / ("d" * 60) / ("e" * 60) / "robotad.sock"
    size = len(os.fsencode(path))
    expected = (
        f"cannot connect to robotad at {path}: the path is {size} bytes long; Unix sockets "
        "allow at most 107 (choose a shorter --socket or ROBOTA_SOCKET)"
    )
    with pytest.raises(DaemonUnavailable) as caught:
        connect_blocking(path, autostart=autostart, timeout=PROCESS_TIMEOUT)
    assert str(caught.value) == expected
    with pytest.raises(DaemonUnavailable) as caught:
        async with connect(path, autostart=autostart):
            pass
    assert str(caught.value) == expected
    assert not (socket_dir / ("d" * 60)).exists()
