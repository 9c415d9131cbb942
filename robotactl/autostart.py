"""Starting robotad on demand for a client that found nothing at the socket.

`start_daemon` runs ``<this python> -P -m robotad --socket PATH --ready-fd FD`` detached
from the terminal: a new session, stdin from /dev/null, stdout and stderr appended to
`LOG_NAME` beside the socket. It returns when robotad writes its ready byte to FD and fails
when FD reaches EOF first (robotad exited: its output explains why) or the deadline passes.
The same interpreter runs robotad, so a virtual environment or an uninstalled checkout works
without ``robotad`` on PATH.

`autostart_lock` makes concurrent clients take turns: the first starts the daemon while the
others wait on the lock, then find it serving. The lock is an ``flock`` on the socket's
directory itself, so no file is added for it, and robotad's own lock (``robotad.lock``) stays
robotad's alone.

Only a private directory of this user (mode 0700 or stricter, not a symbolic link) receives a
log or a lock; the socket's directory is created so when missing, as robotad would. Otherwise
robotad's output goes to an anonymous temporary file read back only to explain a failure —
robotad refuses such a directory anyway, and robotactl relays its words.
"""

from __future__ import annotations

import os
import signal
import stat
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from robotactl.daemon_errors import DaemonStartFailed

__all__ = ["LOG_NAME", "autostart_lock", "start_daemon"]

#: The autostarted daemon's stdout/stderr, beside its socket.
LOG_NAME = "robotad.log"
#: A log beyond this many bytes is moved to ``robotad.log.1`` before the next start.
_LOG_ROTATE_BYTES = 1 << 20
#: Seconds to wait for a daemon that closed its ready descriptor to exit, for its status.
_EXIT_GRACE = 2.0
#: Environment a systemd unit may have given robotactl that must not leak into robotad.
_ACTIVATION_VARIABLES = (
    "LISTEN_PID",
    "LISTEN_FDS",
    "LISTEN_FDNAMES",
    "NOTIFY_SOCKET",
    "WATCHDOG_PID",
    "WATCHDOG_USEC",
)


@asynccontextmanager
async def autostart_lock(socket_path: Path, *, lock_timeout: float) -> AsyncIterator[None]:
    """Hold the exclusive autostart lock of `socket_path`'s directory for the block.

    Creates the directory (0700) when missing below an existing parent. Raises
    `DaemonStartFailed` when another client holds the lock for `lock_timeout` seconds. Without a
    private directory there is nothing safe to lock and the block runs unlocked.
    """
    import fcntl

    directory = socket_path.parent
    if not _private_directory(directory):
        yield
        return
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            await _wait_for_lock(fd, lock_timeout, socket_path)
        yield
    finally:
        os.close(fd)  # releases the lock


async def _wait_for_lock(fd: int, lock_timeout: float, socket_path: Path) -> None:
    """Block on the lock in a worker thread (flock has no readiness to wait on)."""
    import fcntl

    import trio

    with trio.move_on_after(lock_timeout):
        await trio.to_thread.run_sync(fcntl.flock, fd, fcntl.LOCK_EX, abandon_on_cancel=True)
        return
    raise DaemonStartFailed(
        f"another robotactl has been starting robotad at {socket_path} for {lock_timeout:g} s "
        "without success",
        socket_path,
    )


async def start_daemon(socket_path: Path, *, ready_timeout: float) -> int:
    """Start robotad detached for `socket_path`; return its pid once it reports serving.

    Raises `DaemonStartFailed` with robotad's own output when it exits or closes the ready
    descriptor without writing, or when it stays silent for `ready_timeout` seconds (it is
    left running then: it may be slow rather than stuck).
    """
    import trio

    log = _DaemonLog.open(socket_path.parent)
    try:
        read_fd, write_fd = (_above_stdio(fd) for fd in os.pipe())
        async with trio.lowlevel.FdStream(read_fd) as ready:  # owns read_fd from here
            try:
                pid = _spawn_detached(socket_path, ready_fd=write_fd, log_fd=log.fd)
            finally:
                os.close(write_fd)  # robotad holds the only write end now
            exited = os.pidfd_open(pid)
            try:
                with trio.move_on_after(ready_timeout):
                    if await ready.receive_some(1):
                        return pid
                    status = await _exit_status(pid, exited)
                    raise DaemonStartFailed(_start_failure(socket_path, status, log), socket_path)
            finally:
                os.close(exited)
        raise DaemonStartFailed(
            f"robotad (pid {pid}) did not report ready within {ready_timeout:g} s at "
            f"{socket_path}; it may still be starting"
            + (f" (its output: {log.path})" if log.path else ""),
            socket_path,
        )
    finally:
        log.close()


def _spawn_detached(socket_path: Path, *, ready_fd: int, log_fd: int) -> int:
    """posix_spawn robotad in a new session; return its pid.

    posix_spawn rather than subprocess: the daemon outlives this process, and a `Popen` for a
    child that is never waited on complains when it is collected.
    """
    python = sys.executable
    if not python:
        raise DaemonStartFailed(
            "cannot start robotad: this Python does not know its own interpreter path",
            socket_path,
        )
    argv = [python, "-P", "-m", "robotad"]
    argv += ["--socket", str(socket_path), "--ready-fd", str(ready_fd)]
    os.set_inheritable(ready_fd, True)
    try:
        return os.posix_spawn(
            python,
            argv,
            _daemon_environment(),
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, log_fd, 1),
                (os.POSIX_SPAWN_DUP2, log_fd, 2),
            ],
            setsid=True,
            setsigmask=(),
            # Python ignores these; an ignored disposition would survive exec.
            setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
        )
    except OSError as exc:
        raise DaemonStartFailed(f"cannot start robotad with {python}: {exc}", socket_path) from exc


