"""The listening socket: bound here, or handed over by systemd (PROTOCOL.md §1).

`bind_listener` binds a fresh Unix stream socket under umask 0o177, so the socket file is 0600
from the moment it exists — there is no window in which another user could connect. It must be
called while holding the instance lock: a socket file already at the path is then known to be
stale (its daemon is gone) and is replaced. Anything at the path that is not a socket is left
alone and refused.

`activated_listener` takes fd 3 when ``LISTEN_PID`` names this process and ``LISTEN_FDS`` ≥ 1,
the `sd_listen_fds` convention, without libsystemd; variables addressed to this process that it
cannot use stop the start (`ActivationError`) rather than let robotad bind a socket of its own.
It removes the ``LISTEN_*`` variables from the environment so that no child process (hooks,
tools) mistakes itself for the activated one.

Either way the caller gets a `Listener`: the stdlib socket, its filesystem path (None for an
abstract or unnamed socket) and whether this process owns the path — only a socket we bound is
unlinked on exit; systemd keeps its own.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import stat
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "LISTEN_FDS_START",
    "ActivationError",
    "Listener",
    "ListenerError",
    "activated_listener",
    "bind_listener",
    "refuse_non_socket",
]

#: The first descriptor systemd passes (``SD_LISTEN_FDS_START``).
LISTEN_FDS_START = 3
#: More descriptors than any process can hold (Linux's default ``fs.nr_open``).
_MOST_FDS = 1 << 20
#: How much of a malformed variable's value a message quotes.
_SHOWN_CHARS = 40
#: What to do about activation variables robotad cannot use.
_FIX = (
    "robotad serves the socket it was handed or none: fix what started it (the robotad.socket "
    "unit, systemd-socket-activate), or unset LISTEN_PID and LISTEN_FDS to let it bind its own"
)

log = logging.getLogger("robotad.server")


class ListenerError(Exception):
    """The socket cannot be bound; the message names the path and the reason."""


class ActivationError(ListenerError):
    """The activation variables are addressed to this process but unusable: malformed, or the
    descriptor they announce is not a listening Unix stream socket. The message says what is
    wrong and what to do."""

    def __init__(self, problem: str) -> None:
        super().__init__(f"socket activation: {problem}; {_FIX}")


@dataclass
class Listener:
    """A listening Unix stream socket and what the daemon needs to know about it."""

    sock: socket.socket
    path: Path | None
    owned: bool
    activated: bool
    _identity: tuple[int, int] | None = field(default=None, repr=False)

    def socket_file_is_gone(self) -> bool:
        """Whether the socket file we bound was removed or replaced (a runtime folder removed
        at logout, a file aged out of /tmp): clients can no longer reach us. False for a
        socket we did not bind (systemd keeps its own), and when the file cannot be checked."""
        if not self.owned or self.path is None or self._identity is None:
            return False
        try:
            info = os.lstat(self.path)
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return (info.st_dev, info.st_ino) != self._identity

    def remove_socket_file(self) -> None:
        """Unlink the socket file if we bound it and it is still ours (same device and inode).

        Call it before closing `sock`: while the socket is bound its inode cannot be recycled,
        so the identity check is exact. Never raises: a missing or replaced file is left alone.
        """
        if not self.owned or self.path is None or self._identity is None:
            return
        with contextlib.suppress(OSError):
            info = os.lstat(self.path)
            if stat.S_ISSOCK(info.st_mode) and (info.st_dev, info.st_ino) == self._identity:
                os.unlink(self.path)


def bind_listener(path: Path, *, backlog: int = 128) -> Listener:
    """Bind and listen on `path`, replacing a stale socket file. Caller holds the instance lock.

    Raises `ListenerError` when something other than a socket occupies the path or the bind
    fails. The returned socket is blocking and close-on-exec; wrap it for trio.
    """
    _remove_stale_socket(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        previous = os.umask(0o177)
        try:
            sock.bind(os.fspath(path))
        finally:
            os.umask(previous)
        sock.listen(backlog)
        info = os.lstat(path)
    except OSError as exc:
        sock.close()
        raise ListenerError(f"cannot listen on {path}: {exc.strerror or exc}") from exc
    return Listener(
        sock=sock, path=path, owned=True, activated=False, _identity=(info.st_dev, info.st_ino)
    )


def activated_listener(environ: MutableMapping[str, str]) -> Listener | None:
    """The listener systemd passed on fd 3, or None when this process was not socket-activated.

    `sd_listen_fds`'s reading: the variables are this process's only when ``LISTEN_PID`` is its
    pid; absent, or naming another process (inherited from an activated ancestor: a warning
    says so), they are ignored and robotad binds its own socket. Addressed to this process but
    malformed (``LISTEN_FDS`` missing, not a number or below 1; ``LISTEN_PID`` not a pid), or
    with fd 3 not a listening ``AF_UNIX``/``SOCK_STREAM`` socket, they raise `ActivationError`
    naming what is wrong: robotad serves the socket it was handed or none, never one of its
    own in its place (at systemd's path that would replace systemd's socket file). Descriptors
    beyond the first are made close-on-exec and left unserved (a warning names them).
    ``LISTEN_PID``, ``LISTEN_FDS`` and ``LISTEN_FDNAMES`` are removed from `environ` once
    read, whoever they were for, so that no child process (hooks, tools) takes them for its own.
    """
    pid_text, count_text = environ.get("LISTEN_PID"), environ.get("LISTEN_FDS")
    for name in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
        environ.pop(name, None)
    if pid_text is None:
        if count_text is not None:
            log.warning("LISTEN_FDS is set without LISTEN_PID: not socket-activated; ignoring it")
        return None
    if not _is_decimal(pid_text):
        raise ActivationError(f"LISTEN_PID is {_shown(pid_text)}, not a process id")
    if int(pid_text) != os.getpid():
        log.warning(
            "LISTEN_PID names another process (pid %s, not this robotad's %d): not "
            "socket-activated; ignoring LISTEN_FDS",
            int(pid_text),
            os.getpid(),
        )
        return None
    if count_text is None or not _is_decimal(count_text) or int(count_text) > _MOST_FDS:
        given = "not set" if count_text is None else _shown(count_text)
        raise ActivationError(
            f"LISTEN_PID names this robotad (pid {os.getpid()}) but LISTEN_FDS is {given}, "
            "not a number of sockets (1 or more)"
        )
    _keep_from_children(int(count_text))
    return _listener_on_fd3()


def _listener_on_fd3() -> Listener:
    """fd 3 as the activated `Listener`; `ActivationError` unless it is a listening Unix
    stream socket (the descriptor is left open then: it is not ours to close)."""
    try:
        sock = socket.socket(fileno=LISTEN_FDS_START)
    except OSError as exc:
        raise ActivationError(f"fd {LISTEN_FDS_START} is not a socket") from exc
    if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM:
        sock.detach()
        raise ActivationError(
            f"fd {LISTEN_FDS_START} is {sock.family.name}/{sock.type.name}; robotad needs a "
            "Unix stream socket (ListenStream=/path)"
        )
    if not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
        sock.detach()
        raise ActivationError(
            f"fd {LISTEN_FDS_START} is not listening (a socket unit with Accept=yes passes "
            "a connection, not a listener)"
        )
    sock.set_inheritable(False)
    return Listener(sock=sock, path=_filesystem_name(sock), owned=False, activated=True)


def _keep_from_children(count: int) -> None:
    """Make the descriptors beyond fd 3 close-on-exec (robotad serves one socket), as
    `sd_listen_fds` does for all of them: a child must not inherit systemd's listeners."""
    extra = range(LISTEN_FDS_START + 1, LISTEN_FDS_START + count)
    if not extra:
        return
    for fd in extra:
        with contextlib.suppress(OSError):  # not open: nothing to keep from anyone
            os.set_inheritable(fd, False)
    ignored = f"fd {extra[0]}" if len(extra) == 1 else f"fds {extra[0]}-{extra[-1]}"
    log.warning(
        "LISTEN_FDS=%d: robotad serves the first socket (fd %d) and ignores %s",
        count,
        LISTEN_FDS_START,
        ignored,
    )


