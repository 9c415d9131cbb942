"""How much of a model server's answer robotad will hold: bounds under the SDKs' HTTP client.

The SDKs read without limits. The OpenAI SDK's event-stream decoder keeps a line until it
ends, however long, and both SDKs read an error's whole body before raising. A server that
sends a line without end, or an error body without end, grew the daemon by about 220 MB a
second until the turn's idle deadline (120 s by default): every session would go down with
the process. The reply's own bound (`robotad.agent.stream_tap.MAX_REPLY_CHARS`) never saw
those bytes, since no event was ever complete.

`bounded` installs two bounds on an SDK's HTTP client, as a response hook (so they hold over
a proxy too):

- a successful answer (an event stream) fails with a `ProviderFailure` naming the bound when
  a line grows past `MAX_LINE_BYTES` (16 MiB: a whole reply of `MAX_REPLY_CHARS` in one
  event, JSON-escaped, fits);
- an error's body is read up to `MAX_ERROR_BODY_BYTES` (1 MiB) and no further: the SDK still
  reads the status and what message fits, and the failure is named by its status as ever.

The bounds count the bytes as they arrive, so the client asks for them uncompressed
(``Accept-Encoding: identity``): a compressed answer would unpack to any size. A successful
answer compressed anyway is refused, naming its encoding; an error's compressed body is
dropped (its status still says what went wrong).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Final, TypeVar

import httpx2

from robotad.providers.failures import ProviderFailure

__all__ = ["MAX_ERROR_BODY_BYTES", "MAX_LINE_BYTES", "bounded"]

#: The longest line of an event stream robotad reads.
MAX_LINE_BYTES: Final = 16 << 20
#: The most of an error's body robotad reads.
MAX_ERROR_BODY_BYTES: Final = 1 << 20

ClientT = TypeVar("ClientT", bound=httpx2.AsyncClient)


def bounded(client: ClientT) -> ClientT:
    """`client`, asking for uncompressed answers and holding each to the bounds (module doc)."""
    client.headers["Accept-Encoding"] = "identity"
    hooks = client.event_hooks
    client.event_hooks = {
        "request": list(hooks.get("request", [])),
        "response": [*hooks.get("response", []), _bound],
    }
    return client


async def _bound(response: httpx2.Response) -> None:
    stream = response.stream
    if not isinstance(stream, httpx2.AsyncByteStream):
        return
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    if response.is_success:
        if encoding not in ("", "identity"):
            failure = ProviderFailure(
                f"the server compressed its answer ({encoding}) though asked not to: robotad "
                "reads answers uncompressed, so that it can bound what it holds"
            )
            response.stream = _Refused(stream, failure)
        else:
            response.stream = _LinesBounded(stream)
    elif encoding not in ("", "identity"):
        del response.headers["Content-Encoding"]
        response.stream = _Refused(stream, None)
    else:
        response.stream = _Truncated(stream)


class _LinesBounded(httpx2.AsyncByteStream):
    """The bytes of `inner`, failing once a line grows past `MAX_LINE_BYTES`. A chunk (at most
    64 KiB from the transport) is never longer than the bound, so only the line it ends or
    leaves open is counted: the bytes since its last line break."""

    def __init__(self, inner: httpx2.AsyncByteStream) -> None:
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        line = 0
        async for chunk in self._inner:
            end = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
            line = line + len(chunk) if end < 0 else len(chunk) - end - 1
            if line > MAX_LINE_BYTES:
                raise ProviderFailure(
                    f"the server sent a line longer than {MAX_LINE_BYTES >> 20} MiB without "
                    "ending it: no event stream robotad can read"
                )
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Truncated(httpx2.AsyncByteStream):
    """The first `MAX_ERROR_BODY_BYTES` of `inner`, then its end."""

    def __init__(self, inner: httpx2.AsyncByteStream) -> None:
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        room = MAX_ERROR_BODY_BYTES
        async for chunk in self._inner:
            yield chunk[:room]
            room -= len(chunk)
            if room <= 0:
                return

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Refused(httpx2.AsyncByteStream):
    """No bytes of `inner`: `failure` when read (None: an empty body)."""

    def __init__(self, inner: httpx2.AsyncByteStream, failure: ProviderFailure | None) -> None:
        self._inner = inner
        self._failure = failure

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._failure is not None:
            raise self._failure
        nothing: tuple[bytes, ...] = ()
        for chunk in nothing:
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()
