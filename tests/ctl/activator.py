"""Socket activation in systemd's shape, without systemd: ``python activator.py SOCKET ARGV…``.

Binds and listens on SOCKET (mode 0600), says ``listening``, then forks a child that gets the
listener as fd 3 with ``LISTEN_FDS=1``, ``LISTEN_PID`` (the child's own pid) and
``LISTEN_FDNAMES`` set and execs ARGV, as the service manager starts a socket unit's service.
It says ``started PID``, then ``exited STATUS`` once the child is gone, and keeps running with
the listener open until it is killed, as ``systemd --user`` does. So the process that called
listen(2) — the one a client's ``SO_PEERCRED`` names — is not the service, unlike under
``systemd-socket-activate``, which execs the service in its own place.
"""

from __future__ import annotations

import os
import signal
import socket
import sys


def main(path: str, argv: list[str]) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    previous = os.umask(0o177)
    try:
        listener.bind(path)
    finally:
        os.umask(previous)
    listener.listen(16)
    print("listening", flush=True)
    child = os.fork()
    if child == 0:
        if listener.fileno() != 3:
            os.dup2(listener.fileno(), 3)
        os.set_inheritable(3, True)  # as systemd passes it
        os.environ["LISTEN_FDS"] = "1"
        os.environ["LISTEN_PID"] = str(os.getpid())
        os.environ["LISTEN_FDNAMES"] = "robotad.socket"
        os.execvp(argv[0], argv)
    print(f"started {child}", flush=True)
    _, status = os.waitpid(child, 0)
    print(f"exited {os.waitstatus_to_exitcode(status)}", flush=True)
    while True:
        signal.pause()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
