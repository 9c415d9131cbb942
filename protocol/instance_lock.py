"""What ``robotad.lock`` says about its holder — one reading for daemon and clients.

robotad holds an exclusive ``flock`` on ``robotad.lock`` beside its socket (PROTOCOL.md §1)
and writes its pid there, followed by `` stopping`` once its shutdown has begun. From that
moment its socket is gone but the lock stays held until it has closed every session, which
may take a turn's grace: a robotad started meanwhile waits for it (at most
`PREDECESSOR_WAIT` seconds) instead of refusing, and robotactl gives the one it autostarts
that much longer to report ready. The text is a courtesy; the ``flock`` alone is the claim.
"""

from __future__ import annotations

import os

#: `typing` is not imported for this: robotactl reads the lock on its start-up path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "LOCK_NAME",
    "PREDECESSOR_WAIT",
    "format_holder",
    "parse_holder",
    "read_holder",
    "shutting_down",
]

LOCK_NAME = "robotad.lock"
#: How long a starting robotad waits for a stopping one to exit: its grace (10 s by default),
#: the margin its sessions get to close and persist, and room to spare.
PREDECESSOR_WAIT = 60.0

_STOPPING = "stopping"


def format_holder(pid: int, *, stopping: bool = False) -> bytes:
    """The lock file's text for holder `pid`."""
    return f"{pid} {_STOPPING}\n".encode() if stopping else f"{pid}\n".encode()


def parse_holder(data: bytes) -> tuple[int | None, bool]:
    """``(pid, stopping)`` from the lock file's text; pid None when it names none."""
    words = data.decode("ascii", "replace").split()
    pid = int(words[0]) if words and words[0].isdigit() else None
    return pid, pid is not None and words[1:] == [_STOPPING]


def read_holder(path: Path) -> tuple[int | None, bool]:
    """`parse_holder` of the file at `path`; ``(None, False)`` when it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None, False
    try:
        return parse_holder(os.read(fd, 64))
    except OSError:
        return None, False
    finally:
        os.close(fd)


def shutting_down(path: Path) -> bool:
    """Whether the lock at `path` names a live process that marked itself stopping. The mark
    stays after a clean exit (the text is never cleared), hence the check that its pid lives;
    a reused pid only makes a client wait longer for a start."""
    pid, stopping = read_holder(path)
    if pid is None or not stopping:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # alive, another user's: not ours to judge
    return True
