"""`UnavailableProvider`: the provider of a stored session whose own cannot be built now.

A session's provider is rebuilt from config.toml each time the session loads. When that fails
— its ``[providers.NAME]`` table was removed or broken, its key variable is unset, its key
command fails — the session still loads with this stand-in, so everything that needs no model
works: its history, ``show``, ``context``, ``export``, ``fork``, ``close``. A model call (a
turn, a compaction) fails with `reason` and what to do, as a `ProviderError` that no retry can
cure; the session's record keeps naming the provider it was made with.
"""

from __future__ import annotations

from typing import NoReturn

from robotad.agent.provider import ModelRequest, ProviderError, StreamObserver

__all__ = ["UnavailableProvider"]


class UnavailableProvider:
    """Stands in for provider `name` (model `model`), which cannot be built: `reason` says
    why."""

    kind = "unavailable"

    def __init__(self, name: str, model: str, context_window: int | None, reason: str) -> None:
        self.name = name
        self.model = model
        self.context_window = context_window
        self.reason = (
            f"{reason}. The session's history is kept: restore [providers.{name}] in "
            "config.toml (or what it needs) and restart robotad to go on with it; when only "
            "its key was out of reach for a moment, `robotactl close` the session and use it "
            "again (its provider is built anew when it loads)"
        )

    async def complete(self, request: ModelRequest, observer: StreamObserver) -> NoReturn:
        raise ProviderError(self.reason)

    async def aclose(self) -> None:
        return None
