"""W3C trace context for hook children (``TRACEPARENT``, G-135…G-138).

A `TraceContext` names one span of one trace: ``00-<trace-id>-<span-id>-<flags>``. A turn that
runs with tracing gets a root (`TraceContext.new_root`); hooks on that turn's path are handed
the root's ``traceparent``; a tool call gets its own child span (`child`), and its tool-use
hooks take their TRACEPARENT from that call context, never from a span the tool body opens.
Which firings carry a context is the Session's decision; `HookRunner` only passes on the one
it is given, and strips any TRACEPARENT the daemon itself inherited.
"""

from __future__ import annotations

import re
import secrets

from msgspec import Struct

__all__ = ["TraceContext"]

_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})\Z")


class TraceContext(Struct, frozen=True):
    """One span: 32 lowercase hex digits of trace id, 16 of span id, and the sampled flag."""

    trace_id: str
    span_id: str
    sampled: bool = True

    @classmethod
    def new_root(cls, *, sampled: bool = True) -> TraceContext:
        """A fresh trace with a fresh root span (random ids, never all zero)."""
        return cls(_nonzero_hex(16), _nonzero_hex(8), sampled)

    def child(self) -> TraceContext:
        """A new span in the same trace."""
        return TraceContext(self.trace_id, _nonzero_hex(8), self.sampled)

    @property
    def traceparent(self) -> str:
        """The ``traceparent`` header value (version 00)."""
        return f"00-{self.trace_id}-{self.span_id}-{'01' if self.sampled else '00'}"

    @classmethod
    def parse(cls, header: str) -> TraceContext | None:
        """Read a ``traceparent`` value; None when it is not a valid one (version ``ff``,
        all-zero ids, wrong lengths, uppercase hex or extra fields)."""
        match = _TRACEPARENT.match(header.strip())
        if match is None:
            return None
        version, trace_id, span_id, flags = match.groups()
        if version == "ff" or set(trace_id) == {"0"} or set(span_id) == {"0"}:
            return None
        return cls(trace_id, span_id, bool(int(flags, 16) & 1))


def _nonzero_hex(nbytes: int) -> str:
    while True:
        value = secrets.token_hex(nbytes)
        if value.strip("0"):
            return value
