"""While robotad has not answered, or not taken the connection: what robotactl shows, and when
it gives up.

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

Connecting waits only while robotad's backlog is full (it accepts too slowly, or not at all:
stopped, stuck; `protocol.unix_connect`). Every command's connect is watched by a
`ConnectWatch`: after `NOTICE_AFTER` a terminal's stderr shows ``⠹ waiting for robotad at
PATH to accept the connection (it may be overloaded or stuck)… 3s`` (nothing under ``--json``
or for a script), and after `bound` it gives up with `DaemonUnresponsive`, the same advice as
for a silent robotad — with nothing asked on a second connection, which would find no place
either (decision 82).

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

__all__ = ["NOTICE_AFTER", "PROBE_TIMEOUT", "AnswerWatch", "ConnectWatch"]

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
        self.bound = bound
        self.line = line
        self._robotad = _Robotad(socket_path, peer)
        self._head_start = waited_before
        #: How long this wait had lasted when robotad last proved alive.
        self._alive_at = 0.0

    def waiting(self, method: str, waited: float) -> float:
        """Show the wait, check robotad at the bound; the seconds until the next call."""
        lasted = self._head_start + waited
        shown = self.line if lasted >= NOTICE_AFTER else None
        if shown is not None:  # first: the line stays while robotad is asked if it is alive
            shown.draw(lasted, f"{self._robotad.name()} to answer {method}")
        if lasted - self._alive_at >= self.bound:
            self._check_alive(method)
            self._alive_at = lasted
        return _next_call(self.line, lasted, self._alive_at + self.bound - lasted)

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
        elsewhere = (
            "on this connection or a second one"
            if method == _PROBE_METHOD
            else f"nor {_PROBE_METHOD} on a second connection"
        )
        raise self._robotad.unresponsive(
            f"did not answer {method} within {self.bound:g} s, {elsewhere}"
        )


class ConnectWatch:
    """The `ConnectWatcher` of robotactl's connects to the robotad at `socket_path`, told only
    while robotad's backlog is full: `line` (None when nothing is to be shown) shows the wait
    after `NOTICE_AFTER`, and at `bound` the connect is given up on (`DaemonUnresponsive`):
    no second connection could prove robotad alive, since none gets a place either."""

    def __init__(self, socket_path: Path, *, bound: float, line: WaitingLine | None) -> None:
        self.socket_path = socket_path
        self.bound = bound
        self.line = line
        self._robotad = _Robotad(socket_path, None)

    def waiting(self, waited: float) -> float:
        """Show the wait, give up at the bound; the seconds until the next call."""
        if waited >= NOTICE_AFTER and self.line is not None:
            self.line.draw(
                waited,
                f"{self._robotad.name()} at {self.socket_path} to accept the connection "
                "(it may be overloaded or stuck)",
            )
        if waited >= self.bound:
            raise self._robotad.unresponsive(
                f"accepted no connection within {self.bound:g} s (the connections waiting "
                "for it fill its socket's queue)"
            )
        return _next_call(self.line, waited, self.bound - waited)

    def ended(self) -> None:
        """Clear the line."""
        if self.line is not None:
            self.line.clear()


def _next_call(line: WaitingLine | None, lasted: float, until_bound: float) -> float:
    """Seconds until a watch wants to be told again: the line's next redraw once it shows,
    its first drawing before that, the bound in any case."""
    if line is None:
        return until_bound
    if lasted >= NOTICE_AFTER:
        return min(TICK, until_bound)
    return min(NOTICE_AFTER - lasted, until_bound)


class _Robotad:
    """The robotad at `socket_path` as a person is told of it: its process (found once, the
    first guess being `peer`'s), and what a silence of it means."""

    def __init__(self, socket_path: Path, peer: socket.socket | None) -> None:
        self.socket_path = socket_path
        self._peer = peer
        self._pid: int | None = None
        self._pid_read = False

    def name(self) -> str:
        pid = self.pid()
        return "robotad" if pid is None else f"robotad (pid {pid})"

    def pid(self) -> int | None:
        """robotad's pid in our pid namespace (found once), or None when not proven."""
        if not self._pid_read:
            self._pid_read = True
            self._pid = daemon_pid(self.socket_path, self._peer)
        return self._pid

    def unresponsive(self, what: str) -> DaemonUnresponsive:
        """The error giving up on robotad, which `what` (``did not answer …``), saying why
        for a person and what to try."""
        pid = self.pid()
        said = f"{self.name()} at {self.socket_path} {what}"
        if pid is not None and _stopped(pid):
            why = f"{said}: it is stopped (Ctrl-Z or SIGSTOP); `kill -CONT {pid}` resumes it"
            return DaemonUnresponsive(why, self.socket_path, pid)
        log = (
            "its log says what it is doing (`journalctl --user -u robotad`, else "
            f"{self.socket_path.parent / 'robotad.log'})"
        )
        longer = (
            "If it is only slow, wait longer with --answer-timeout SECONDS (or "
            "ROBOTA_ANSWER_TIMEOUT)"
        )
        if pid is not None:
            why = f"{said}: it is running, but stuck or overloaded; {log}. {longer}"
        else:
            why = (
                f"{said}: it is stopped or stuck. `systemctl --user status robotad` shows "
                f"which (`kill -CONT PID` resumes a stopped one); {log}. {longer}"
            )
        return DaemonUnresponsive(why, self.socket_path, pid)


def _stopped(pid: int) -> bool:
    """Whether process `pid` is stopped (state ``T``, or ``t`` under a tracer), as /proc says."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
    except OSError:
        return False
    fields = data.rpartition(b")")[2].split()  # the name, in parentheses, may hold anything
    return bool(fields) and fields[0] in (b"T", b"t")
