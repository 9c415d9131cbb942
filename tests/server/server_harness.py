"""Shared helpers of the server tests: an in-process daemon with test-only methods, a raw
socket client that speaks either framing byte for byte, and a reply-shape checker."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import trio

from protocol.framing import FrameDecoder, Framing, encode_frame
from protocol.peer import CallContext, Router
from robotad.server.app import Application, DaemonContext, SessionCounts
from robotad.server.lifecycle import DaemonSettings, serve_daemon

#: Absolute bound on every piece of socket I/O in these tests.
IO_TIMEOUT = 10.0
REPO = Path(__file__).resolve().parents[2]
SECRET = "sk-test-4f1c9e-not-for-the-wire"


class Empty(msgspec.Struct, forbid_unknown_fields=True):
    pass


class Anything(msgspec.Struct):
    """Params of the spec-example notifications: any object."""


class EchoParams(msgspec.Struct, forbid_unknown_fields=True):
    value: Any = None


class GateParams(msgspec.Struct, forbid_unknown_fields=True):
    gate: str


class SubtractParams(msgspec.Struct, forbid_unknown_fields=True):
    minuend: int
    subtrahend: int


class SumParams(msgspec.Struct, forbid_unknown_fields=True):
    values: list[int]


@dataclass
class ProbeApp:
    """An application whose router holds test-only methods next to the daemon's."""

    router: Router = field(default_factory=Router)
    gates: dict[str, trio.Event] = field(default_factory=dict)
    cancelled: dict[str, trio.Event] = field(default_factory=dict)
    shutdown_graces: list[float] = field(default_factory=list)
    counts: SessionCounts = field(
        default_factory=lambda: SessionCounts(loaded=0, running=0, waiting=0)
    )

    def __post_init__(self) -> None:
        router = self.router

        @router.method("test/echo", EchoParams)
        async def echo(params: EchoParams, ctx: CallContext) -> dict[str, Any]:
            await trio.lowlevel.checkpoint()
            return {"value": params.value}

        @router.method("test/null", Empty, inline=True)
        async def null(params: Empty, ctx: CallContext) -> None:
            return None

        @router.method("test/boom", Empty)
        async def boom(params: Empty, ctx: CallContext) -> None:
            raise RuntimeError(f"internal detail {SECRET} at /root/private/state.json")

        @router.method("test/wait", GateParams)
        async def wait(params: GateParams, ctx: CallContext) -> dict[str, Any]:
            gate = self.gate(params.gate)
            try:
                await gate.wait()
            except trio.Cancelled:
                self.cancelled.setdefault(params.gate, trio.Event()).set()
                raise
            return {"gate": params.gate}

        @router.method("subtract", SubtractParams, inline=True)
        async def subtract(params: SubtractParams, ctx: CallContext) -> int:
            return params.minuend - params.subtrahend

        @router.method("sum", SumParams, inline=True)
        async def total(params: SumParams, ctx: CallContext) -> int:
            return sum(params.values)

        @router.method("get_data", Empty, inline=True)
        async def get_data(params: Empty, ctx: CallContext) -> list[Any]:
            return ["hello", 5]

        for name in ("update", "notify_hello", "notify_sum"):
            router.add(name, Anything, _ignore, inline=True)

    def gate(self, name: str) -> trio.Event:
        return self.gates.setdefault(name, trio.Event())

    def session_counts(self) -> SessionCounts:
        return self.counts

    def serving_fields(self) -> Mapping[str, str]:
        return {}

    async def on_shutdown(self, grace: float) -> None:
        self.shutdown_graces.append(grace)


async def _ignore(params: Any, ctx: CallContext) -> None:
    return None


