"""Helpers of the live robotactl tests: a session made through robotactl itself, decoded
``--json`` output, robotactl on a pseudo-terminal, and a socket whose backlog is full."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from .conftest import PROCESS_TIMEOUT, Ctl, RunningDaemon, child_environment

T = TypeVar("T")


def sock(daemon: RunningDaemon) -> list[str]:
    return ["--socket", str(daemon.socket_path)]


def decoded(result: subprocess.CompletedProcess[str], type_: type[T]) -> T:
    """The command's stdout as one JSON document of `type_` (strictly: unknown members fail)."""
    assert result.returncode == 0, result.stderr
    return msgspec.json.decode(result.stdout.encode(), type=type_)


def new_session(
    ctl: Ctl,
    daemon: RunningDaemon,
    cwd: Path,
    script: list[dict[str, Any]] | None = None,
    *extra: str,
) -> str:
    """Create a session in `cwd` with `script` through ``robotactl new``; return its id."""
    args = [*sock(daemon), "new", "--cwd", str(cwd), *extra]
    if script is not None:
        path = cwd.parent / f"script-{len(list(cwd.parent.glob('script-*')))}.json"
        path.write_text(json.dumps(script))
        args += ["--script", str(path)]
    result = ctl(*args)
    assert result.returncode == 0, result.stderr
    session_id = result.stdout.strip()
    assert result.stdout == session_id + "\n"
    return session_id


#: A scripted conversation whose first reply asks to write `name` (needs approval in default
#: mode), and whose second reply is `done`.
def write_script(
    name: str = "out.txt", content: str = "written\n", done: str = "All done."
) -> list[dict[str, Any]]:
    return [
        {
            "text": "Writing it.",
            "toolCalls": [{"name": "Write", "arguments": {"file_path": name, "content": content}}],
        },
        {"text": done, "chunks": 2},
    ]


class Terminal:
    """robotactl with a pseudo-terminal as stdin, stdout and stderr (what a person has).

    Everything it writes collects in `transcript`; `expect` waits (under `PROCESS_TIMEOUT`)
    for a piece of text, `send` types.
    """

    def __init__(self, args: list[str], *, cwd: Path, **env: str) -> None:
        master, slave = os.openpty()
        self.master = master
        self.transcript = b""
        self.process = subprocess.Popen(
            [sys.executable, "-m", "robotactl", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=child_environment(**env),
            cwd=cwd,
            start_new_session=True,
        )
        os.close(slave)

    def _read(self, deadline: float) -> bool:
        """Read what is there (waiting until `deadline`); False at end of output."""
        remaining = max(0.0, deadline - time.monotonic())
        readable, _, _ = select.select([self.master], [], [], remaining)
        if not readable:
            return True
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # EIO: every slave descriptor is closed
            return False
        self.transcript += chunk
        return bool(chunk)

    def expect(self, text: str) -> None:
        deadline = time.monotonic() + PROCESS_TIMEOUT
        while text.encode() not in self.transcript:
            if time.monotonic() > deadline or not self._read(deadline):
                raise AssertionError(f"{text!r} never appeared in:\n{self.output}")

    def send(self, text: str) -> None:
        os.write(self.master, text.encode())

    def finish(self) -> int:
        """Read to the end, reap robotactl and return its exit status."""
        deadline = time.monotonic() + PROCESS_TIMEOUT
        while time.monotonic() < deadline and self._read(deadline):
            pass
        try:
            return self.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        finally:
            os.close(self.master)

    @classmethod
    def ran(cls, args: list[str], *, cwd: Path, **env: str) -> tuple[int, str]:
        """robotactl run on a terminal to its end, typing nothing: its exit status and all it
        wrote."""
        terminal = cls(args, cwd=cwd, **env)
        try:
            status = terminal.finish()
        finally:
            terminal.kill()
        return status, terminal.output

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    @property
    def output(self) -> str:
        return self.transcript.decode(errors="replace")


@contextmanager
def full_backlog(path: Path) -> Iterator[socket.socket]:
    """A listener at `path` that accepts nothing, its backlog filled (as a stopped or stuck
    robotad's fills): a connect there finds no place until the test accepts one of the
    queued connections from the listener yielded."""
    with contextlib.ExitStack() as stack:
        listener = stack.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
        listener.bind(str(path))
        listener.listen(0)
        for _ in range(64):  # Linux queues one connection past a backlog of 0
            queued = stack.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
            queued.setblocking(False)
            try:
                queued.connect(str(path))
            except BlockingIOError:
                break
        else:
            raise AssertionError(f"the backlog of {path} never filled")
        yield listener
