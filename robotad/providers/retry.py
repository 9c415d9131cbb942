"""Our bounded retry around one streamed model call (the SDKs' own is off: ``max_retries=0``).

A call is retried when its `ProviderError` is `retryable` (429, 5xx, 408/409, connection errors,
timeouts, an error event inside the stream), at most `RetryPolicy.max_retries` times, and only
while no text delta has reached the caller's observer: once the person has seen part of a
reply, a second attempt would show a different reply glued to it. Chunks that carry no text
(a role header, tool-call argument pieces, usage) are invisible to the caller, so a stream that
broke during them is still retried.

The wait before retry *n* (1-based) is the server's Retry-After when it gave one, capped at
`retry_after_cap`; otherwise exponential backoff ``base_delay * 2**(n-1)`` capped at
`max_delay`, with "equal jitter" (a random point in its upper half) so clients that failed
together do not return together. Cancellation by an enclosing trio scope passes straight
through, also while waiting. No retry starts (and no wait begins) unless, after the wait,
as much time is left as the failed attempt took, before the earliest of `budget` seconds
after the call began and every enclosing cancel scope's deadline (the turn's idle window,
which a session may set shorter than the provider's): the last failure is raised instead, so
a caller's idle window is never spent asleep, nor on an attempt that would be cut off as the
last one failed (a connection that timed out), and the real cause is what it sees. A quick
failure (a refused connection, an HTTP 500) is still retried in a short window.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import trio

from robotad.agent.provider import ProviderError, StreamObserver

from .failures import ProviderFailure

__all__ = ["RetryPolicy", "StreamProgress", "call_with_retries"]

log = logging.getLogger("robotad.providers.retry")

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry. All figures in seconds."""

    max_retries: int = 2
    base_delay: float = 0.5
    max_delay: float = 8.0
    retry_after_cap: float = 60.0

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")
        for name in ("base_delay", "max_delay", "retry_after_cap"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")

    def delay(self, retry: int, retry_after: float | None, jitter: float) -> float:
        """The wait before retry number `retry` (1-based); `jitter` is in [0, 1)."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.retry_after_cap)
        ceiling = min(self.base_delay * 2.0 ** (retry - 1), self.max_delay)
        return ceiling * (0.5 + 0.5 * jitter)


class StreamProgress:
    """The caller's observer, passed through, remembering whether any text has gone out."""

    __slots__ = ("observer", "text_sent")

    def __init__(self, observer: StreamObserver) -> None:
        self.observer = observer
        self.text_sent = False

    def on_text(self, delta: str) -> None:
        self.text_sent = True
        self.observer.on_text(delta)

    def on_activity(self, chars: int = 0) -> None:
        self.observer.on_activity(chars)


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    progress: StreamProgress,
    provider: str,
    sleep: Callable[[float], Awaitable[None]] = trio.sleep,
    jitter: Callable[[], float] = random.random,
    budget: float | None = None,
) -> T:
    """Run `attempt` until it succeeds, fails for good, the retries are spent, or the next
    retry would end past `budget` seconds from now (see the module docstring).

    Raises the last `ProviderError`; when retries were spent on it, its reason says how many
    attempts were made. Anything that is not a `ProviderError` propagates untouched.
    """
    deadline = None if budget is None else trio.current_time() + budget
    retry = 0
    while True:
        began = trio.current_time()
        try:
            return await attempt()
        except ProviderError as err:
            took = trio.current_time() - began
            if not err.retryable or progress.text_sent:
                raise
            wait = 0.0
            hint = err.retry_after if isinstance(err, ProviderFailure) else None
            if retry < policy.max_retries:
                wait = policy.delay(retry + 1, hint, jitter())
            ends = trio.current_effective_deadline()
            if deadline is not None:
                ends = min(ends, deadline)
            out_of_time = trio.current_time() + wait + took >= ends
            if retry >= policy.max_retries or out_of_time:
                if out_of_time and hint is not None and retry < policy.max_retries:
                    # Given up for want of time: say how long the server asked for.
                    err = ProviderFailure(
                        f"{err.reason} (the server asks to wait {hint:g} s)",
                        retryable=True,
                        status=err.status,
                    )
                if retry == 0:
                    raise err from None
                raise ProviderFailure(
                    f"{err.reason} (gave up after {retry + 1} attempts)",
                    retryable=True,
                    status=err.status,
                ) from None
            retry += 1
            log.info(
                "provider %s: %s; retry %d of %d in %.2fs",
                provider,
                err.reason,
                retry,
                policy.max_retries,
                wait,
            )
        await sleep(wait)
