"""Context-window figures: the token estimate, provider usage, and the auto-compact threshold.

``usedTokens`` (G-046): when the last message of history carries provider usage, that usage
(``totalTokens``, else input + output); otherwise the larger of the estimate and the latest
usage seen. The estimate is ``ceil(len(compact JSON of the history) / 4)`` where the length is
that of the UTF-8 bytes msgspec produces for the message list. ``maxTokens`` is the context
window, 200 000 unless the model or configuration says otherwise (G-047).

`ContextTracker` keeps the estimate cheap on long histories: history is append-only, so the
encoded size of every message but the last is cached and only new messages (and the last one,
which the loop may still be completing) are encoded again. A history that is not an extension
of the one last measured (compaction, fork, replacement) is measured afresh.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Final

import msgspec

from protocol.shapes import ContextState, Message, Usage
from robotad.session.errors import InvalidSetting

__all__ = [
    "AUTO_COMPACT_THRESHOLD",
    "DEFAULT_CONTEXT_WINDOW",
    "ContextTracker",
    "estimate_tokens",
    "parse_auto_compact_threshold",
    "should_auto_compact",
]

DEFAULT_CONTEXT_WINDOW: Final = 200_000
AUTO_COMPACT_THRESHOLD: Final = 0.835

_encoder = msgspec.json.Encoder()


def estimate_tokens(messages: Sequence[Message]) -> int:
    """``ceil(len(compact JSON of messages) / 4)``."""
    return math.ceil(len(_encoder.encode(list(messages))) / 4)


def parse_auto_compact_threshold(
    value: object, path: str = "$.autoCompactThreshold"
) -> float | bool:
    """A threshold fraction in (0, 1], or False (disabled); anything else is `InvalidSetting`
    at `path` (G-052). True is refused: only false has a meaning."""
    if value is False:
        return False
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not (math.isfinite(value) and 0 < value <= 1)
    ):
        raise InvalidSetting(
            [{"path": path, "message": "must be a number greater than 0 and at most 1, or false"}]
        )
    return float(value)


def should_auto_compact(state: ContextState, threshold: float | bool) -> bool:
    """Whether usage has reached `threshold` of the window; never when it is False (G-053)."""
    if threshold is False or threshold is True or state.max_tokens <= 0:
        return False
    return state.used_tokens >= threshold * state.max_tokens


class ContextTracker:
    """One session's context figures. `update_from_reply` records each provider usage;
    `state(history)` computes the figures for a history.

    The size cache assumes what history already holds is not edited in place, except its last
    message; call `invalidate` after any other in-place edit."""

    def __init__(self, max_tokens: int = DEFAULT_CONTEXT_WINDOW) -> None:
        self.max_tokens = max_tokens
        self._latest: int | None = None
        self._measured: list[Message] = []  # the messages measured last time, in order
        self._sizes: list[int] = []  # their encoded sizes
        self._total = 0  # sum(self._sizes)

    @property
    def latest_usage(self) -> int | None:
        """The latest provider usage seen (None before any)."""
        return self._latest

    def update_from_reply(self, usage: Usage | None) -> None:
        if usage is not None:
            self._latest = usage.used

    def reset(self) -> None:
        """Forget the usage seen, e.g. after compaction replaced what it measured."""
        self._latest = None

    def restore(self, latest_usage: int | None) -> None:
        """Take back `latest_usage` as the latest usage seen (a change of history undone)."""
        self._latest = latest_usage

    def invalidate(self) -> None:
        """Forget the cached sizes; the next estimate encodes the whole history."""
        self._measured.clear()
        self._sizes.clear()
        self._total = 0

    def estimate(self, history: Sequence[Message]) -> int:
        """`estimate_tokens(history)`, encoding only what changed since the last call."""
        keep = self._reusable_prefix(history)
        if keep == 0:
            self.invalidate()
        else:
            self._total -= sum(self._sizes[keep:])
            del self._sizes[keep:]
            del self._measured[keep:]
        for message in history[keep:]:
            size = len(_encoder.encode(message))
            self._sizes.append(size)
            self._measured.append(message)
            self._total += size
        # "[" + messages joined by "," + "]"
        return math.ceil((2 + self._total + max(len(history) - 1, 0)) / 4)

    def _reusable_prefix(self, history: Sequence[Message]) -> int:
        """How many leading messages keep their cached size: those measured before, short of
        the last one measured (it may have changed in place), if `history` extends them."""
        known = min(len(self._measured), len(history) + 1) - 1
        if known <= 0:
            return 0
        if (
            history[0] is not self._measured[0]
            or history[known - 1] is not self._measured[known - 1]
        ):
            return 0
        return known

    def state(self, history: Sequence[Message]) -> ContextState:
        """The figures for `history` (G-046, G-047)."""
        last_usage = history[-1].usage if history else None
        if last_usage is not None:
            self._latest = last_usage.used
            return ContextState.of(last_usage.used, self.max_tokens)
        used = max(self.estimate(history), self._latest or 0)
        return ContextState.of(used, self.max_tokens)
