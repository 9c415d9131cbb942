"""The daemon's edge for storage failures: a refused durable write answers -32016.

Stores raise `robotad.storage.failure.StorageError` (an `OSError` naming the file relative to
the state folder and the cause); left alone it would reach the peer as an unnamed -32603.
`StorageEdge` wraps a `Router` so every handler registered through it answers such a failure,
found anywhere in the exception's chain, as `StorageFailed` with the session id of the call
when it names one (PROTOCOL.md §10.1). Other exceptions pass unchanged.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from protocol.peer import CallContext, Router
from robotad.storage.failure import storage_failed

__all__ = ["StorageEdge"]

log = logging.getLogger("robotad.daemon")

P = TypeVar("P")
R = TypeVar("R")
Handler = Callable[[P, CallContext], Awaitable[R]]


class StorageEdge:
    """`router`'s `method` decorator, with storage failures mapped (module doc)."""

    def __init__(self, router: Router) -> None:
        self._router = router

    def method(
        self, name: str, params_type: type[P], *, inline: bool = False
    ) -> Callable[[Handler[P, R]], Handler[P, R]]:
        register = self._router.method(name, params_type, inline=inline)

        def wrap(handler: Handler[P, R]) -> Handler[P, R]:
            @functools.wraps(handler)
            async def mapped(params: P, ctx: CallContext) -> R:
                try:
                    return await handler(params, ctx)
                except Exception as exc:
                    session_id = _session_id(params)
                    refused = storage_failed(exc, session_id)
                    if refused is None or refused is exc:
                        raise
                    log.error("%s: %s", name, refused.message)
                    raise refused from exc

            register(mapped)
            return handler

        return wrap


def _session_id(params: Any) -> str | None:
    value = getattr(params, "session_id", None)
    return value if isinstance(value, str) else None
