"""``robotactl status`` and ``robotactl shutdown``: the daemon itself (PROTOCOL.md §5, §9).

``status`` autostarts a missing daemon like every command (a status that says "running" is
then true). ``shutdown`` never does: with nothing running there is nothing to stop, and it
says so on stderr and exits 0, so it is safe in cleanup scripts.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

from robotactl.cli import ClientOptions, CommandFailed, DaemonNotRunningFailed, call_daemon
from robotactl.seconds import Seconds
from robotactl.status_view import format_uptime, status_rows

if TYPE_CHECKING:
    import socket

    from protocol.blocking_client import BlockingClient
    from robotactl.waiting import WaitingLine

__all__ = ["format_uptime", "shutdown", "status", "status_rows"]

#: The daemon's own default for ``graceSeconds`` (PROTOCOL.md §5).
DEFAULT_GRACE = 10.0
#: How much longer than the grace ``shutdown --wait`` waits for the process to be gone.
WAIT_MARGIN = 30.0


@click.command(short_help="Show robotad's version, pid, uptime and sessions.")
@click.pass_obj
def status(options: ClientOptions) -> None:
    """Show robotad's version, pid, uptime, socket, state dir and session counts.

    With --json, prints the daemon/status result as the daemon sent it.
    """
    from robotactl import entry

    def ask(client: BlockingClient) -> Any:
        return client.request("daemon/status", {})

    # A daemon the quick path already waited for (and asks again here) is not given as long
    # again: that wait counts.
    result = call_daemon(options, ask, waited_before=entry.waited)
    if options.output.json_mode:
        options.output.json(result)
    else:
        options.output.table(status_rows(result, now=datetime.now(UTC)))


@click.command(short_help="Stop robotad (never starts one).")
@click.option(
    "--grace",
    type=Seconds(),
    default=None,
    metavar="SECONDS",
    help=f"Time running turns get to finish before they are aborted "
    f"(daemon default: {DEFAULT_GRACE:g}).",
)
@click.option(
    "--wait",
    is_flag=True,
    help="Return only once the robotad process has exited (on a terminal, the wait is shown).",
)
@click.pass_obj
def shutdown(options: ClientOptions, grace: float | None, wait: bool) -> None:
    """Stop robotad: stop accepting, let turns finish within the grace, close sessions, exit.

    Never starts a daemon; with none running it says so and exits 0.

    With --json, prints the daemon/shutdown result ({"ok": true}), or {"ok": true,
    "running": false} when none was running.
    """
    params: dict[str, Any] = {}
    if grace is not None:
        # An integral grace goes out as an integer, which every numeric schema accepts.
        params["graceSeconds"] = int(grace) if grace.is_integer() else grace
    deadline = (DEFAULT_GRACE if grace is None else grace) + WAIT_MARGIN

    def stop(client: BlockingClient) -> Any:
        if not wait:
            return client.request("daemon/shutdown", params)
        from robotactl.waiting import WaitingLine

        line = WaitingLine.for_terminal(options.output)
        return _shutdown_and_wait(client, params, deadline, line)

    try:
        result = call_daemon(options, stop, autostart=False)
    except DaemonNotRunningFailed as exc:
        if options.output.json_mode:
            options.output.json({"ok": True, "running": False})
        options.output.notice(f"robotad is not running at {exc.socket_path}; nothing to shut down")
        return
    if options.output.json_mode:
        options.output.json(result)
    elif wait:
        options.output.line("robotad has shut down")
    else:
        options.output.line("robotad is shutting down")


def _shutdown_and_wait(
    client: BlockingClient, params: dict[str, Any], deadline: float, line: WaitingLine | None
) -> Any:
    """Ask for shutdown, then wait (at most `deadline` seconds) until the daemon process is
    gone, shown on `line` meanwhile. The process is the peer of our socket (``SO_PEERCRED``,
    so its pid is right in our pid namespace), watched through a pidfd opened before the
    request: no polling, no pid reuse race."""
    import os

    from robotactl.waiting import wait_readable

    pid, pidfd = _peer_process(client.socket)
    try:
        result = client.request("daemon/shutdown", params)
        if pidfd is not None:
            exited = wait_readable(pidfd, deadline, line, "robotad to exit")
            if not exited:
                raise CommandFailed(f"robotad (pid {pid}) is still running after {deadline:g} s")
        return result
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _peer_process(sock: socket.socket) -> tuple[int | None, int | None]:
    """The pid of the process at the other end of `sock` and a pidfd for it, or Nones when
    `sock` is not a Unix socket or the process is already gone."""
    import os
    import socket
    import struct

    if sock.family != socket.AF_UNIX:
        return None, None
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid = struct.unpack("3i", creds)[0]
    try:
        return pid, os.pidfd_open(pid)
    except ProcessLookupError:
        return pid, None
