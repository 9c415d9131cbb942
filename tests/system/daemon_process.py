"""A real robotad process for the system suites and benchmarks: private folders, start, kill.

`DaemonHome` is one daemon's private tree under a short ``/tmp`` path (Unix socket paths are
capped at 107 bytes): ``state/`` (``ROBOTA_STATE_DIR``), ``config.toml`` (``ROBOTA_CONFIG``),
``run/`` (``XDG_RUNTIME_DIR``; the socket, lock and spill store live in ``run/robota/``),
``work/`` (session working folders) and the XDG homes. Its environment is built explicitly
from a minimal base, never from the caller's, so a planted variable (a fake API key) reaches
the daemon only when a test puts it there.

`DaemonProcess` runs ``python -m robotad --socket … --ready-fd FD`` exactly as a user would and
returns once the daemon wrote its ready byte (bounded by `PROCESS_TIMEOUT`, never a sleep).
`kill()` is a SIGKILL for the crash suites; `stop()` a SIGTERM with a bounded wait. Both act on
the one child this object started, by its pid.

`soak_scale()` reads ``ROBOTA_SOAK``: ``full`` selects the full-size runs (``make soak``),
anything else the reduced ones that ``make test`` runs.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

REPO = Path(__file__).resolve().parents[2]
#: Absolute bound on one robotad start or exit.
PROCESS_TIMEOUT = 30.0

#: The configuration every system daemon runs with: offline scripted provider only.
SCRIPTED_CONFIG = 'default_provider = "scripted"\n'

Scale = Literal["full", "reduced"]


def soak_scale() -> Scale:
    """``"full"`` under ``ROBOTA_SOAK=full`` (``make soak``), else ``"reduced"``."""
    return "full" if os.environ.get("ROBOTA_SOAK", "").strip().lower() == "full" else "reduced"


@dataclass
class DaemonHome:
    """The private folders of one daemon, and the environment that points it at them."""

    root: Path
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for sub in ("state", "run", "work", "xdg-state", "xdg-config", "xdg-cache", "xdg-data"):
            (self.root / sub).mkdir(mode=0o700, exist_ok=True)
        if not self.config_path.exists():
            self.config_path.write_text(SCRIPTED_CONFIG)

    @property
    def state_dir(self) -> Path:
        return self.root / "state"

    @property
    def runtime_dir(self) -> Path:
        """``XDG_RUNTIME_DIR`` of the daemon (its ``robota/`` folder holds socket and spill)."""
        return self.root / "run"

    @property
    def socket_path(self) -> Path:
        return self.runtime_dir / "robota" / "robotad.sock"

    @property
    def config_path(self) -> Path:
        return self.root / "config.toml"

    @property
    def work_dir(self) -> Path:
        return self.root / "work"

    @property
    def log_path(self) -> Path:
        return self.root / "robotad.log"

    def record_path(self, session_id: str) -> Path:
        return self.state_dir / "sessions" / f"{session_id}.json"

    def workspace(self, name: str) -> Path:
        """A fresh folder under ``work/`` to serve as one session's cwd."""
        path = self.work_dir / name
        path.mkdir(mode=0o700, exist_ok=True)
        return path

    def environment(self) -> dict[str, str]:
        """A minimal environment: PATH, HOME, the checkout, the private folders, `extra_env`."""
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.root),
            "LANG": "C.UTF-8",
            "PYTHONPATH": str(REPO),
            "ROBOTA_STATE_DIR": str(self.state_dir),
            "ROBOTA_CONFIG": str(self.config_path),
            "XDG_RUNTIME_DIR": str(self.runtime_dir),
            "XDG_STATE_HOME": str(self.root / "xdg-state"),
            "XDG_CONFIG_HOME": str(self.root / "xdg-config"),
            "XDG_CACHE_HOME": str(self.root / "xdg-cache"),
            "XDG_DATA_HOME": str(self.root / "xdg-data"),
        }
        env.update(self.extra_env)
        return env


@contextmanager
def daemon_home(extra_env: Mapping[str, str] | None = None) -> Iterator[DaemonHome]:
    """A fresh `DaemonHome` under ``/tmp``, removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="rsys-", dir="/tmp"))
    try:
        yield DaemonHome(root, dict(extra_env or {}))
    finally:
        shutil.rmtree(root, ignore_errors=True)


class DaemonNotReady(RuntimeError):
    """robotad exited or stayed silent instead of announcing readiness."""


@dataclass
class DaemonProcess:
    """One robotad child process serving `home.socket_path` (see the module docstring)."""

    home: DaemonHome
    args: tuple[str, ...] = ()
    process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.process is not None, "not started"
        return self.process.pid

    @property
    def socket_path(self) -> Path:
        return self.home.socket_path

    def start(self) -> DaemonProcess:
        """Start the daemon; return once it is serving, else raise `DaemonNotReady`."""
        read_fd, write_fd = os.pipe()
        argv = [sys.executable, "-m", "robotad", "--socket", str(self.socket_path), *self.args]
        with open(self.home.log_path, "ab") as log_file:
            self.process = subprocess.Popen(
                [*argv, "--ready-fd", str(write_fd)],
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                pass_fds=(write_fd,),
                env=self.home.environment(),
                cwd=self.home.root,
            )
        os.close(write_fd)
        try:
            readable, _, _ = select.select([read_fd], [], [], PROCESS_TIMEOUT)
            ready = bool(readable) and os.read(read_fd, 1) != b""
        finally:
            os.close(read_fd)
        if not ready:
            self.kill()
            raise DaemonNotReady(f"robotad did not become ready:\n{self.output()[-4000:]}")
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL the daemon (a crash) and reap it."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        if self.process is not None:
            self.process.wait(PROCESS_TIMEOUT)

    def stop(self) -> int | None:
        """SIGTERM, wait (SIGKILL past the deadline); the exit status."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(PROCESS_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(PROCESS_TIMEOUT)
        return self.process.returncode

    def rss_kib(self) -> int:
        """The daemon's resident set size (``VmRSS`` of /proc/PID/status) in KiB."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS line")

    def output(self) -> str:
        try:
            return self.home.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""


@contextmanager
def running_daemon(home: DaemonHome, *args: str) -> Iterator[DaemonProcess]:
    """A started daemon for `home`, stopped when the block ends."""
    daemon = DaemonProcess(home, tuple(args)).start()
    try:
        yield daemon
    finally:
        daemon.stop()
