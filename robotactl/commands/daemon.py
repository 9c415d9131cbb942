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
    from pathlib import Path

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
    help="Return only once the robotad process has exited (once it has closed the connection "
    "where its process cannot be seen from here); on a terminal, the wait is shown.",
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
        return _shutdown_and_wait(client, options.socket_path, params, deadline, line)

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
    client: BlockingClient,
    socket_path: Path,
    params: dict[str, Any],
    deadline: float,
    line: WaitingLine | None,
) -> Any:
    """Ask for shutdown, then wait (at most `deadline` seconds) until robotad is gone, shown on
    `line` meanwhile.

    robotad's process is found before the request (`robotactl.daemon_process`: under socket
    activation the connection's peer is systemd, not robotad) and watched through its pidfd:
    no polling, no pid reuse race. When it cannot be found from here (another pid namespace),
    the wait is for robotad to close this connection, the last step of its shutdown (its
    sessions are closed by then; its locks and exit follow): never for a process that may be
    another."""
    import os

    from robotactl.daemon_process import find_daemon_process
    from robotactl.waiting import wait_readable

    robotad = find_daemon_process(socket_path, client.socket)
    try:
        result = client.request("daemon/shutdown", params)
        if robotad is None:
            if not _wait_hangup(client.socket, deadline, line):
                raise CommandFailed(
                    f"robotad at {socket_path} is still shutting down after {deadline:g} s"
                )
        elif not wait_readable(robotad.pidfd, deadline, line, "robotad to exit"):
            raise CommandFailed(
                f"robotad (pid {robotad.pid}) is still running after {deadline:g} s"
            )
        return result
    finally:
        if robotad is not None:
            os.close(robotad.pidfd)


def _wait_hangup(sock: socket.socket, deadline: float, line: WaitingLine | None) -> bool:
    """Whether robotad closed `sock` (its shutdown's answer already read) within `deadline`
    seconds; anything it still sends there is dropped."""
    import time

    from robotactl.waiting import wait_readable

    ends = time.monotonic() + deadline
    while wait_readable(sock.fileno(), ends - time.monotonic(), line, "robotad to shut down"):
        try:
            if not sock.recv(65536):
                return True
        except OSError:  # reset: gone all the same
            return True
    return False
