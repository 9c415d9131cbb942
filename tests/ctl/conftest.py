"""Fixtures of the robotactl tests: a real robotad in a subprocess, and robotactl as a
subprocess with an absolute timeout.

`robotad` starts ``python -m robotad --socket <tmp>/robotad.sock --ready-fd FD`` exactly as a
user (or robotactl's autostart) would, waits for the ready byte under a deadline (never a
sleep), and stops the daemon at teardown (SIGTERM, then SIGKILL past the deadline). Nothing
here fakes a daemon in-process. Candidates for promotion to tests/conftest.py.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: Absolute bound on any one robotad start, robotactl run or daemon exit in these tests.
PROCESS_TIMEOUT = 30.0


@dataclass
class RunningDaemon:
    """A robotad subprocess serving at `socket_path`; `log` holds its stdout and stderr."""

    socket_path: Path
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def child_environment(**extra: str) -> dict[str, str]:
    """os.environ (already isolated by tests/conftest.py) with this checkout importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def start_robotad(socket_path: Path, log: Path, *args: str) -> RunningDaemon:
    """Start robotad on `socket_path` and return once it reports serving.

    Fails the test with robotad's output if it exits or stays silent for `PROCESS_TIMEOUT`.
    """
    read_fd, write_fd = os.pipe()
    argv = [sys.executable, "-m", "robotad", "--socket", str(socket_path), *args]
    with open(log, "wb") as log_file:
        process = subprocess.Popen(
            [*argv, "--ready-fd", str(write_fd)],
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            pass_fds=(write_fd,),
            env=child_environment(),
            cwd=REPO,
        )
    os.close(write_fd)
    daemon = RunningDaemon(socket_path, process, log)
    try:
        readable, _, _ = select.select([read_fd], [], [], PROCESS_TIMEOUT)
        ready = bool(readable) and os.read(read_fd, 1) != b""
    finally:
        os.close(read_fd)
    if not ready:
        stop_robotad(daemon)
        pytest.fail(f"robotad did not become ready at {socket_path}:\n{daemon.output()}")
    return daemon


def stop_robotad(daemon: RunningDaemon) -> None:
    """SIGTERM a daemon that is still running and reap it (SIGKILL past the deadline)."""
    if daemon.process.poll() is None:
        daemon.process.send_signal(signal.SIGTERM)
        try:
            daemon.process.wait(PROCESS_TIMEOUT)
        except subprocess.TimeoutExpired:
            daemon.process.kill()
            daemon.process.wait()


@pytest.fixture
def socket_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private directory with a short path (Unix socket paths are capped at 107 bytes)."""
    directory = tmp_path_factory.mktemp("sock")
    directory.chmod(0o700)
    return directory


@pytest.fixture
def robotad(socket_dir: Path, tmp_path: Path) -> Iterator[RunningDaemon]:
    """A live robotad serving at ``socket_dir/robotad.sock`` for the test's duration."""
    daemon = start_robotad(socket_dir / "robotad.sock", tmp_path / "robotad.log")
    try:
        yield daemon
    finally:
        stop_robotad(daemon)


@dataclass
class Ctl:
    """Runs ``python -m robotactl`` as a subprocess with `PROCESS_TIMEOUT`."""

    env: dict[str, str] = field(default_factory=child_environment)

    def __call__(
        self, *args: str, input: str | None = None, cwd: Path | None = None, **env: str
    ) -> subprocess.CompletedProcess[str]:
        """Run robotactl with `args` in `cwd` (default: the checkout); `env` adds variables."""
        return subprocess.run(
            [sys.executable, "-m", "robotactl", *args],
            input=input,
            capture_output=True,
            text=True,
            env={**self.env, **env},
            cwd=REPO if cwd is None else cwd,
            timeout=PROCESS_TIMEOUT,
            check=False,
        )


@pytest.fixture
def ctl() -> Ctl:
    """robotactl in a subprocess: ``ctl("--socket", path, "status")``."""
    return Ctl()


class Pidfds:
    """Processes a test caused to exist outside its control (autostarted daemons): each is
    held by a pidfd, so teardown signals exactly that process, never a reused pid."""

    def __init__(self) -> None:
        self._fds: list[int] = []

    def track(self, pid: int) -> int:
        fd = os.pidfd_open(pid)
        self._fds.append(fd)
        return fd

    def kill_all(self) -> None:
        for fd in self._fds:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            os.close(fd)
        self._fds.clear()


@pytest.fixture
def stray_daemons() -> Iterator[Pidfds]:
    """Tracks autostarted daemons and SIGKILLs any still alive at teardown."""
    tracked = Pidfds()
    try:
        yield tracked
    finally:
        tracked.kill_all()
