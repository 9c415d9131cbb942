"""Commands tied to robotad's life: a killed daemon kills the commands it started.

`open_tethered_process` starts a command as the leader of a new session and process group
(like ``start_new_session=True``) with a watcher in the same group: a small ``/bin/sh``
subshell blocked reading a pipe whose only writer is robotad. robotad never writes to it;
when robotad's process ends — a crash, SIGKILL, anything — the kernel closes the write end,
the read sees end-of-file and the watcher kills the command's whole session (``pkill -s``,
where procps is installed in a system folder) and process group (``kill -KILL 0``): the
command, its children even in groups of their own (GNU ``timeout``, ``set -m``), and the
watcher itself. The watcher is forked twice, so it is no child of the command (a command
waiting for its own children would otherwise wait for it).

Why not ``PR_SET_PDEATHSIG``: it fires when the *thread* that forked the child ends, and trio
forks in a worker thread that exits when idle — it would kill a long command of a healthy
daemon — and it reaches only the direct child, never the command's own children.

The write end lives until `release` (which `terminate_process_tree` calls once the command
is reaped), so a command robotad ends normally never sees the watcher fire. The command is
``exec``'d by the tether shell, so its pid is the group leader's and ``$$`` is unchanged.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
from collections.abc import Sequence
from typing import Any

import trio

from robotad import open_files

__all__ = ["TETHER_SHELL", "open_tethered_process", "release", "tethered"]

TETHER_SHELL = "/bin/sh"
#: The descriptor the tether's read end has in the child (one digit: what every sh parses).
_TETHER_FD = 3
#: Where the watcher finds pkill: robotad's own system folders, never the command's ``PATH``
#: (which it may set, or point at its workspace). Without procps only the group is killed.
_PKILL = shutil.which("pkill", path="/usr/bin:/bin:/usr/sbin:/sbin")


def _script(pkill: str | None) -> str:
    """The tether shell's script (see the module doc)."""
    session = f"{shlex.quote(pkill)} -KILL -s $$; " if pkill else ""
    return (
        f"( ( read -r _ <&3; {session}kill -KILL 0 ) </dev/null >/dev/null 2>&1 & ); "
        'exec 3<&-; exec "$@"'
    )


_SCRIPT = _script(_PKILL)
#: pid of a tethered command's leader → the write end robotad holds for it.
_tethers: dict[int, int] = {}


async def open_tethered_process(argv: Sequence[str], **options: Any) -> trio.Process:
    """Start `argv` (as `trio.lowlevel.open_process` would, in a new session) tethered to
    this process; see the module doc. `pass_fds` may add descriptors (numbered above 3) for
    the command. Raises `OSError` when it cannot start."""
    read_fd, write_fd = os.pipe2(os.O_CLOEXEC)

    def read_end_as_fd_3() -> None:  # in the child, before exec: plain os calls only
        open_files.restore_in_child()
        if read_fd == _TETHER_FD:
            os.set_inheritable(read_fd, True)
        else:
            os.dup2(read_fd, _TETHER_FD)

    more_fds = tuple(options.pop("pass_fds", ()))  # e.g. a sandbox's seccomp program
    try:
        process = await trio.lowlevel.open_process(
            [TETHER_SHELL, "-c", _SCRIPT, "robota-tether", *argv],
            pass_fds=(_TETHER_FD, *more_fds),
            preexec_fn=read_end_as_fd_3,
            start_new_session=True,
            **options,
        )
    except BaseException:
        os.close(write_fd)
        raise
    finally:
        os.close(read_fd)
    _tethers[process.pid] = write_fd
    return process


def tethered(pid: int) -> bool:
    """Whether the command led by `pid` is still tethered (not released)."""
    return pid in _tethers


def release(pid: int) -> None:
    """Let go of the tether of the command led by `pid` (a no-op for any other pid). Call
    only once the command has ended: its watcher kills the group when the pipe closes."""
    fd = _tethers.pop(pid, None)
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)
