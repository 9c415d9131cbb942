"""The daemon's edge for the domain's errors: each maps to its wire error once, here.

- Stores raise `robotad.storage.failure.StorageError` (an `OSError` naming the file relative to
  the state folder and the cause); left alone it would reach the peer as an unnamed -32603.
  Found anywhere in the exception's chain, it answers `StorageFailed` (-32016) with the session
  id of the call when it names one (PROTOCOL.md §10.1).
- An `OSError` saying the process or the system is out of file descriptors (EMFILE, ENFILE),
  anywhere in the chain, is the system's limit, not a bug: `StorageFailed` too, naming the
  file (relative to the state folder) and "too many open files".
- The session raises `robotad.session.errors.InvalidSetting` for a malformed setting it is
  told (a permission mode, a rule), and storage `robotad.storage.refusal.InputRejected` for an
  input it will not take (an unsafe id, an artifact that does not decode); each answers
  `InvalidParams` (-32602) with the same located issues, both naming their inputs as the
  methods' params do.

`DomainEdge` wraps a `Router` so every handler registered through it maps both. Other
exceptions pass unchanged.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from protocol.errors import InvalidParams, Issue
from protocol.peer import CallContext, Router
from robotad.session.errors import InvalidSetting
from robotad.storage.failure import exhausted, storage_failed
from robotad.storage.refusal import InputRejected

__all__ = ["DomainEdge"]

log = logging.getLogger("robotad.daemon")

P = TypeVar("P")
R = TypeVar("R")
Handler = Callable[[P, CallContext], Awaitable[R]]


class DomainEdge:
    """`router`'s `method` decorator, with the domain's errors mapped (module doc)."""

    def __init__(self, router: Router, state_dir: Path) -> None:
        self._router = router
        self._state_dir = state_dir

    def method(
        self,
        name: str,
        params_type: type[P],
        *,
        inline: bool = False,
        more_issues: Callable[[P, frozenset[str]], list[Issue]] | None = None,
        stand_ins: Mapping[str, Any] | None = None,
    ) -> Callable[[Handler[P, R]], Handler[P, R]]:
        register = self._router.method(
            name, params_type, inline=inline, more_issues=more_issues, stand_ins=stand_ins
        )

        def wrap(handler: Handler[P, R]) -> Handler[P, R]:
            @functools.wraps(handler)
            async def mapped(params: P, ctx: CallContext) -> R:
                try:
                    return await handler(params, ctx)
                except (InvalidSetting, InputRejected) as exc:
                    raise InvalidParams(exc.issues) from None
                except Exception as exc:
                    session_id = _session_id(params)
                    refused = storage_failed(exc, session_id) or exhausted(
                        exc, self._state_dir, session_id
                    )
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
