"""Fixtures of the robotactl tests: a real robotad in a subprocess, and robotactl as a
subprocess with an absolute timeout.

`robotad` starts the daemon on ``<tmp>/robotad.sock`` through tests/robotad_process.py (the
launcher every test area shares: ``--ready-fd``, a deadline, never a sleep) and stops it at
teardown. The names this package's modules import from here (`RunningDaemon`,
`child_environment`, `REPO`, `PROCESS_TIMEOUT`) are that module's. Nothing here fakes a daemon
in-process.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.robotad_process import PROCESS_TIMEOUT as PROCESS_TIMEOUT
from tests.robotad_process import REPO as REPO
from tests.robotad_process import RobotadProcess, start_robotad, stop_robotad
from tests.robotad_process import child_environment as child_environment

#: The daemon the `robotad` fixture yields (the name this package's tests use).
RunningDaemon = RobotadProcess


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A session's working directory (resolved: the daemon stores canonical paths). A module
    that wants another overrides it."""
    directory = tmp_path / "work"
    directory.mkdir()
    return directory.resolve()


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
