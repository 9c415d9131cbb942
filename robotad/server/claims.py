"""One daemon a folder: the instance locks a starting daemon takes (PROTOCOL.md §1).

`claim_socket_folder` takes ``robotad.lock`` beside the socket (creating the folder 0700),
before anything is bound there; `claim_state_folder` the same lock in the state folder,
unless that is the socket's folder too, so that one daemon owns a state folder whatever its
socket. A lock held by a daemon that is shutting down (it marked it so, `mark_stopping`) is
waited for, at most `PREDECESSOR_WAIT` seconds: its socket is gone, and a daemon started
meanwhile (the next robotactl command after ``robotactl shutdown``) must not refuse as
"already running". Every lock taken is released by the caller's `ExitStack`; every refusal
is a `StartupError` fit to print as is.
"""

from __future__ import annotations

import logging
import os
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import Final

import trio

from protocol.instance_lock import PREDECESSOR_WAIT
from robotad.log import fields
from robotad.server.errors import StartupError
from robotad.server.lock import LOCK_NAME, AlreadyRunning, InstanceLock
from robotad.server.paths import RuntimeDirError, ensure_private_dir
from robotad.storage import fsio

__all__ = ["claim_socket_folder", "claim_state_folder", "mark_stopping"]

log = logging.getLogger("robotad.server")

#: How often a lock held by a stopping daemon is tried again (flock has nothing to wait on).
_PREDECESSOR_POLL: Final = 0.05


async def claim_socket_folder(directory: Path, cleanup: ExitStack) -> InstanceLock:
    """The instance lock in the socket's folder (created 0700 when missing)."""
    try:
        ensure_private_dir(directory)
    except RuntimeDirError as exc:
        raise StartupError(str(exc)) from exc
    return await _hold(directory / LOCK_NAME, cleanup)


async def _hold(path: Path, cleanup: ExitStack, advice: str = "") -> InstanceLock:
    """Take the lock at `path` until `cleanup` runs, waiting while its holder is shutting
    down; else raise `StartupError` naming who holds it (with `advice` after)."""
    lock = InstanceLock(path)
    waited: AlreadyRunning | None = None
    with trio.move_on_after(PREDECESSOR_WAIT):
        while True:
            try:
                lock.acquire()
            except AlreadyRunning as exc:
                if not exc.stopping:
                    raise StartupError(f"{exc}{advice}") from exc
                if waited is None:
                    log.info(
                        "robotad pid %s is shutting down; waiting for it to exit",
                        exc.pid,
                        extra=fields(lock=path),
                    )
                waited = exc
                await trio.sleep(_PREDECESSOR_POLL)
                continue
            except OSError as exc:
                raise StartupError(
                    f"cannot open lock file {lock.path}: {exc.strerror or exc}"
                ) from exc
            cleanup.callback(lock.release)
            return lock
    raise StartupError(
        f"{waited} after {PREDECESSOR_WAIT:g} s of waiting for it to exit{advice}; "
        "try again once it has exited"
    )


async def claim_state_folder(
    state: Path, socket_lock: Path, cleanup: ExitStack
) -> InstanceLock | None:
    """One daemon a state folder: the instance lock again, in the state folder (unless that is
    the socket's folder too), so that a daemon started for another socket cannot open — and
    delete, and overwrite — the sessions, journals and logs another one holds. The lock, or
    None when it is the socket's."""
    try:
        fsio.ensure_private_dir(state)
    except OSError as exc:
        raise StartupError(f"cannot use state folder {state}: {exc.strerror or exc}") from exc
    path = state / LOCK_NAME
    if _same_file(path, socket_lock):
        return None
    return await _hold(
        path,
        cleanup,
        "; one robotad owns a state folder: stop that one, or give this one "
        "another (ROBOTA_STATE_DIR)",
    )


def _same_file(path: Path, other: Path) -> bool:
    with suppress(OSError):
        return os.path.samefile(path, other)
    return False


def mark_stopping(locks: list[InstanceLock]) -> None:
    """Say in every lock this daemon holds that its shutdown has begun (`Server.on_stopping`)."""
    for lock in locks:
        lock.mark_stopping()
