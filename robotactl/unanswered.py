"""While robotad has not answered: what a one-shot command shows, and when it gives up.

Every request of a one-shot command (`robotactl.cli.call_daemon`) waits under an `AnswerWatch`,
its blocking client's `protocol.blocking_client.WaitWatcher`:

- After `NOTICE_AFTER` seconds without the reply, a terminal's stderr shows the wait as `run`
  shows a model's: one `robotactl.waiting.WaitingLine`, ``⠹ waiting for robotad (pid 4242) to
  answer session/list… 3s``, redrawn every `TICK` and cleared when the wait ends, however it
  ends. Under ``--json``, or when stderr is not a terminal (a script's), nothing is shown.
- After `bound` seconds (``--answer-timeout``, ``ROBOTA_ANSWER_TIMEOUT``, 30 by default:
  `robotactl.cli.ANSWER_TIMEOUT`) it asks robotad ``daemon/status`` on a connection of its
  own, waiting for that at most `bound` or `PROBE_TIMEOUT`, whichever is less. An answer means
  robotad is alive and still working on the request — a session's SessionStart hooks, an MCP
  server starting, a close letting a turn end — and the wait goes on, to be checked again
  `bound` later; so does a socket nobody listens at any more (robotad is shutting down: the
  connection ends when it exits). Silence means robotad is stopped (SIGSTOP, Ctrl-Z) or
  stuck: `DaemonUnresponsive`, naming the socket, the process and what to try (decision 75).

The pid shown is robotad's process as `robotactl.daemon_process` finds it (read once): the
connection's ``SO_PEERCRED`` names systemd under socket activation, and the pid ``robotad.lock``
holds is numbered in robotad's pid namespace, another process's number in ours when robotad
runs in a container; a number is shown only once /proc proves it is robotad's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from robotactl.connection import status_answered
from robotactl.daemon_errors import DaemonUnresponsive
from robotactl.daemon_process import daemon_pid
from robotactl.waiting import TICK

if TYPE_CHECKING:
    import socket
    from pathlib import Path

    from robotactl.waiting import WaitingLine

__all__ = ["NOTICE_AFTER", "PROBE_TIMEOUT", "AnswerWatch"]

#: Seconds without a reply before a terminal is shown the wait.
NOTICE_AFTER: Final = 1.0
#: The longest robotactl waits for robotad to answer ``daemon/status`` beside a request.
PROBE_TIMEOUT: Final = 2.0
#: What `robotactl.connection.status_answered` asks.
_PROBE_METHOD: Final = "daemon/status"


class AnswerWatch:
    """The `WaitWatcher` of one connection to the robotad at `socket_path` (`peer`, when
    given, is that connection: its peer is the first guess at robotad's process): `line` (None
    when nothing is to be shown) shows each wait, `bound` is when silence is checked.

    `waited_before` is how long the first request's answer has been awaited already (``status``
    asks again what its quick path asked); it counts towards the notice and the bound."""

    def __init__(
        self,
        socket_path: Path,
        *,
        bound: float,
        line: WaitingLine | None,
        waited_before: float = 0.0,
        peer: socket.socket | None = None,
    ) -> None:
        self.socket_path = socket_path
        self._peer = peer
        self.bound = bound
        self.line = line
        self._head_start = waited_before
        #: How long this wait had lasted when robotad last proved alive.
        self._alive_at = 0.0
        self._pid: int | None = None
        self._pid_read = False

    def waiting(self, method: str, waited: float) -> float:
        """Show the wait, check robotad at the bound; the seconds until the next call."""
        lasted = self._head_start + waited
        shown = self.line if lasted >= NOTICE_AFTER else None
        if shown is not None:  # first: the line stays while robotad is asked if it is alive
            shown.draw(lasted, f"{self._robotad()} to answer {method}")
        if lasted - self._alive_at >= self.bound:
            self._check_alive(method)
            self._alive_at = lasted
        until_check = self._alive_at + self.bound - lasted
        if shown is not None:
            return min(TICK, until_check)
        if self.line is None:
            return until_check
        return min(NOTICE_AFTER - lasted, until_check)

    def ended(self) -> None:
        """Clear the line; the next request's wait starts from nothing."""
        if self.line is not None:
            self.line.clear()
        self._head_start = 0.0
        self._alive_at = 0.0

    def _check_alive(self, method: str) -> None:
        """Return when robotad answers ``daemon/status`` on another connection (or is going
        away); raise `DaemonUnresponsive` when it is silent there too."""
        if status_answered(self.socket_path, min(self.bound, PROBE_TIMEOUT)) is not False:
            return
        raise DaemonUnresponsive(self._unresponsive(method), self.socket_path, self._holder())

    def _unresponsive(self, method: str) -> str:
        """Why robotactl gives up, and what to try, for a person."""
        pid = self._holder()
        elsewhere = (
            "on this connection or a second one"
            if method == _PROBE_METHOD
            else f"nor {_PROBE_METHOD} on a second connection"
        )
        said = (
            f"{self._robotad()} at {self.socket_path} did not answer {method} within "
            f"{self.bound:g} s, {elsewhere}"
        )
        if pid is not None and _stopped(pid):
            return f"{said}: it is stopped (Ctrl-Z or SIGSTOP); `kill -CONT {pid}` resumes it"
        log = (
            "its log says what it is doing (`journalctl --user -u robotad`, else "
            f"{self.socket_path.parent / 'robotad.log'})"
        )
        longer = (
            "If it is only slow, wait longer with --answer-timeout SECONDS (or "
            "ROBOTA_ANSWER_TIMEOUT)"
        )
        if pid is not None:
            return f"{said}: it is running, but stuck or overloaded; {log}. {longer}"
        return (
            f"{said}: it is stopped or stuck. `systemctl --user status robotad` shows which "
            f"(`kill -CONT PID` resumes a stopped one); {log}. {longer}"
        )

    def _robotad(self) -> str:
        pid = self._holder()
        return "robotad" if pid is None else f"robotad (pid {pid})"

    def _holder(self) -> int | None:
        """robotad's pid in our pid namespace (found once), or None when not proven."""
        if not self._pid_read:
            self._pid_read = True
            self._pid = daemon_pid(self.socket_path, self._peer)
        return self._pid


def _stopped(pid: int) -> bool:
    """Whether process `pid` is stopped (state ``T``, or ``t`` under a tracer), as /proc says."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
    except OSError:
        return False
    fields = data.rpartition(b")")[2].split()  # the name, in parentheses, may hold anything
    return bool(fields) and fields[0] in (b"T", b"t")
