"""A tiny loopback HTTP/1.1 server for the WebFetch tests (it listens on 127.0.0.0/8 only)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial

import trio

Route = Callable[[trio.SocketStream], Awaitable[None]]


async def respond(
    stream: trio.SocketStream,
    status: str,
    body: bytes = b"",
    *,
    content_type: str | None = "text/plain",
    headers: dict[str, str] | None = None,
    length: int | None = None,
) -> None:
    lines = [f"HTTP/1.1 {status}", "Connection: close", f"Content-Length: {length or len(body)}"]
    if content_type is not None:
        lines.append(f"Content-Type: {content_type}")
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    await stream.send_all(("\r\n".join(lines) + "\r\n\r\n").encode() + body)


class LoopbackHTTP:
    """A tiny HTTP/1.1 server: one request per connection, answered by a route per path."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.requests: list[str] = []
        #: Host headers of the requests, in order.
        self.hosts: list[str] = []
        #: Connections accepted, whether or not a request followed.
        self.connections = 0
        self.port = 0

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    async def handle(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        head = b""
        try:
            while b"\r\n\r\n" not in head:
                chunk = await stream.receive_some(4096)
                if not chunk:
                    return
                head += chunk
            target = head.split(b"\r\n", 1)[0].split(b" ")[1].decode()
            self.requests.append(target)
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"host":
                    self.hosts.append(value.strip().decode())
            route = self.routes.get(target)
            if route is None:
                await respond(stream, "404 Not Found", b"no such page")
            else:
                await route(stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await stream.aclose()


async def serve_loopback(nursery: trio.Nursery, host: str = "127.0.0.1") -> LoopbackHTTP:
    """A `LoopbackHTTP` listening on `host` (a loopback address) at a free port."""
    assert host.startswith("127."), "tests contact loopback addresses only"
    http = LoopbackHTTP()
    listeners = await nursery.start(partial(trio.serve_tcp, http.handle, 0, host=host))
    http.port = listeners[0].socket.getsockname()[1]
    return http
