"""Running a configured shell command (a hook or the classifier) as a bounded child.

`run_shell_command` runs ``/bin/sh -c COMMAND`` in a given cwd as the leader of a new process
group, feeds it stdin, collects its output up to a cap and, on timeout, on output past the cap
or on cancellation, stops its whole process tree (`robotad.tools.process_group`) and reaps it
before returning. It is written on `trio.lowlevel.open_process` rather than `trio.run_process`
for two reasons: output is capped instead of buffered without limit, and the process group is
stopped even when the shell itself has exited but a child it left behind still holds the output
open.

Output past the cap ends the command at once rather than being read and thrown away: a command
printing without end (``yes``) kept robotad reading at full speed, half a core, until its
timeout. A stream its caller does not read goes to ``/dev/null``, where the command may print
without limit at no cost to robotad (decision 52).
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import trio

from robotad.tools import tether
from robotad.tools.process_group import terminate_process_tree
from robotad.tools.tether import open_tethered_process

__all__ = ["OUTPUT_LIMIT", "ShellFailure", "ShellResult", "child_environment", "run_shell_command"]

OUTPUT_LIMIT: Final = 1 << 20


class ShellFailure(Exception):
    """The command could not be run to completion: spawn failure, timeout, or output past the
    cap. `reason` says which, without the command text; `stderr` is what the command printed
    there before it was stopped, when the caller reads it (empty otherwise)."""

    def __init__(self, reason: str, *, stderr: bytes = b"") -> None:
        super().__init__(reason)
        self.reason = reason
        self.stderr = stderr


@dataclass(frozen=True, slots=True)
class ShellResult:
    """How the command ended and what it printed; a stream that was not read is empty."""

    exit_code: int
    stdout: bytes
    stderr: bytes


async def run_shell_command(
    command: str,
    *,
    stdin: bytes,
    cwd: Path,
    env: Mapping[str, str],
    time_limit: float,
    output_limit: int = OUTPUT_LIMIT,
    read_stdout: bool = True,
    read_stderr: bool = True,
) -> ShellResult:
    """Run ``/bin/sh -c command`` in `cwd` as a new process group, feed `stdin`, and collect
    each output stream the caller reads (`read_stdout`, `read_stderr`); one it does not read
    goes to ``/dev/null``.

    Raises `ShellFailure` (with the stderr read so far) when it cannot be spawned, when it
    prints more than `output_limit` bytes on a stream that is read, or when it has not finished
    (exited and closed its output) within `time_limit` seconds; then, and when the caller is
    cancelled, the process tree is stopped and reaped before this returns. Past the cap
    nothing more is read: the command is stopped at once. Cancellation propagates. A command
    that ended on its own has its tether released: nothing of it outlives the call."""
    try:
        process = await open_tethered_process(  # dies with robotad, whole group
            ["/bin/sh", "-c", command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE if read_stdout else subprocess.DEVNULL,
            stderr=subprocess.PIPE if read_stderr else subprocess.DEVNULL,
            cwd=os.fspath(cwd),
            env=dict(env),
        )
    except OSError as exc:
        missing = exc.errno == errno.ENOENT and not await trio.to_thread.run_sync(
            os.path.isdir, cwd
        )
        if missing:  # not that /bin/sh is missing
            raise ShellFailure(
                f"could not be started: the session's working directory {cwd} does not exist"
            ) from None
        raise ShellFailure(f"could not be started: {exc.strerror or type(exc).__name__}") from None
    except ValueError as exc:  # a NUL in the command: no exec can take it
        raise ShellFailure(f"could not be started: {exc}") from None
    assert process.stdin is not None
    out, err = _Capture("stdout", output_limit), _Capture("stderr", output_limit)
    captures = [(out, process.stdout), (err, process.stderr)]
    finished = False
    try:
        with trio.move_on_after(time_limit):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_feed, process.stdin, stdin)
                for capture, stream in captures:
                    if stream is not None:
                        nursery.start_soon(capture.drain, stream, nursery.cancel_scope)
                await process.wait()
            finished = not (out.overflowed or err.overflowed)
    finally:
        ended = process.returncode is not None  # before the stop: did the command end?
        with trio.CancelScope(shield=True):
            if finished:
                # Ended on its own: letting go of the tether ends the watcher (and anything
                # the command left running in its group) without waiting for it.
                tether.release(process.pid)
            else:
                await terminate_process_tree(process)
            for pipe in (process.stdin, process.stdout, process.stderr):
                if pipe is not None:
                    with contextlib.suppress(trio.ClosedResourceError):
                        await pipe.aclose()
    for capture in (out, err):
        if capture.overflowed:
            raise ShellFailure(_overflowed(capture, ended), stderr=err.data())
    if not finished:
        raise ShellFailure(_timed_out(time_limit, ended), stderr=err.data())
    assert process.returncode is not None
    return ShellResult(process.returncode, out.data(), err.data())


def _overflowed(capture: _Capture, ended: bool) -> str:
    """Why a command printed too much: the stream, the cap, and what to do about it."""
    stopped = "" if ended else "; robotad stopped it"
    return (
        f"printed more than {capture.limit} bytes on {capture.name}, more than robotad reads"
        f"{stopped} (write long output to a file instead)"
    )


def _timed_out(time_limit: float, ended: bool) -> str:
    """Why a command did not finish in time. One that exited but left a process holding its
    output open (``server &``) is told apart: "timed out" alone sent its author looking for
    a slow command."""
    if not ended:
        return f"timed out after {time_limit:g}s"
    return (
        f"timed out after {time_limit:g}s: it ended, but a process it started kept its input or "
        "output open (redirect a background command's: cmd </dev/null >/dev/null 2>&1 &)"
    )


async def _feed(stream: trio.abc.SendStream, data: bytes) -> None:
    async with stream:
        # A command that never reads its input is no failure of ours.
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await stream.send_all(data)


class _Capture:
    """One output stream, kept up to `limit` bytes."""

    def __init__(self, name: str, limit: int) -> None:
        self.name = name
        self.limit = limit
        self.chunks: list[bytes] = []
        self.size = 0
        self.overflowed = False

    async def drain(self, stream: trio.abc.ReceiveStream, command: trio.CancelScope) -> None:
        """Read `stream` to its end; past `limit`, stop reading and cancel `command` (the
        caller then stops the command, which may be blocked on the pipe we no longer read)."""
        with contextlib.suppress(trio.ClosedResourceError):
            async for chunk in stream:
                if len(chunk) > self.limit - self.size:
                    self.overflowed = True
                    command.cancel()
                    return
                self.chunks.append(bytes(chunk))
                self.size += len(chunk)

    def data(self) -> bytes:
        return b"".join(self.chunks)


def child_environment(cwd: Path, traceparent: str | None) -> dict[str, str]:
    """The daemon's environment for a hook or classifier child: the project dir set, any
    inherited trace context removed, and `traceparent` added when given."""
    env = dict(os.environ)
    env.pop("TRACEPARENT", None)
    env.pop("TRACESTATE", None)
    env["CLAUDE_PROJECT_DIR"] = env["ROBOTA_PROJECT_DIR"] = os.fspath(cwd)
    if traceparent:
        env["TRACEPARENT"] = traceparent
    return env
