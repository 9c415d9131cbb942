"""Message framing on a byte stream (PROTOCOL.md §1), sans-I/O.

Two framings, sniffed once per connection from the first non-whitespace byte:

- ``ndjson`` (first byte ``{`` or ``[``): one UTF-8 JSON value per line. A line ends at ``\\n``;
  a ``\\r`` before it is dropped; blank lines between values are skipped.
- ``content-length`` (first byte ``C`` or ``c``): the LSP base protocol, header lines then an
  empty line then exactly ``Content-Length`` bytes of body. Header names are case-insensitive,
  lines may end in ``\\r\\n`` or a bare ``\\n``, and ``Content-Type`` (or any other well-formed
  header) is tolerated and ignored.

`FrameDecoder.feed` turns received bytes into complete frame bodies. The frame cap is enforced
before a frame is buffered whole: an NDJSON line that grows past the limit without a newline, or
a ``Content-Length`` above the limit, raises `FrameTooLarge` at once. Any other violation of
the framing (an unknown first byte, a malformed header) raises `FramingError`. Both are final:
a decoder that raised keeps raising, because the stream can no longer be resynchronised; the
caller answers once and closes the connection.

This module does no I/O and knows nothing of JSON-RPC.
"""

from __future__ import annotations

from typing import Final, Literal

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "MAX_HEADER_BYTES",
    "FrameDecoder",
    "FrameTooLarge",
    "Framing",
    "FramingError",
    "encode_frame",
    "sniff_framing",
]

Framing = Literal["ndjson", "content-length"]

#: The default frame cap, 16 MiB (``--max-message-bytes``).
DEFAULT_MAX_FRAME_BYTES: Final = 16 * 1024 * 1024

#: The longest header section a Content-Length frame may have; real clients send < 100 bytes.
MAX_HEADER_BYTES: Final = 8 * 1024

_WHITESPACE: Final = b" \t\r\n"


class FramingError(ValueError):
    """The byte stream does not follow its framing; the connection cannot continue.

    `frames` holds the frame bodies that the same `FrameDecoder.feed` call completed before
    the violation: they are intact and the caller should still handle them, then the error.
    """

    frames: list[bytes]

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.frames = []


