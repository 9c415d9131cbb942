"""``robotactl shutdown --wait`` waits for robotad's own process (`robotactl.daemon_process`,
decision 79): not for the service manager that listens on robotad's socket, and never for a
process robotad's pid names in another pid namespace.

`activated` runs robotad as systemd's socket activation does (tests/ctl/activator.py: the
listener's process forks robotad and stays); tests/ctl/pid_namespaces.py runs robotad or
robotactl under ``unshare --pid``. Every process started is killed in a ``finally``.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from .conftest import PROCESS_TIMEOUT, REPO, Ctl, RunningDaemon, child_environment
from .ctl_helpers import sock
from .pid_namespaces import UNSHARE, contained_robotad, needs_unshare

ACTIVATOR = Path(__file__).with_name("activator.py")


def read_line(stream: IO[bytes] | None) -> str:
    """The next line of `stream`, waiting at most `PROCESS_TIMEOUT` for it. `stream` must be
    unbuffered (``bufsize=0``): a buffered one could take two lines from the pipe at once and
    the wait for the second would then find the pipe empty."""
    assert stream is not None
    readable, _, _ = select.select([stream], [], [], PROCESS_TIMEOUT)
    assert readable, "no line within the timeout"
    return stream.readline().decode()


@contextmanager
def activated(path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """robotad socket-activated at `path` by an activator that stays, as systemd does; the
    activator (its stdout says ``started PID``, then ``exited STATUS``) is yielded once it
    listens, and killed afterwards with the robotad it started."""
    activator = subprocess.Popen(
        [sys.executable, str(ACTIVATOR), str(path), sys.executable, "-m", "robotad"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        bufsize=0,  # `read_line` waits on the pipe itself: nothing may sit in a buffer
        env=child_environment(),
        cwd=REPO,
    )
    daemon: int | None = None
    try:
        assert read_line(activator.stdout) == "listening\n"
        started = read_line(activator.stdout)
        assert started.startswith("started ")
        daemon = int(started.split()[1])
        yield activator
    finally:
        if daemon is not None:
            _kill(daemon)
        activator.kill()
        activator.wait()


def _kill(pid: int) -> None:
    """SIGKILL process `pid` unless it is gone (through a pidfd: never a reused pid)."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    finally:
        os.close(pidfd)


def test_shutdown_wait_waits_for_robotad_not_for_the_process_listening(
    ctl: Ctl, socket_dir: Path
) -> None:
    """Under socket activation the connection's peer is the activator: robotactl waits for
    robotad, which exits, and returns 0 while the activator still runs."""
    path = socket_dir / "robotad.sock"
    with activated(path) as activator:
        status = ctl("--socket", str(path), "--no-autostart", "--json", "status")
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["pid"] != activator.pid
        stop = ctl("--socket", str(path), "shutdown", "--wait", "--grace", "0")
        assert (stop.returncode, stop.stderr) == (0, ""), stop.stderr
        assert stop.stdout == "robotad has shut down\n"
        # robotad had exited before robotactl returned: the activator reaped it.
        assert read_line(activator.stdout) == "exited 0\n"
        assert activator.poll() is None


# -- across pid namespaces ---------------------------------------------------------------------


@needs_unshare
def test_from_another_pid_namespace_shutdown_wait_waits_for_the_connection_to_end(
    robotad: RunningDaemon,
) -> None:
    """robotactl in a container: robotad's process cannot be seen from there (the peer's
    pid is 0, the lock's names nobody or another process), so robotactl waits for robotad to
    close the connection, which it does as it exits."""
    robotactl = [sys.executable, "-m", "robotactl", *sock(robotad)]
    stop = subprocess.run(
        [*UNSHARE, *robotactl, "shutdown", "--wait", "--grace", "0"],
        capture_output=True,
        text=True,
        env=child_environment(),
        cwd=REPO,
        timeout=PROCESS_TIMEOUT,
        check=False,
    )
    assert (stop.returncode, stop.stderr) == (0, ""), stop.stderr
    assert stop.stdout == "robotad has shut down\n"
    assert robotad.wait_exit() == 0


@needs_unshare
def test_into_another_pid_namespace_shutdown_wait_waits_for_robotad_itself(
    ctl: Ctl, socket_dir: Path, tmp_path: Path
) -> None:
    """robotad in a container, pid 1 there: the pid it reports (and writes in its lock) is
    another process's here; the connection's peer is robotad, and is what is waited for."""
    path = socket_dir / "robotad.sock"
    with contained_robotad(path, tmp_path / "robotad.log") as robotad:
        status = ctl("--socket", str(path), "--no-autostart", "--json", "status")
        assert json.loads(status.stdout)["pid"] == 1
        stop = ctl("--socket", str(path), "shutdown", "--wait", "--grace", "0")
        assert (stop.returncode, stop.stderr) == (0, ""), stop.stderr
        assert stop.stdout == "robotad has shut down\n"
        # robotad had exited before robotactl returned; unshare only reaps it.
        assert not Path(f"/proc/{robotad.pid}/fd").exists()
        assert robotad.unshare.wait(PROCESS_TIMEOUT) == 0
