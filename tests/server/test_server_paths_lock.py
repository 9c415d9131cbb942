"""The runtime directory rules and the single-instance lock (PROTOCOL.md §1), in-process."""

from __future__ import annotations

import os
import stat
from contextlib import ExitStack
from pathlib import Path

import pytest
import trio
import trio.testing

from protocol.instance_lock import PREDECESSOR_WAIT, parse_holder, shutting_down
from robotad.server.lock import AlreadyRunning, InstanceLock
from robotad.server.paths import (
    MAX_SOCKET_PATH_BYTES,
    RuntimeDirError,
    check_socket_path,
    ensure_private_dir,
)


def test_missing_directory_is_created_0700_whatever_the_umask(tmp_path: Path) -> None:
    """A missing runtime directory (and its missing parents) is created mode 0700."""
    target = tmp_path / "a" / "b" / "robota"
    previous = os.umask(0)
    try:
        ensure_private_dir(target)
    finally:
        os.umask(previous)
    for directory in (tmp_path / "a", tmp_path / "a" / "b", target):
        info = os.lstat(directory)
        assert stat.S_ISDIR(info.st_mode)
        assert stat.S_IMODE(info.st_mode) == 0o700
        assert info.st_uid == os.geteuid()


def test_existing_private_directory_is_accepted_unchanged(tmp_path: Path) -> None:
    target = tmp_path / "robota"
    target.mkdir(mode=0o700)
    os.chmod(target, 0o500)
    ensure_private_dir(target)
    assert stat.S_IMODE(os.lstat(target).st_mode) == 0o500


@pytest.mark.parametrize("mode", [0o750, 0o705, 0o777, 0o710, 0o701])
def test_group_or_other_access_is_refused(tmp_path: Path, mode: int) -> None:
    target = tmp_path / "robota"
    target.mkdir()
    os.chmod(target, mode)
    with pytest.raises(RuntimeDirError, match=r"mode 0\d+.*group or others") as caught:
        ensure_private_dir(target)
    assert str(target) in str(caught.value)
    assert stat.S_IMODE(os.lstat(target).st_mode) == mode  # never "fixed" behind our back


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_foreign_owner_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "robota"
    target.mkdir(mode=0o700)
    os.chown(target, 65534, -1)
    with pytest.raises(RuntimeDirError, match="owned by uid 65534"):
        ensure_private_dir(target)


def test_symlink_and_non_directory_are_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(RuntimeDirError, match="symbolic link"):
        ensure_private_dir(link)
    plain = tmp_path / "file"
    plain.write_text("x")
    with pytest.raises(RuntimeDirError, match="not a directory"):
        ensure_private_dir(plain)


def test_overlong_socket_path_is_refused_clearly(tmp_path: Path) -> None:
    check_socket_path(tmp_path / "robotad.sock")
    long = Path("/tmp") / ("x" * MAX_SOCKET_PATH_BYTES) / "robotad.sock"
    with pytest.raises(RuntimeDirError, match="at most 107"):
        check_socket_path(long)


def test_lock_is_exclusive_and_names_the_holder(tmp_path: Path) -> None:
    """A second claimant is refused with the holder's pid; after release it succeeds."""
    path = tmp_path / "robotad.lock"
    first = InstanceLock(path)
    first.acquire()
    assert path.read_text().strip() == str(os.getpid())
    assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
    second = InstanceLock(path)
    with pytest.raises(AlreadyRunning, match=f"pid {os.getpid()}") as caught:
        second.acquire()
    assert caught.value.pid == os.getpid()
    assert second.held is False
    first.release()
    first.release()  # idempotent
    with second as held:
        assert held.held
    assert path.exists()  # the lock file is never unlinked


def test_lock_descriptor_is_not_inherited(tmp_path: Path) -> None:
    lock = InstanceLock(tmp_path / "robotad.lock")
    with lock:
        assert lock._fd is not None
        assert not os.get_inheritable(lock._fd)


