"""Content-free observations of a running turn, and the bus that carries them (G-042, G-043).

The loop publishes one `ProviderRoundObserved` per provider call and one `ToolBodyObserved` per
admitted tool body, each holding only when it happened, which round of the run it belongs to
and how it ended. They never carry a prompt, a response, a tool's arguments or its result, so
any observer (metrics, analytics) may see them.

Observers are synchronous and called in subscription order. One that raises is logged and
skipped: an observation can never change a tool's result or fail a turn.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Literal

from msgspec import Struct

from protocol.shapes import UtcDatetime

__all__ = [
    "EventBus",
    "Observation",
    "ObservedOutcome",
    "Observer",
    "ProviderRoundObserved",
    "ToolBodyObserved",
]

logger = logging.getLogger("robotad.agent.observations")

ObservedOutcome = Literal["ok", "failed", "cancelled"]


class ProviderRoundObserved(Struct, frozen=True, tag_field="kind", tag="provider_round"):
    """A provider call of round `round` (1-based within the run) ended with `outcome`."""

    time: UtcDatetime
    round: int
    outcome: ObservedOutcome


class ToolBodyObserved(Struct, frozen=True, tag_field="kind", tag="tool_body"):
    """An admitted tool body of round `round` ended with `outcome` (round 0 is an open round
    carried over from before the run, e.g. a resumed approval)."""

    time: UtcDatetime
    round: int
    outcome: ObservedOutcome


Observation = ProviderRoundObserved | ToolBodyObserved
Observer = Callable[[Observation], None]


class EventBus:
    """Fan-out of observations to subscribed observers."""

    def __init__(self) -> None:
        self._observers: list[Observer] = []

    def subscribe(self, observer: Observer) -> Callable[[], None]:
        """Add `observer`; returns the function that removes it again (idempotent)."""
        self._observers.append(observer)

        def unsubscribe() -> None:
            if observer in self._observers:
                self._observers.remove(observer)

        return unsubscribe

    def publish(self, observation: Observation) -> None:
        """Hand `observation` to every observer; an observer's exception is logged, not raised."""
        for observer in list(self._observers):
            try:
                observer(observation)
            except Exception:
                logger.warning(
                    "observer %r raised on a %s observation; ignored",
                    observer,
                    type(observation).__name__,
                    exc_info=True,
                )