def _daemon_environment() -> dict[str, str]:
    """This process's environment minus systemd's per-unit variables, plus the import path.

    ``-P`` keeps the working directory off robotad's ``sys.path`` (a ``protocol`` package in
    the user's project must not shadow ours); when robotactl runs from a source tree rather
    than an installation, that tree goes on ``PYTHONPATH`` instead.
    """
    env = {k: v for k, v in os.environ.items() if k not in _ACTIVATION_VARIABLES}
    root = _source_tree()
    if root is not None:
        existing = env.get("PYTHONPATH")
        env["PYTHONPATH"] = f"{root}{os.pathsep}{existing}" if existing else str(root)
    return env


def _source_tree() -> Path | None:
    """The directory holding robotactl and robotad when it is not an installed location."""
    import site
    import sysconfig

    root = Path(__file__).resolve().parent.parent
    if not (root / "robotad" / "__init__.py").is_file():
        return None
    paths = sysconfig.get_paths()
    installed = {paths["purelib"], paths["platlib"], *site.getsitepackages()}
    installed.add(site.getusersitepackages())
    if any(Path(place).resolve() == root for place in installed if place):
        return None
    return root


async def _exit_status(pid: int, exited: int) -> int | None:
    """Reap `pid` once its pidfd says it exited; None if it is still running after a grace."""
    import trio

    with trio.move_on_after(_EXIT_GRACE):
        await trio.lowlevel.wait_readable(exited)
        # The pidfd is readable: the child has exited, so this reaps it without blocking.
        _, status = os.waitpid(pid, os.WNOHANG)  # noqa: ASYNC222
        return os.waitstatus_to_exitcode(status)
    return None


def _start_failure(socket_path: Path, status: int | None, log: _DaemonLog) -> str:
    if status is None:
        what = "closed its ready descriptor without serving"
    elif status < 0:
        what = f"was killed by signal {-status}"
    else:
        what = f"exited with status {status}"
    output = log.read_new_output()
    text = f"robotad {what} before serving at {os.path.abspath(socket_path)}"
    if output:
        text += ":\n" + "\n".join(f"  {line}" for line in output.splitlines())
    elif log.path:
        text += f" (its output: {log.path})"
    return text


class _DaemonLog:
    """Where the autostarted daemon writes: `LOG_NAME` in a private socket directory, else an
    anonymous temporary file. Remembers where this start began, to quote only its output."""

    _TAIL_BYTES = 4096

    def __init__(self, fd: int, path: Path | None) -> None:
        self.fd = fd
        self.path = path
        self._start = os.lseek(fd, 0, os.SEEK_END)

    @classmethod
    def open(cls, directory: Path) -> _DaemonLog:
        if _private_directory(directory):
            path = directory / LOG_NAME
            _rotate(path)
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
            try:
                return cls(_above_stdio(os.open(path, flags, 0o600)), path)
            except OSError:
                pass  # e.g. a planted symbolic link: fall back to an anonymous file
        import tempfile

        with tempfile.TemporaryFile() as handle:
            return cls(_above_stdio(os.dup(handle.fileno())), None)

    def read_new_output(self) -> str:
        """The last few KiB robotad wrote since this start, decoded leniently and stripped."""
        try:
            end = os.fstat(self.fd).st_size
            offset = max(self._start, end - self._TAIL_BYTES)
            if self.path is None:
                data = os.pread(self.fd, end - offset, offset)
            else:  # opened write-only: read through the name
                with open(self.path, "rb") as handle:
                    handle.seek(offset)
                    data = handle.read()
        except OSError:
            return ""
        return data.decode("utf-8", "replace").strip()

    def close(self) -> None:
        os.close(self.fd)


def _private_directory(directory: Path) -> bool:
    """Whether `directory` is (or, missing below an existing parent, now is) a real directory
    of this user closed to group and others — the only place a log or lock may go."""
    try:
        os.mkdir(directory, 0o700)
        os.chmod(directory, 0o700)  # the umask may have narrowed it; never trust it
    except FileExistsError:
        pass
    except OSError:
        return False
    try:
        info = os.lstat(directory)
    except OSError:
        return False
    return (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid == os.geteuid()
        and not stat.S_IMODE(info.st_mode) & 0o077
    )


def _rotate(path: Path) -> None:
    """Move an oversized log aside (one generation kept); robotad only ever appends."""
    try:
        if os.lstat(path).st_size > _LOG_ROTATE_BYTES:
            os.replace(path, path.with_name(path.name + ".1"))
    except OSError:
        pass  # missing, or not ours to move: the open that follows decides


def _above_stdio(fd: int) -> int:
    """`fd`, moved above 2 if needed, so the spawn's stdio actions cannot clobber it."""
    if fd > 2:
        return fd
    import fcntl

    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.close(fd)
    return moved