def test_lock_refuses_a_planted_symlink(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("")
    (tmp_path / "robotad.lock").symlink_to(target)
    with pytest.raises(OSError):  # noqa: PT011 - ELOOP from O_NOFOLLOW; the errno is the point
        InstanceLock(tmp_path / "robotad.lock").acquire()


@pytest.mark.parametrize("mode", [0o1777, 0o777, 0o1733])
def test_a_shared_folder_is_never_advised_a_chmod(tmp_path: Path, mode: int) -> None:
    """Issue 14: for a shared folder such as /tmp the way out is a private subfolder, never
    loosening or tightening the shared one."""
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, mode)
    with pytest.raises(RuntimeDirError) as caught:
        ensure_private_dir(shared)
    message = str(caught.value)
    assert "chmod" not in message
    assert f"--socket {shared / f'robota-{os.geteuid()}' / 'robotad.sock'}" in message


def test_a_folder_of_ones_own_may_be_tightened(tmp_path: Path) -> None:
    own = tmp_path / "own"
    own.mkdir()
    os.chmod(own, 0o750)
    with pytest.raises(RuntimeDirError) as caught:
        ensure_private_dir(own)
    message = str(caught.value)
    # Tightening is one way; a folder others should read (a project's) has another.
    assert f"run: chmod 700 {own}, if nobody else should read it; or put the socket" in message
    assert f"--socket {own / f'robota-{os.geteuid()}' / 'robotad.sock'}" in message


def test_a_stopping_holder_says_so(tmp_path: Path) -> None:
    """Once its shutdown began, the holder's lock says so: a second claimant learns it is
    stopping (and waits for it, in `serve_daemon`), and so does a client."""
    path = tmp_path / "robotad.lock"
    with InstanceLock(path) as holder:
        with pytest.raises(AlreadyRunning, match="already running") as caught:
            InstanceLock(path).acquire()
        assert not caught.value.stopping
        assert not shutting_down(path)
        holder.mark_stopping()
        with pytest.raises(AlreadyRunning, match=f"still shutting down \\(pid {os.getpid()}"):
            InstanceLock(path).acquire()
        assert shutting_down(path)
    assert parse_holder(b"") == (None, False)
    assert parse_holder(b"12 stopping\n") == (12, True)
    assert parse_holder(b"stopping\n") == (None, False)
    assert not shutting_down(tmp_path / "missing.lock")


async def test_a_daemon_that_never_finishes_stopping_is_waited_for_so_long(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    from robotad.server.lifecycle import DaemonSettings, StartupError, serve_daemon

    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    with InstanceLock(run / "robotad.lock") as holder:
        holder.mark_stopping()
        with pytest.raises(StartupError) as caught:
            await serve_daemon(DaemonSettings(socket=run / "robotad.sock"), environ={})
    assert str(caught.value) == (
        f"robotad is still shutting down (pid {os.getpid()} holds {run / 'robotad.lock'}) "
        f"after {PREDECESSOR_WAIT:g} s of waiting for it to exit; try again once it has exited"
    )
    assert not (run / "robotad.sock").exists()


async def test_a_state_folder_this_user_cannot_write_is_refused_before_its_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A state folder robotad's user may not write (chmod 500, another owner): its lock file,
    left writable by an earlier run, still opened, and robotad served with every session
    write failing. It is now refused at start, named, with what to do (os.access stands in
    for the permission bits, which root, running this suite, passes)."""
    from robotad.server import claims
    from robotad.server.lifecycle import StartupError

    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    (state / "robotad.lock").write_text("")
    monkeypatch.setattr(claims.os, "access", lambda path, mode, **_: Path(path) != state)
    with ExitStack() as cleanup, pytest.raises(StartupError) as caught:
        await claims.claim_state_folder(state, tmp_path / "run" / "robotad.lock", cleanup)
    assert str(caught.value) == (
        f"robotad cannot write to its state folder {state} (Permission denied), where it "
        "keeps its sessions, journals and logs, so it does not start: make it writable for "
        "this user, or point ROBOTA_STATE_DIR at a folder it can write"
    )
