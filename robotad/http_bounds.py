"""How much of an HTTP answer robotad will hold: bounds under an SDK's HTTP client.

The SDKs robotad talks through read without limits (decision 35). The OpenAI SDK's
event-stream decoder keeps a line until it ends, and an event's data lines until the event
ends, however long; the model SDKs read an error's whole body before raising; the MCP SDK
reads a JSON answer whole. A server that sends a line without end, or an error body without
end, grew the daemon by about 220 MB a second until the turn's idle deadline (120 s by
default); an MCP server's JSON answer without end, until its call's timeout: every session
would go down with the process. The reply's own bound
(`robotad.agent.stream_tap.MAX_REPLY_CHARS`) never saw those bytes, since no event was ever
complete.

`bounded` installs the bounds on an SDK's HTTP client, as a response hook (so they hold over
a proxy too), and raises what `refuse` makes of the reason when one is crossed:

- a successful JSON answer (``application/json``: one message, an MCP server's answer) fails
  once it grows past `MAX_MESSAGE_BYTES` (16 MiB);
- any other successful answer is read as an event stream, and fails once a line, or an event
  (the bytes since the last empty line), grows past `MAX_MESSAGE_BYTES` (a whole reply of
  `MAX_REPLY_CHARS` in one event, JSON-escaped, fits);
- an error's body is read up to `MAX_ERROR_BODY_BYTES` (1 MiB) and no further: the SDK still
  reads the status and what message fits, and the failure is named by its status as ever.

The bounds count the bytes as they arrive, so the client asks for them uncompressed
(``Accept-Encoding: identity``): a compressed answer would unpack to any size. A successful
answer compressed anyway is refused, naming its encoding; an error's compressed body is
dropped (its status still says what went wrong).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Final, TypeVar

import httpx2

__all__ = ["MAX_ERROR_BODY_BYTES", "MAX_MESSAGE_BYTES", "Refuse", "bounded"]

#: The longest line or event of an event stream, and the longest JSON answer, robotad reads.
MAX_MESSAGE_BYTES: Final = 16 << 20
#: The most of an error's body robotad reads.
MAX_ERROR_BODY_BYTES: Final = 1 << 20
#: Two line ends in a row (``\r\n`` is one): an empty line, which ends an event.
_EVENT_ENDS: Final = (b"\n\n", b"\r\r", b"\n\r")

#: What a crossed bound raises, made from its reason (e.g. the provider's `ProviderFailure`).
Refuse = Callable[[str], Exception]
ClientT = TypeVar("ClientT", bound=httpx2.AsyncClient)


def bounded(client: ClientT, refuse: Refuse) -> ClientT:
    """`client`, asking for uncompressed answers and holding each to the bounds (module doc);
    a crossed bound raises `refuse(reason)` from the body's stream."""
    client.headers["Accept-Encoding"] = "identity"
    hooks = client.event_hooks

    async def bound(response: httpx2.Response) -> None:
        _bound(response, refuse)

    client.event_hooks = {
        "request": list(hooks.get("request", [])),
        "response": [*hooks.get("response", []), bound],
    }
    return client


def _bound(response: httpx2.Response, refuse: Refuse) -> None:
    stream = response.stream
    if not isinstance(stream, httpx2.AsyncByteStream):
        return
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    if response.is_success:
        if encoding not in ("", "identity"):
            reason = (
                f"the server compressed its answer ({encoding}) though asked not to: robotad "
                "reads answers uncompressed, so that it can bound what it holds"
            )
            response.stream = _Refused(stream, refuse(reason))
        elif _is_json(response.headers.get("Content-Type", "")):
            response.stream = _BodyBounded(stream, refuse)
        else:
            response.stream = _EventsBounded(stream, refuse)
    elif encoding not in ("", "identity"):
        del response.headers["Content-Encoding"]
        response.stream = _Refused(stream, None)
    else:
        response.stream = _Truncated(stream)


def _is_json(content_type: str) -> bool:
    kind = content_type.partition(";")[0].strip().lower()
    return kind == "application/json" or kind.endswith("+json")


class _BodyBounded(httpx2.AsyncByteStream):
    """The bytes of `inner`, failing once they grow past `MAX_MESSAGE_BYTES`."""

    def __init__(self, inner: httpx2.AsyncByteStream, refuse: Refuse) -> None:
        self._inner = inner
        self._refuse = refuse

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self._inner:
            size += len(chunk)
            if size > MAX_MESSAGE_BYTES:
                raise self._refuse(
                    f"the server sent an answer longer than {MAX_MESSAGE_BYTES >> 20} MiB: "
                    "more than robotad holds of one message"
                )
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _EventsBounded(httpx2.AsyncByteStream):
    """The bytes of `inner`, failing once a line or an event grows past `MAX_MESSAGE_BYTES`.
    A chunk (at most 64 KiB from the transport) is never longer than the bound, so only the
    line and the event it ends or leaves open are counted: the bytes since its last line break,
    and since its last empty line (the chunk before's last byte joins it, for an empty line
    split between them)."""

    def __init__(self, inner: httpx2.AsyncByteStream, refuse: Refuse) -> None:
        self._inner = inner
        self._refuse = refuse

    async def __aiter__(self) -> AsyncIterator[bytes]:
        line = event = 0
        last = b""
        async for chunk in self._inner:
            seen = last + chunk
            line_end = max(seen.rfind(b"\n"), seen.rfind(b"\r"))
            event_end = max(seen.rfind(end) for end in _EVENT_ENDS)
            line = line + len(chunk) if line_end < 0 else len(seen) - line_end - 1
            event = event + len(chunk) if event_end < 0 else len(seen) - event_end - 2
            if max(line, event) > MAX_MESSAGE_BYTES:
                what = "a line" if line > MAX_MESSAGE_BYTES else "an event"
                raise self._refuse(
                    f"the server sent {what} longer than {MAX_MESSAGE_BYTES >> 20} MiB without "
                    "ending it: no event stream robotad can read"
                )
            last = chunk[-1:]
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

    def __init__(self, inner: httpx2.AsyncByteStream, failure: Exception | None) -> None:
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