class FrameTooLarge(FramingError):
    """A frame exceeds the cap. `limit` is the cap in bytes (it goes on the wire as
    ``data.limit``)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(f"frame larger than {limit} bytes")


_BOM: Final = b"\xef\xbb\xbf"


def sniff_framing(first_byte: int) -> Framing:
    """The framing a connection uses, from its first non-whitespace byte."""
    if first_byte in b"{[":
        return "ndjson"
    if first_byte in b"Cc":
        return "content-length"
    raise FramingError("unknown framing: expected a JSON value (NDJSON) or a Content-Length header")


def encode_frame(body: bytes, framing: Framing) -> bytes:
    """One frame carrying `body`. For NDJSON `body` must hold no raw newline, which compact
    JSON never does (newlines inside strings are escaped)."""
    if framing == "ndjson":
        return body + b"\n"
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class FrameDecoder:
    """Incremental decoder of one connection's incoming frames.

    `framing` is fixed by the first non-whitespace byte unless given up front. `max_frame_bytes`
    caps each frame body. The decoder never holds more than about one cap's worth of bytes
    (plus one received chunk) for a frame that is still incomplete.
    """

    def __init__(
        self, *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, framing: Framing | None = None
    ) -> None:
        if max_frame_bytes < 1:
            raise ValueError("max_frame_bytes must be positive")
        self.max_frame_bytes = max_frame_bytes
        self._framing: Framing | None = framing
        self._buffer = bytearray()
        self._scan_from = 0  # NDJSON: bytes before this offset hold no newline
        self._body_length: int | None = None  # Content-Length: headers read, body pending
        self._failure: FramingError | None = None
        #: After `feed_eof`: what of a Content-Length frame the end of the stream cut short
        #: (``"a body of 45 bytes, 40 of them received"``), or None.
        self.cut_short: str | None = None

    @property
    def framing(self) -> Framing | None:
        """The sniffed (or given) framing; None until a non-whitespace byte arrived."""
        return self._framing

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as part of a frame."""
        return len(self._buffer)

    def feed(self, data: bytes | bytearray) -> list[bytes]:
        """Add received bytes; return every frame body they complete, in order.

        Raises `FrameTooLarge` or `FramingError`, whose `frames` carries the frames completed
        before the violation; after either, every later call raises the same error again (with
        no frames).
        """
        if self._failure is not None:
            self._failure.frames = []
            raise self._failure
        self._buffer += data
        frames: list[bytes] = []
        try:
            if self._framing is None and not self._sniff():
                return frames
            if self._framing == "ndjson":
                self._ndjson_frames(frames)
            else:
                self._content_length_frames(frames)
        except FramingError as exc:
            exc.frames = frames
            self._failure = exc
            self._buffer.clear()
            raise
        return frames

    def feed_eof(self) -> list[bytes]:
        """The stream ended: return a last NDJSON line that had no newline, if any.

        A Content-Length frame cut short by the end of the stream is discarded: its body is
        incomplete and nothing in it can be trusted. `cut_short` then says what was missing,
        for the caller to tell the remote.
        """
        if self._failure is not None or self._framing != "ndjson":
            self.cut_short = self._unfinished()
            self._buffer.clear()
            return []
        tail = bytes(self._buffer).strip(_WHITESPACE)
        self._buffer.clear()
        self._scan_from = 0
        return [tail] if tail else []

    def _unfinished(self) -> str | None:
        """What of a Content-Length frame is still missing (see `cut_short`)."""
        if self._failure is not None or self._framing != "content-length":
            return None
        if self._body_length is not None:
            return f"a body of {self._body_length} bytes, {len(self._buffer)} of them received"
        if self._buffer.strip(_WHITESPACE):
            return "a header section without its empty line"
        return None

    # -- sniffing ---------------------------------------------------------------------------

    def _sniff(self) -> bool:
        stripped = self._buffer.lstrip(_WHITESPACE)
        if stripped and _BOM.startswith(bytes(stripped[: len(_BOM)])):
            if len(stripped) < len(_BOM):
                return False  # perhaps a byte-order mark: wait for the rest of it
            # A byte-order mark some writers put first is no part of the first frame.
            stripped = stripped[len(_BOM) :].lstrip(_WHITESPACE)
        if not stripped:
            self._buffer.clear()  # whitespace before the first frame is meaningless
            return False
        self._framing = sniff_framing(stripped[0])
        del self._buffer[: len(self._buffer) - len(stripped)]
        return True

    # -- NDJSON -----------------------------------------------------------------------------

    def _ndjson_frames(self, frames: list[bytes]) -> None:
        buffer = self._buffer
        limit = self.max_frame_bytes
        start = 0
        while (newline := buffer.find(b"\n", max(start, self._scan_from))) >= 0:
            end = newline - 1 if newline > start and buffer[newline - 1] == 0x0D else newline
            if end - start > limit:
                raise FrameTooLarge(limit)
            line = bytes(buffer[start:end]).strip(_WHITESPACE)
            if line:
                frames.append(line)
            start = newline + 1
        if start:
            del buffer[:start]
        self._scan_from = len(buffer)
        # The unterminated rest is one line in the making; once it is longer than the cap (a
        # final "\r" may still turn out to be part of its line break) it can never fit.
        if len(buffer) - (1 if buffer.endswith(b"\r") else 0) > limit:
            raise FrameTooLarge(limit)

    # -- Content-Length ---------------------------------------------------------------------

    def _content_length_frames(self, frames: list[bytes]) -> None:
        while self._body_length is not None or self._read_headers():
            length = self._body_length
            if length is None or len(self._buffer) < length:
                break
            frames.append(bytes(self._buffer[:length]))
            del self._buffer[:length]
            self._body_length = None

    def _read_headers(self) -> bool:
        """Parse a complete header section off the buffer; False if it is still incomplete."""
        # Stray line breaks between frames are tolerated (some clients end a body with one).
        leading = 0
        while leading < len(self._buffer) and self._buffer[leading] in b"\r\n":
            leading += 1
        if leading:
            del self._buffer[:leading]
        end, separator = _header_end(self._buffer)
        if end < 0:
            if len(self._buffer) > MAX_HEADER_BYTES:
                raise FramingError(f"header section longer than {MAX_HEADER_BYTES} bytes")
            return False
        if end > MAX_HEADER_BYTES:
            raise FramingError(f"header section longer than {MAX_HEADER_BYTES} bytes")
        section = bytes(self._buffer[:end])
        del self._buffer[: end + separator]
        self._body_length = _content_length(section, self.max_frame_bytes)
        return True


def _header_end(buffer: bytearray) -> tuple[int, int]:
    """Offset and length of the blank line ending the header section, or (-1, 0)."""
    candidates = [
        (index, len(sep))
        for sep in (b"\r\n\r\n", b"\n\n", b"\r\n\n", b"\n\r\n")
        if (index := buffer.find(sep, 0, MAX_HEADER_BYTES + len(sep))) >= 0
    ]
    return min(candidates) if candidates else (-1, 0)


def _content_length(section: bytes, limit: int) -> int:
    """The body length a header section announces, checked against the cap."""
    length: int | None = None
    for raw_line in section.split(b"\n"):
        line = raw_line.rstrip(b"\r")
        name, colon, value = line.partition(b":")
        if not colon or not name.strip() or name != name.strip():
            raise FramingError("malformed header line: expected 'Name: value'")
        if name.lower() != b"content-length":
            continue  # Content-Type and the like carry nothing we act on
        if length is not None:
            raise FramingError("Content-Length given twice")
        text = value.strip()
        if not text.isascii() or not text.isdigit():
            raise FramingError("Content-Length is not a non-negative integer")
        digits = text.lstrip(b"0")
        if len(digits) > len(str(limit)) or int(digits or b"0") > limit:
            raise FrameTooLarge(limit)  # however many digits: never an int of them all
        length = int(digits or b"0")
    if length is None:
        raise FramingError("header section without Content-Length")
    return length
