"""Who is on the other end of an accepted connection (PROTOCOL.md §1).

`SO_PEERCRED` reports the credentials the client had when it called `connect(2)`; the kernel
fills it in, so the client cannot lie about it. The server asks before reading a single byte:
a peer whose uid differs from the daemon's (effective) uid is closed unread and unanswered.
The socket's 0600 mode already keeps other users out; this check also covers a socket whose
mode someone else chose (a systemd ``SocketMode=``, a hand-made activation socket).
"""

from __future__ import annotations

import os
import socket
import struct
from dataclasses import dataclass
from typing import Protocol

__all__ = ["PeerCredentials", "peer_credentials"]

_UCRED = struct.Struct("3i")  # struct ucred { pid_t pid; uid_t uid; gid_t gid; }


class _HasSockopt(Protocol):
    def getsockopt(self, level: int, optname: int, buflen: int, /) -> bytes: ...


@dataclass(frozen=True)
class PeerCredentials:
    """The connecting process as the kernel saw it at `connect(2)` time."""

    pid: int
    uid: int
    gid: int

    def is_same_user(self, uid: int | None = None) -> bool:
        """True when the peer runs as `uid` (default: this process's effective uid)."""
        return self.uid == (os.geteuid() if uid is None else uid)


def peer_credentials(sock: _HasSockopt) -> PeerCredentials:
    """Read ``SO_PEERCRED`` from a connected Unix socket (stdlib or trio). Reads no data.

    Raises `OSError` if the socket is not a connected Unix socket.
    """
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    pid, uid, gid = _UCRED.unpack(raw)
    return PeerCredentials(pid=pid, uid=uid, gid=gid)
