"""What watches one provider call as it streams: the idle deadline and the reply's bound.

Every model call — a turn's and a compaction's summary — is observed through a `StreamTap`:
each sign of life moves the call's idle deadline (G-040), and a reply that grows past
`MAX_REPLY_CHARS` (its text, tool calls' arguments and thinking together) is stopped with
`ReplyTooLong`, a provider failure, instead of filling memory, the record and the log.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

import trio

from robotad.agent.model_text import encodable_text
from robotad.agent.provider import ProviderError

__all__ = ["MAX_REPLY_CHARS", "ReplyTooLong", "StreamTap"]

logger = logging.getLogger("robotad.agent.stream_tap")

#: Characters one reply may stream before the call is stopped: far past any model's output
#: limit, and inside what one message of robotad's wire carries (16 MiB) even as JSON at its
#: widest (6 bytes for an escaped control character).
MAX_REPLY_CHARS: Final = 2 * 2**20


class ReplyTooLong(ProviderError):
    """A reply passed `MAX_REPLY_CHARS`; raised inside the provider's stream, which ends it."""

    def __init__(self) -> None:
        super().__init__(
            f"the reply passed {MAX_REPLY_CHARS // 2**20} Mi characters without ending; "
            "stopped there (a server that streams without end?)"
        )


class StreamTap:
    """The `StreamObserver` of one provider call: moves the `idle` scope's deadline on every
    sign of life, keeps the text in `partial` and forwards it to `sink` (when given), and
    stops a reply that passes `MAX_REPLY_CHARS`. `replying` says whether the reply began (any
    sign of life came), for the idle failure to say which wait ran out."""

    def __init__(
        self,
        idle: trio.CancelScope,
        timeout: float | None,
        *,
        partial: list[str] | None = None,
        sink: Callable[[str], None] | None = None,
    ) -> None:
        self._partial = partial
        self._idle = idle
        self._timeout = timeout
        self._sink = sink
        self._chars = 0
        self.on_activity()
        self.replying = False

    def on_activity(self, chars: int = 0) -> None:
        self.replying = True
        if self._timeout is not None:
            self._idle.deadline = trio.current_time() + self._timeout
        self._chars += chars
        if self._chars > MAX_REPLY_CHARS:
            raise ReplyTooLong()

    def on_text(self, delta: str) -> None:
        self.on_activity(len(delta))
        if not delta:
            return
        delta = encodable_text(delta)  # a lone surrogate could reach no client nor log
        if self._partial is not None:
            self._partial.append(delta)
        if self._sink is not None:
            try:
                self._sink(delta)
            except Exception:
                logger.warning("on_text callback raised; delta not forwarded", exc_info=True)
