"""A stdio MCP server as a trio child process, feeding the SDK's `ClientSession`.

The SDK's own ``stdio_client`` neither says when its server died nor gives its pid; this one
does. `open_stdio` starts the server (its own session and process group, tethered to robotad
as a command is (`robotad.tools.tether`: whatever it started dies with a killed robotad), the
minimal environment of `robotad.mcp.environment`) and yields a `StdioChannel`:

- `read_stream` / `write_stream`: the SDK's message streams (newline-delimited JSON-RPC);
- the moment the process exits, the read stream ends, so every request in flight fails at once
  with the SDK's "connection closed", and `failure` says why (``exited with status 1``,
  ``killed by SIGKILL``);
- a line on stdout that is not JSON-RPC before the handshake is done ends the connection too
  (`failure` quotes the start of it); after it, such a line is logged and skipped;
- every stderr line goes to robotad's log (logger ``robotad.mcp``) with the server's name, and
  every skipped stdout line as a warning, at most 200 lines of each a minute
  (`robotad.mcp.line_logs`); the last few are kept too (`stderr_tail`: what a server that
  ended said last, since it was ready if it was; decision 86).

Leaving the context closes the server's stdin, gives it a moment to exit, then stops its whole
process group (`terminate_process_tree`), shielded and bounded, so nothing outlives it; when
the server had ended by itself, its stderr is read to its end first (bounded, `_STDERR_GRACE`).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import signal
import subprocess
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any, Final

import anyio
import mcp_types as types
import trio
from mcp.shared.message import SessionMessage

from robotad.log import fields
from robotad.mcp.config import ServerSpec
from robotad.mcp.environment import server_environment
from robotad.mcp.line_logs import StderrLog, StdoutNoiseLog
from robotad.tools.process_group import terminate_process_tree
from robotad.tools.tether import open_tethered_process

__all__ = ["StdioChannel", "open_stdio"]

log = logging.getLogger("robotad.mcp")

#: How long a server whose stdin closed may take to exit by itself.
_EXIT_GRACE: Final = 1.0
#: The longest stdout line kept (a server answering with more is cut off and fails the call).
_MAX_LINE: Final = 64 * 1024 * 1024
_LOGGED_CHARS: Final = 2000
#: How many of a server's last non-empty stderr lines are kept (`StdioChannel.stderr_tail`).
_TAIL_LINES: Final = 8
#: The bytes that continue a UTF-8 character: a line's end cut there starts mid-character.
_CONTINUATION: Final = bytes(range(0x80, 0xC0))
#: How long a closed stdout waits for the process's exit status before being the reason.
_EOF_EXIT_WAIT: Final = 0.5


class StdioChannel:
    """One running stdio server; see the module doc."""

    def __init__(self, spec: ServerSpec, process: trio.Process) -> None:
        self.spec = spec
        self.process = process
        self.read_stream: Any
        self.write_stream: Any
        #: Why the connection ended from the server's side; None while it is up.
        self.failure: str | None = None
        #: Set once the handshake is done: later garbage lines are skipped, not fatal.
        self.initialized = False
        #: Set when the connection ended from the server's side (`failure` says why).
        self.closed = trio.Event()
        self._stopping = False
        self._stderr_log = StderrLog(spec.name, trio.current_time)
        self._stdout_noise = StdoutNoiseLog(spec.name, trio.current_time)
        #: The server's last non-empty stderr lines, and whether its stderr has ended.
        self._stderr_lines: deque[str] = deque(maxlen=_TAIL_LINES)
        self._stderr_ended = trio.Event()
        self._tether_said = False  # the failure already says what its stderr did
        self._to_session, self.read_stream = anyio.create_memory_object_stream[
            SessionMessage | Exception
        ](16)
        self.write_stream, self._from_session = anyio.create_memory_object_stream[SessionMessage](
            16
        )

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def stderr_tail(self) -> tuple[str, ...]:
        """When the server ended by itself (`failure`): the last non-empty lines it wrote on
        stderr (at most `_TAIL_LINES`, of a longer line its last 2,000 bytes), stripped, since
        it was ready if it was (`started`); none while it runs, when robotad stopped it, or
        once `failure` says what they did."""
        if self.failure is None or self._tether_said:
            return ()
        return tuple(self._stderr_lines)

    def started(self) -> None:
        """The server is ready: what it said on stderr while starting (a banner) is no
        longer what `stderr_tail` quotes, since it explains no later death."""
        self._stderr_lines.clear()

    def _end(self, failure: str) -> None:
        """The connection is over: record why (first reason wins) and end the read stream."""
        if self.failure is None and not self._stopping:
            self.failure = failure
            log.info(
                "mcp server connection ended: %s", failure, extra=fields(mcp_server=self.spec.name)
            )
        self._to_session.close()
        self.closed.set()

    async def pump_stdout(self) -> None:
        try:
            await self._pump_stdout()
        finally:
            self._stdout_noise.flush()

    async def _pump_stdout(self) -> None:
        assert self.process.stdout is not None
        # Only each new chunk is searched for line ends, and a line's pieces gather in one
        # bytearray: a long result line costs time in proportion to its length, not to its
        # square (re-splitting the whole buffer at each chunk took 40 s of CPU for 60 MB).
        pending = bytearray()
        async for chunk in self.process.stdout:
            start = 0
            while (end := chunk.find(b"\n", start)) != -1:
                line = bytes(chunk[start:end])
                if pending:
                    pending += line
                    line = bytes(pending)
                    pending.clear()
                start = end + 1
                if line.strip() and not await self._deliver(line):
                    return
            pending += chunk[start:]
            if len(pending) > _MAX_LINE:
                self._end("a stdout line exceeded 64 MiB")
                return
        # A dying server's stdout ends as it exits: name the exit (a signal, a status) when
        # it comes at once, rather than the closed pipe it caused.
        with trio.move_on_after(_EOF_EXIT_WAIT):
            await self.process.wait()
        if self.process.returncode is not None:
            self._end(await self._exited(self.process.returncode))
        self._end("closed its stdout")

    async def _deliver(self, line: bytes) -> bool:
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError:
            snippet = line[:80].decode("utf-8", "replace")
            if not self.initialized:
                self._end(f"wrote something other than JSON-RPC on stdout: {snippet!r}")
                return False
            self._stdout_noise.line(snippet)
            failed = _answer_failed(line, snippet)
            if failed is None:
                return True
            message = failed  # the request it answers fails now, not at its timeout
        try:
            await self._to_session.send(SessionMessage(message))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False
        return True

    async def pump_stdin(self) -> None:
        assert self.process.stdin is not None
        try:
            async with self._from_session:
                async for item in self._from_session:
                    data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await self.process.stdin.send_all(data.encode() + b"\n")
        except (
            trio.BrokenResourceError,
            trio.ClosedResourceError,
            anyio.ClosedResourceError,  # `stop` closed the session's side while it waited
            OSError,
        ):
            # A server that could not start (the tether's shell failed to exec it) closes its
            # stdin as it exits: its exit, a moment later, says why; a closed pipe does not.
            with trio.move_on_after(_STDERR_GRACE):
                await self.closed.wait()
            self._end("stopped reading its stdin")

    async def pump_stderr(self) -> None:
        assert self.process.stderr is not None
        buffer = b""
        try:
            async for chunk in self.process.stderr:
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    self._log_stderr(line)
                if len(buffer) > _LOGGED_CHARS:
                    self._log_stderr(buffer)
                    buffer = b""
            if buffer:
                self._log_stderr(buffer)
            self._stderr_log.flush()
        finally:
            self._stderr_ended.set()

    def _log_stderr(self, line: bytes) -> None:
        text = line[:_LOGGED_CHARS].decode("utf-8", "replace").rstrip()
        if text:
            self._stderr_log.line(text)
        # Of a long line its end is kept (where a message ends), from a whole character on.
        end = line[-_LOGGED_CHARS:].lstrip(_CONTINUATION) if len(line) > _LOGGED_CHARS else line
        if kept := end.decode("utf-8", "replace").strip():
            self._stderr_lines.append(kept)

    async def watch_exit(self) -> None:
        status = await self.process.wait()
        self._end(await self._exited(status))

    async def _exited(self, status: int) -> str:
        """Why the server is gone, having exited with `status`."""
        if status in _EXEC_FAILED and not self.initialized:
            # The tether's shell could not exec the server (a bad interpreter line, not a
            # program): its complaint on stderr says why, as a spawn's error did.
            with trio.move_on_after(_STDERR_GRACE):
                await self._stderr_ended.wait()
            said = _TETHER_SAID.match(self._stderr_lines[-1] if self._stderr_lines else "")
            if said is not None:
                self._tether_said = True
                return f"cannot start {said.group(1)}"
        return describe_exit(status)

    async def stop(self) -> None:
        """Close stdin, wait a moment, then stop the process group; then, when the server
        had ended by itself (`failure`), let its stderr be read to the end, so `stderr_tail`
        holds its last words. Bounded; call it shielded."""
        self._stopping = True
        self._to_session.close()
        self._from_session.close()
        if self.process.stdin is not None:
            with suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                await self.process.stdin.aclose()
        with trio.move_on_after(_EXIT_GRACE):
            await self.process.wait()
        await terminate_process_tree(self.process)
        if self.failure is not None:
            # Its group is gone; a process it moved out of the group may hold the pipe.
            with trio.move_on_after(_STDERR_GRACE):
                await self._stderr_ended.wait()


def describe_exit(status: int) -> str:
    """``exited with status N`` or ``killed by SIGNAME``."""
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exited with status {status}"


def _executable(command: str, env: dict[str, str], cwd: str | None) -> str:
    """The file `command` names, found as ``execvpe`` would (in the server's ``PATH`` when it
    has no slash, else from its cwd); the `OSError` a spawn would raise when there is none
    (ENOENT), or only ones that cannot be run (EACCES). Blocking."""
    if "/" in command:
        candidates = [os.path.join(cwd or os.getcwd(), command)]
    else:
        folders = os.get_exec_path(env)
        candidates = [os.path.join(os.path.join(cwd or os.getcwd(), f), command) for f in folders]
    refused = False
    for candidate in candidates:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
        refused = refused or os.path.exists(candidate)
    if refused:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))


@asynccontextmanager
async def open_stdio(spec: ServerSpec) -> AsyncIterator[StdioChannel]:
    """Start `spec`'s server and yield its channel (see the module doc). Raises `OSError`
    when it cannot be started (no such command, a bad cwd)."""
    assert spec.command is not None
    if spec.cwd is not None and not await trio.to_thread.run_sync(os.path.isdir, spec.cwd):
        # Else the spawn's ENOENT would read as if the command were missing.
        raise FileNotFoundError(errno.ENOENT, f"its cwd {spec.cwd} is not an existing folder")
    env = server_environment(spec.env)
    # The tether's shell execs the server: a command it cannot run would only be its exit
    # status 127, so the file is found here first, failing as a spawn would.
    executable = await trio.to_thread.run_sync(_executable, spec.command, env, spec.cwd)
    process = await open_tethered_process(  # dies with robotad, whole session
        [executable, *spec.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=spec.cwd,
    )
    channel = StdioChannel(spec, process)
    log.info("mcp server started", extra=fields(mcp_server=spec.name, pid=process.pid))
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(channel.pump_stdout)
            nursery.start_soon(channel.pump_stdin)
            nursery.start_soon(channel.pump_stderr)
            nursery.start_soon(channel.watch_exit)
            try:
                yield channel
            finally:
                with trio.CancelScope(shield=True):
                    await channel.stop()
                nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await terminate_process_tree(process)


#: The statuses of a shell that could not exec its command (cannot run it; not found).
_EXEC_FAILED: Final = (126, 127)
#: How long an exited server's stderr may take to end before its failure is told without it.
_STDERR_GRACE: Final = 1.0
#: The tether shell's complaint about an exec (dash: ``robota-tether: 1: exec: PATH: WHY``;
#: bash: ``robota-tether: line 1: PATH: WHY``); group 1 is ``PATH: WHY``.
_TETHER_SAID: Final = re.compile(r"robota-tether: (?:line )?\d+: (?:exec: )?(.+)")


#: The id of a line that looks like an answer (it names no method): a number or a string.
_ANSWER_ID = re.compile(rb'"id"\s*:\s*(-?[0-9]+|"(?:[^"\\]|\\.)*")')


def _answer_failed(line: bytes, snippet: str) -> types.JSONRPCError | None:
    """For a line that is no JSON-RPC but reads as the answer to one of robotad's requests
    (an ``"id"``, no ``"method"``): that request's error, so the call fails at once saying
    why instead of waiting out its timeout. None for anything else."""
    if b'"method"' in line:
        return None
    found = _ANSWER_ID.search(line)
    if found is None:
        return None
    try:
        request_id = json.loads(found.group(1))
    except ValueError:
        return None
    error = types.ErrorData(
        code=types.PARSE_ERROR, message=f"the server's answer is not valid JSON-RPC: {snippet!r}"
    )
    return types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
