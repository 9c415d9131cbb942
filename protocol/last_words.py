"""What a remote said before it closed a connection we were still writing to.

A server refuses a frame over its size limit with -32600 (``data.limit``; no id: it never read
one) and closes while the client is still writing that frame. The write then fails, and the
refusal waits unread in the socket: the remote has closed, so what it holds is all there is,
read without waiting. Both clients (`blocking_client`, `peer`) read it here, so the caller is
told why instead of "connection lost".
"""

from __future__ import annotations

import contextlib
import os
from typing import Final

from protocol import jsonrpc
from protocol.errors import RpcError
from protocol.framing import FrameDecoder, FramingError

__all__ = ["MAX_LAST_WORDS_BYTES", "refusal_in", "refusal_of"]

#: The most read looking for the refusal.
MAX_LAST_WORDS_BYTES: Final = 1 << 20


def refusal_in(response: jsonrpc.Response) -> RpcError | None:
    """`response`'s error when it answers no request of ours (an id-less refusal), else None."""
    return response.error if response.id is None else None


def refusal_of(fd: int, decoder: FrameDecoder, receive_size: int) -> RpcError | None:
    """The first id-less error in what the non-blocking socket `fd` still holds, decoded
    after what `decoder` was fed so far; None when there is none."""
    data = bytearray()
    with contextlib.suppress(OSError):  # nothing more (BlockingIOError), or a reset after it
        while fd >= 0 and len(data) < MAX_LAST_WORDS_BYTES:
            chunk = os.read(fd, receive_size)
            if not chunk:
                break
            data += chunk
    try:
        frames = [*decoder.feed(bytes(data)), *decoder.feed_eof()]
    except FramingError as exc:
        frames = exc.frames
    for body in frames:
        for message in jsonrpc.parse_frame(body).messages:
            if isinstance(message, jsonrpc.Response) and (refusal := refusal_in(message)):
                return refusal
    return None