def _is_decimal(text: str) -> bool:
    """Whether `text` is a positive decimal number, as a pid or a count of sockets is."""
    return text.isascii() and text.isdigit() and int(text) > 0


def _shown(value: str) -> str:
    """`value` quoted for a message, cut short when long."""
    return repr(value if len(value) <= _SHOWN_CHARS else value[:_SHOWN_CHARS] + "…")


def _filesystem_name(sock: socket.socket) -> Path | None:
    """The listener's own path, or None for an abstract (``\\0``-prefixed) or unnamed socket."""
    name = sock.getsockname()
    if isinstance(name, bytes):
        name = os.fsdecode(name)
    if not name or name.startswith("\0"):
        return None
    return Path(name)


def refuse_non_socket(path: Path) -> bool:
    """Whether something is at `path`; `ListenerError` when that is not a socket (a file
    robotad must never replace). Checked before anything is created beside it, and again
    under the instance lock when binding."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise ListenerError(f"cannot inspect {path}: {exc.strerror}") from exc
    if not stat.S_ISSOCK(info.st_mode):
        raise ListenerError(f"{path} exists and is not a socket; refusing to replace it")
    return True


def _remove_stale_socket(path: Path) -> None:
    if not refuse_non_socket(path):
        return
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise ListenerError(f"cannot remove stale socket {path}: {exc.strerror}") from exc
