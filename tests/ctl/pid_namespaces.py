"""robotad or robotactl in a pid namespace of its own, as in a container: ``unshare --pid``
with a /proc of that namespace, in a user namespace so that no privilege is needed.

`needs_unshare` skips where the kernel or the sandbox the tests run in refuses (CI, which
runs bubblewrap's own pid namespaces, does not: a skip there fails, tests/no_skips.py).
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import PROCESS_TIMEOUT, REPO, child_environment

#: The command after this runs as the first process (pid 1) of a new pid namespace with its own
#: /proc, and is killed when ``unshare`` is.
UNSHARE = [
    "unshare",
    "--user",
    "--map-root-user",
    "--pid",
    "--fork",
    "--mount-proc",
    "--kill-child",
]


def _unshare_works() -> bool:
    try:
        done = subprocess.run(
            [*UNSHARE, "true"], capture_output=True, timeout=PROCESS_TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


needs_unshare = pytest.mark.skipif(
    not _unshare_works(), reason="unshare cannot make a pid namespace here"
)


@dataclass
class ContainedRobotad:
    """robotad in a pid namespace of its own: `unshare` started it, `pid` is robotad's number
    in ours (it is 1 in its own)."""

    unshare: subprocess.Popen[bytes]
    pid: int


@contextmanager
def contained_robotad(path: Path, log: Path) -> Iterator[ContainedRobotad]:
    """robotad serving at `path` as the first process of a new pid namespace, yielded once it
    is ready; ``unshare`` is killed afterwards, and robotad with it."""
    read_fd, write_fd = os.pipe()
    robotad = [sys.executable, "-m", "robotad", "--socket", str(path)]
    with open(log, "ab") as output:
        unshare = subprocess.Popen(
            [*UNSHARE, *robotad, "--ready-fd", str(write_fd)],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            pass_fds=(write_fd,),
            env=child_environment(),
            cwd=REPO,
        )
    os.close(write_fd)
    try:
        readable, _, _ = select.select([read_fd], [], [], PROCESS_TIMEOUT)
        assert readable, f"robotad did not become ready:\n{log.read_text()}"
        assert os.read(read_fd, 1) == b"\n", f"robotad did not start:\n{log.read_text()}"
        children = Path(f"/proc/{unshare.pid}/task/{unshare.pid}/children").read_text()
        (pid,) = map(int, children.split())
        yield ContainedRobotad(unshare, pid)
    finally:
        os.close(read_fd)
        unshare.kill()
        unshare.wait()
