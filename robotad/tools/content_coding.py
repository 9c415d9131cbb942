"""A response body's content coding undone, within a size bound, and the body proved whole.

WebFetch asks for ``gzip`` and ``deflate`` and unpacks them itself, as they arrive, no
further than the room it has left (httpx's decoder unpacks each arriving chunk whole: 200 KB
of gzip grew the daemon 200 MB before the size limit was seen). Sans-I/O: `Unpacker.unpack`
takes the bytes as received and returns what they unpack to; `Unpacker.end` is called once
the connection has delivered the whole body.

A compressed stream says where it ends; a body of any other coding does not. So a gzip or
deflate body that stops before its stream's end was cut short — by the server, a proxy or the
network — even when HTTP saw nothing wrong (no ``Content-Length``, the connection closing
being the body's end; or a ``Content-Length`` counting only what was sent). Its prefix
unpacks as readily as the whole would, and was once returned as the page: `end` refuses it
(`BodyUnreadable`), as `unpack` refuses a stream that is not gzip or deflate data.

Accepted besides the plain case: a gzip body of several members (RFC 1952 §2.2; what
``cat a.gz b.gz`` makes), zero bytes between members, and bytes after the last member that
start no new one (ignored, as browsers and httpx ignore them); a ``deflate`` body in the zlib
format RFC 9110 names, in the raw format some servers send instead, or in gzip's; a zlib body
labelled ``gzip``. An empty body is empty text.
"""

from __future__ import annotations

import zlib
from typing import Final

__all__ = ["UNPACKED", "BodyUnreadable", "Unpacker"]

#: The content codings WebFetch asks for and `Unpacker` reads.
UNPACKED: Final = ("gzip", "x-gzip", "deflate")

_GZIP_MAGIC: Final = b"\x1f\x8b"


class BodyUnreadable(Exception):
    """The body cannot be read whole: cut short, or not the data its coding says. The
    message says which and what to do, for a person; it follows the URL in a result."""


class Unpacker:
    """Undoes one body's `encoding` (one of `UNPACKED`); see the module doc."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        #: Bytes received so far, as sent (compressed).
        self.received = 0
        self._inflater: zlib._Decompress | None = None
        self._members = 0  # streams that reached their end
        self._held = b""  # too few bytes yet to tell what begins there
        self._ignoring = False  # past the last member: what follows is no body

    def unpack(self, chunk: bytes, room: int) -> bytes:
        """What `chunk` (the next bytes received) unpacks to, at most `room` bytes (≥ 1):
        a result of `room` bytes means the body is at least that large, and the rest of
        `chunk` is not unpacked. Raises `BodyUnreadable` on data of another format."""
        self.received += len(chunk)
        out = bytearray()
        data = self._held + chunk
        self._held = b""
        while data and not self._ignoring and len(out) < room:
            if self._inflater is None:
                data = data.lstrip(b"\0") if self._members else data
                if len(data) < 2:  # a header's first byte alone tells nothing
                    self._held = data
                    break
                self._inflater = self._start(data[:2])
                if self._inflater is None:
                    self._ignoring = True
                    break
            try:
                out += self._inflater.decompress(data, room - len(out))
            except zlib.error as exc:
                raise BodyUnreadable(self._corrupt(exc)) from None
            if self._inflater.eof:
                data = self._inflater.unused_data
                self._inflater = None
                self._members += 1
            else:
                data = self._inflater.unconsumed_tail  # empty unless `room` was reached
        return bytes(out)

    def end(self) -> None:
        """The connection delivered the whole body: raise `BodyUnreadable` if its stream
        had not ended (the body was cut short)."""
        held = self._held  # one byte: a stream's first, unless junk after the last member
        if self._inflater is not None or (held and (not self._members or held == b"\x1f")):
            raise BodyUnreadable(
                f"the body ended before its {self.encoding} stream did ({self.received} "
                "compressed bytes received): the answer was cut short, by the server or "
                "on the way; fetching it again may work"
            )

    def _start(self, head: bytes) -> zlib._Decompress | None:
        """The decompressor of the stream beginning with `head`; None after a member when
        `head` begins no new one (what follows is ignored)."""
        if head == _GZIP_MAGIC:
            return zlib.decompressobj(zlib.MAX_WBITS | 16)
        if self._members:
            return None
        if head[0] & 0x0F == 8 and head[0] >> 4 <= 7 and int.from_bytes(head) % 31 == 0:
            return zlib.decompressobj(zlib.MAX_WBITS)  # the zlib format
        if self.encoding == "deflate":
            return zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate, as some servers send
        raise BodyUnreadable(
            f"its body, sent as {self.encoding}, is not {self.encoding} data: the server's "
            "answer is broken (fetching it again is unlikely to help)"
        )

    def _corrupt(self, exc: zlib.error) -> str:
        detail = str(exc).rpartition(": ")[2] or str(exc)
        return (
            f"its {self.encoding} body is corrupt after {self.received} compressed bytes "
            f"({detail}): the server's answer is broken (fetching it again is unlikely to help)"
        )
