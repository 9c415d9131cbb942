"""A real robotad in a subprocess, started and stopped the way a user (or robotactl's
autostart) would: the one launcher every test area shares.

`start_robotad` runs ``python -m robotad --socket SOCKET ARGS --ready-fd FD`` from the checkout,
with stdout and stderr appended to a log file, and returns once the daemon writes its ready
byte; it waits under `PROCESS_TIMEOUT` (never a sleep) and fails the test with the daemon's
output when it exits or stays silent. `stop_robotad` sends SIGTERM and reaps the process,
escalating to SIGKILL past the same deadline. Nothing here fakes a daemon in-process.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from robotad.daemon.events import SHAPE_VIOLATION

REPO = Path(__file__).resolve().parents[1]
#: Absolute bound on any one robotad start or exit (and on robotactl runs in tests/ctl).
PROCESS_TIMEOUT = 30.0


def child_environment(**extra: str) -> dict[str, str]:
    """os.environ (already isolated by tests/conftest.py) with this checkout importable and the
    event shape check on (`stop_robotad` fails a test on a violation), plus `extra`."""
    env = dict(os.environ)
    env["ROBOTA_CHECK_EVENTS"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


@dataclass
class RobotadProcess:
    """A robotad subprocess serving at `socket_path`; `log` holds its stdout and stderr."""

    socket_path: Path
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_exit(self) -> int:
        """The exit status once the daemon has exited on its own (bounded)."""
        return self.process.wait(PROCESS_TIMEOUT)


def start_robotad(
    socket_path: Path, log: Path, *args: str, env: dict[str, str] | None = None
) -> RobotadProcess:
    """Start robotad on `socket_path` with extra `args` and return once it reports serving.

    The child gets `env` (default: `child_environment()`) and appends its output to `log`.
    Fails the test with that output if it exits or stays silent for `PROCESS_TIMEOUT`.
    """
    read_fd, write_fd = os.pipe()
    argv = [sys.executable, "-m", "robotad", "--socket", str(socket_path), *args]
    with open(log, "ab") as log_file:
        process = subprocess.Popen(
            [*argv, "--ready-fd", str(write_fd)],
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            pass_fds=(write_fd,),
            env=child_environment() if env is None else env,
            cwd=REPO,
        )
    os.close(write_fd)
    daemon = RobotadProcess(socket_path, process, log)
    try:
        readable, _, _ = select.select([read_fd], [], [], PROCESS_TIMEOUT)
        ready = bool(readable) and os.read(read_fd, 1) != b""
    finally:
        os.close(read_fd)
    if not ready:
        stop_robotad(daemon)
        pytest.fail(f"robotad did not become ready at {socket_path}:\n{daemon.output()}")
    return daemon


def stop_robotad(daemon: RobotadProcess) -> None:
    """SIGTERM a daemon that is still running and reap it (SIGKILL past the deadline); then
    fail the test if the daemon published an event a strict client cannot decode."""
    if daemon.process.poll() is None:
        daemon.process.send_signal(signal.SIGTERM)
        try:
            daemon.process.wait(PROCESS_TIMEOUT)
        except subprocess.TimeoutExpired:
            daemon.process.kill()
            daemon.process.wait()
    output = daemon.output()
    assert SHAPE_VIOLATION not in output, f"robotad published an undecodable event:\n{output}"