@contextmanager
def short_tmpdir() -> Iterator[Path]:
    """A fresh 0700 directory with a short path (Unix socket paths are limited to 107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="rsv-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@dataclass
class RunningDaemon:
    socket_path: Path
    app: ProbeApp
    cancel_scope: trio.CancelScope
    environ: dict[str, str]
    stopped: trio.Event


@asynccontextmanager
async def running_daemon(
    *, max_message_bytes: int | None = None, app: ProbeApp | None = None
) -> AsyncIterator[RunningDaemon]:
    """An in-process daemon (the real `serve_daemon`) on a private socket; cancelled on exit."""
    application = app or ProbeApp()

    @asynccontextmanager
    async def factory(context: DaemonContext) -> AsyncIterator[Application]:
        yield application

    with short_tmpdir() as base:
        socket_path = base / "run" / "robotad.sock"
        environ = {"ROBOTA_STATE_DIR": str(base / "state")}
        settings = DaemonSettings(socket=socket_path)
        if max_message_bytes is not None:
            settings = DaemonSettings(socket=socket_path, max_message_bytes=max_message_bytes)
        stopped = trio.Event()

        async def serve(*, task_status: trio.TaskStatus[str]) -> None:
            await serve_daemon(
                settings, app_factory=factory, environ=environ, task_status=task_status
            )
            stopped.set()

        async with trio.open_nursery() as nursery:
            with trio.fail_after(IO_TIMEOUT):
                await nursery.start(serve)
            yield RunningDaemon(socket_path, application, nursery.cancel_scope, environ, stopped)
            nursery.cancel_scope.cancel()


class RawClient:
    """A client that writes exact bytes and reads whole reply frames (decoded JSON)."""

    def __init__(self, stream: trio.SocketStream, framing: Framing) -> None:
        self.stream = stream
        self.framing = framing
        self._decoder = FrameDecoder(max_frame_bytes=1 << 30)
        self._ready: list[bytes] = []
        self.eof = False

    @classmethod
    async def connect(cls, path: Path, framing: Framing = "ndjson") -> RawClient:
        with trio.fail_after(IO_TIMEOUT):
            stream = await trio.open_unix_socket(os.fspath(path))
        return cls(stream, framing)

    async def send(self, message: Any) -> None:
        """Send one frame holding `message` (bytes are sent as the body verbatim)."""
        body = (
            message
            if isinstance(message, bytes)
            else json.dumps(message, separators=(",", ":")).encode()
        )
        await self.send_raw(encode_frame(body, self.framing))

    async def send_raw(self, data: bytes) -> None:
        with trio.fail_after(IO_TIMEOUT):
            await self.stream.send_all(data)

    async def half_close(self) -> None:
        await self.stream.send_eof()

    async def receive(self) -> Any:
        """The next reply, decoded; raises EOFError when the server closed first."""
        with trio.fail_after(IO_TIMEOUT):
            while not self._ready:
                if self.eof:
                    raise EOFError("server closed the connection")
                try:
                    data = await self.stream.receive_some(65536)
                except trio.BrokenResourceError:
                    data = b""
                if not data:
                    self.eof = True
                    self._ready.extend(self._decoder.feed_eof())
                else:
                    self._ready.extend(self._decoder.feed(data))
        return json.loads(self._ready.pop(0))

    async def receive_all(self) -> list[Any]:
        """Every reply until the server closes the connection."""
        replies: list[Any] = []
        while True:
            try:
                replies.append(await self.receive())
            except EOFError:
                return replies

    async def call(self, method: str, params: Any = None, request_id: Any = 1) -> Any:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        return await self.receive()

    async def aclose(self) -> None:
        await self.stream.aclose()


_RESPONSE_KEYS = ({"jsonrpc", "id", "result"}, {"jsonrpc", "id", "error"})


def assert_response(message: Any) -> None:
    """`message` is one well-formed JSON-RPC response carrying no member beyond the spec's."""
    assert isinstance(message, dict), message
    assert set(message) in _RESPONSE_KEYS, message
    assert message["jsonrpc"] == "2.0"
    assert message["id"] is None or type(message["id"]) in (int, str)
    if "error" in message:
        error = message["error"]
        assert isinstance(error, dict)
        assert set(error) <= {"code", "message", "data"}
        assert {"code", "message"} <= set(error)
        assert type(error["code"]) is int
        assert isinstance(error["message"], str)


def error_code(message: Any) -> int:
    assert_response(message)
    assert "error" in message, message
    code = message["error"]["code"]
    assert isinstance(code, int)
    return code


def daemon_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "robotad", *args]


#: What systemd does when it activates robotad, in a few lines: the listener on fd 3, then
#: LISTEN_PID naming the process itself (its own pid plus argv[2]: 0 for its own, 1 for
#: another's) and LISTEN_FDS as given, then exec robotad, which keeps the pid.
_ACTIVATE = """
import os, sys
listener = int(sys.argv[1])
os.dup2(listener, 3)
if listener != 3:
    os.close(listener)
os.environ["LISTEN_PID"] = str(os.getpid() + int(sys.argv[2]))
os.environ["LISTEN_FDS"] = sys.argv[3]
os.execv(sys.executable, [sys.executable, "-m", "robotad", *sys.argv[4:]])
"""


def activated_command(listener: int, listen_fds: str, *args: str, ours: bool = True) -> list[str]:
    """``python -m robotad ARGS`` socket-activated as systemd would: descriptor `listener` (pass
    it to the child) becomes fd 3, ``LISTEN_FDS`` is `listen_fds`, and ``LISTEN_PID`` names
    robotad itself, or (not `ours`) another process."""
    offset = "0" if ours else "1"
    return [sys.executable, "-c", _ACTIVATE, str(listener), offset, listen_fds, *args]


@contextmanager
def descriptor_at(number: int, sock: socket.socket) -> Iterator[None]:
    """`sock` duplicated onto descriptor `number` (3: where systemd passes a listener) for the
    block, inheritable as systemd leaves it; what was there before is put back afterwards, as
    inheritable as it was, or the descriptor closed (the code under test may have closed it
    already)."""
    try:
        saved: int | None = os.dup(number)
        inheritable = os.get_inheritable(number)
    except OSError:
        saved, inheritable = None, False
    os.dup2(sock.fileno(), number)
    try:
        yield
    finally:
        if saved is not None:
            os.dup2(saved, number, inheritable=inheritable)
            os.close(saved)
        else:
            with contextlib.suppress(OSError):
                os.close(number)


def daemon_environ(**extra: str) -> dict[str, str]:
    """The test process's environment, able to import this source tree, without any socket
    activation or notification variables."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LISTEN_", "NOTIFY_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def unix_connect(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(IO_TIMEOUT)
    sock.connect(os.fspath(path))
    return sock


async def read_until(stream: trio.abc.ReceiveStream, text: bytes) -> bytes:
    """What `stream` sends up to and including `text` (the test fails if it ends first)."""
    seen = b""
    while text not in seen:
        chunk = await stream.receive_some(4096)
        assert chunk, seen.decode()
        seen += chunk
    return seen


async def read_to_eof(stream: trio.abc.ReceiveStream) -> bytes:
    """Everything `stream` sends until it ends."""
    data = b""
    while chunk := await stream.receive_some(4096):
        data += chunk
    return data


async def read_fd_to_eof(fd: int) -> bytes:
    """Everything the pipe end `fd` delivers until its writers close it (and `fd` closed)."""
    async with trio.lowlevel.FdStream(fd) as stream:
        return await read_to_eof(stream)
