"""A session's replay buffer: its last N events, older ones sealed into compressed chunks.

PROTOCOL §6 keeps the last 10,000 events of every session (``--event-buffer N``) so a client
can resubscribe with ``afterSeq`` and miss nothing. Held as dicts they cost about 250 bytes
each — 2.4 MiB for one busy session, for events that are almost never asked for again. So
`ReplayBuffer` keeps only the newest events as they are (the open chunk, up to `CHUNK`) and
seals each full chunk into one zlib-compressed JSON array, which a replay decodes again: a
session's stream repeats the same keys, ids and tool names, so a sealed chunk is a small
fraction of the dicts it replaces, and sealing costs one encode and one compress per `CHUNK`
events.

The buffer holds exactly the last `capacity` events as far as anyone can tell: `oldest_seq`
and `after` never reach further back, although the oldest sealed chunk may still hold a few
older ones until all of its events have left the window. Events are appended with seqs rising
by one (the hub's stamping); a replayed event from a sealed chunk is an equal, fresh dict. A
chunk holding an event that does not encode as JSON (a bug elsewhere: its own delivery fails
too) is kept uncompressed, so one bad event never stops the stream.
"""

from __future__ import annotations

import logging
import zlib
from collections import deque
from dataclasses import dataclass
from typing import Any, Final

import msgspec

__all__ = ["CHUNK", "ReplayBuffer"]

#: Events per sealed chunk (fewer when the buffer holds fewer).
CHUNK: Final = 256

log = logging.getLogger("robotad.daemon.replay")
_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(list[dict[str, Any]])


@dataclass(frozen=True, slots=True)
class _Sealed:
    """`count` events from `first_seq` on: compressed JSON, or the dicts themselves when
    they would not encode (an event only its own delivery can fail on)."""

    first_seq: int
    count: int
    data: bytes | list[dict[str, Any]]

    @property
    def last_seq(self) -> int:
        return self.first_seq + self.count - 1

    def events(self) -> list[dict[str, Any]]:
        if isinstance(self.data, list):
            return self.data
        return _decoder.decode(zlib.decompress(self.data))


def _seal(events: list[dict[str, Any]]) -> _Sealed:
    first: int = events[0]["seq"]
    try:
        data: bytes | list[dict[str, Any]] = zlib.compress(_encoder.encode(events), 1)
    except (TypeError, ValueError, OverflowError):  # msgspec's EncodeError is a ValueError
        log.warning("replay buffer: a chunk of events does not encode; kept uncompressed")
        data = events
    return _Sealed(first, len(events), data)


class ReplayBuffer:
    """The last `capacity` events of one stream (see the module doc)."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, not {capacity}")
        self.capacity = capacity
        self._chunk = min(CHUNK, capacity)
        self._sealed: deque[_Sealed] = deque()
        self._open: list[dict[str, Any]] = []
        self._latest = 0

    def __len__(self) -> int:
        if not self._open and not self._sealed:
            return 0
        return self._latest - self._oldest_held() + 1

    @property
    def oldest_seq(self) -> int | None:
        """The seq of the oldest event still held; None when nothing is."""
        return self._oldest_held() if self._open or self._sealed else None

    def append(self, event: dict[str, Any]) -> None:
        """Keep `event` (its ``seq`` one above the previous one's) as the newest."""
        seq: int = event["seq"]
        if (self._open or self._sealed) and seq != self._latest + 1:
            raise ValueError(f"event seq {seq} does not follow {self._latest}")
        self._open.append(event)
        self._latest = seq
        if len(self._open) >= self._chunk:
            self._sealed.append(_seal(self._open))
            self._open = []
        lowest = self._latest - self.capacity + 1
        while self._sealed and self._sealed[0].last_seq < lowest:
            self._sealed.popleft()

    def after(self, seq: int) -> list[dict[str, Any]]:
        """The held events whose seq is above `seq`, oldest first."""
        start = max(seq + 1, self._oldest_held()) if (self._open or self._sealed) else seq + 1
        events: list[dict[str, Any]] = []
        for sealed in self._sealed:
            if sealed.last_seq >= start:
                events.extend(e for e in sealed.events() if e["seq"] >= start)
        events.extend(e for e in self._open if e["seq"] >= start)
        return events

    def _oldest_held(self) -> int:
        first: int = self._sealed[0].first_seq if self._sealed else self._open[0]["seq"]
        return max(first, self._latest - self.capacity + 1)
