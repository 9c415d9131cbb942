"""The daemon's SDK clients: one per provider configuration, shared by all its sessions.

Building a vendor SDK client costs tens of milliseconds of CPU (its HTTP client makes an SSL
context and loads the CA bundle), and a fresh client pays more on its first request (a new
TCP connection; the ``openai`` SDK's platform probe in a worker thread). A `ClientPool` pays
that once per configuration instead of once per session:

- a client is keyed by (kind, base URL, a SHA-256 digest of the key, connect timeout), so a
  different key — say an ``api_key_command`` that now prints another one —, base URL or
  timeout gets its own client. The key itself is never stored by the pool, logged or shown
  in a repr; only the SDK client holds it, as it would anyway;
- `lease` hands out a `ClientLease`. A missing client is built in a worker thread, never on
  the event loop; concurrent leases of one configuration wait for that one build. A lease of
  an existing client costs no thread and no I/O;
- the provider holding a lease calls `ClientLease.release` from its ``aclose`` instead of
  closing the client, which the other sessions keep using (with its kept-alive connections);
- bounded: a client nobody has held for `idle_seconds` (default 300) is dropped and closed,
  and so is the longest-idle one beyond `max_idle` (default 8) unheld clients. This is done
  at the pool's next `lease` or `release` — the pool runs no task of its own;
- `aclose` (the daemon's shutdown) closes every client, held or not, within a bounded time,
  shielded from the caller's cancellation; a lease after it is refused.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import trio

from robotad.providers.failures import check_api_key, endpoint_of

__all__ = ["ClientKey", "ClientLease", "ClientPool", "PoolClosed"]

log = logging.getLogger("robotad.providers")

#: Seconds one client's close may take before it is given up (its sockets are left to the OS).
_CLOSE_TIMEOUT = 5.0


class _Closable(Protocol):
    async def close(self) -> None: ...


ClientT = TypeVar("ClientT", bound=_Closable)


class PoolClosed(RuntimeError):
    """A lease was asked of a pool that has been closed (the daemon is shutting down)."""


@dataclass(frozen=True)
class ClientKey:
    """What makes two providers' SDK clients interchangeable. `key_digest` is the SHA-256 of
    the key (empty for none) and is left out of the repr all the same."""

    kind: str
    base_url: str | None
    connect_timeout: float
    key_digest: bytes = field(repr=False)

    @classmethod
    def of(
        cls, kind: str, base_url: str | None, api_key: str | None, connect_timeout: float
    ) -> ClientKey:
        digest = hashlib.sha256(api_key.encode()).digest() if api_key else b""
        return cls(kind, base_url, connect_timeout, digest)


@dataclass(eq=False)
class _Entry:
    """One pooled client: None while its build runs (`ready` is set when that ends)."""

    client: Any = None
    ready: trio.Event = field(default_factory=trio.Event)
    holders: int = 0
    #: `trio.current_time()` when the last holder let go; None while held or building.
    idle_since: float | None = None
    #: When it went idle among the pool's clients (ascending), whatever the clock's precision.
    idle_rank: int = 0


class ClientLease(Generic[ClientT]):
    """One provider's hold on a pooled `client`. `release` lets go of it (once; later calls
    do nothing); the client stays open for the others."""

    __slots__ = ("_entry", "_pool", "_released", "client")

    def __init__(self, pool: ClientPool, entry: _Entry) -> None:
        self.client: ClientT = entry.client
        self._pool = pool
        self._entry = entry
        self._released = False

    async def release(self) -> None:
        """Let go of the client; may close clients left idle too long (see the module doc).
        Completes even when the caller is being cancelled."""
        if self._released:
            return
        self._released = True
        await self._pool._release(self._entry)


#: Builds the SDK client of a kind: (base_url, api_key, connect_timeout) → client. Blocking.
ClientBuilder = Callable[[str, str | None, str | None, float], Any]


class ClientPool:
    """The pooled SDK clients of one daemon; see the module docstring.

    `builder` makes a client (blocking; it runs in a worker thread): the daemon's is
    `robotad.providers.new_sdk_client`.
    """

    def __init__(
        self, builder: ClientBuilder, *, idle_seconds: float = 300.0, max_idle: int = 8
    ) -> None:
        self.idle_seconds = idle_seconds
        self.max_idle = max_idle
        self._builder = builder
        self._entries: dict[ClientKey, _Entry] = {}
        self._idle_ranks = itertools.count()
        self._closed = False

    def __len__(self) -> int:
        """How many clients the pool holds (built or being built)."""
        return len(self._entries)

    async def lease(
        self, kind: str, *, base_url: str | None, api_key: str | None, connect_timeout: float
    ) -> ClientLease[Any]:
        """A hold on the client of this configuration, built (in a thread) if missing.

        Raises `ValueError` for a key that cannot be a header value (never quoting it),
        `PoolClosed` after `aclose`, and whatever building the client raised.
        """
        check_api_key(api_key)
        key = ClientKey.of(kind, base_url, api_key, connect_timeout)
        while True:
            if self._closed:
                raise PoolClosed("the SDK client pool is closed")
            entry = self._entries.get(key)
            if entry is None:
                entry = await self._build(key, kind, base_url, api_key, connect_timeout)
            elif entry.client is None:
                await entry.ready.wait()
                continue  # built, failed or closed meanwhile: look again
            entry.holders += 1
            entry.idle_since = None
            await self._sweep()
            return ClientLease(self, entry)

    async def _build(
        self,
        key: ClientKey,
        kind: str,
        base_url: str | None,
        api_key: str | None,
        connect_timeout: float,
    ) -> _Entry:
        """Build the client of `key` in a worker thread, visible to other leases (as being
        built) from the start."""
        entry = self._entries[key] = _Entry()
        build = self._builder
        try:
            client = await trio.to_thread.run_sync(build, kind, base_url, api_key, connect_timeout)
        except BaseException:
            if self._entries.get(key) is entry:
                del self._entries[key]
            entry.ready.set()
            raise
        if self._closed:  # the pool closed while the thread ran (and forgot this entry)
            entry.ready.set()
            await _close_quietly(client)
            raise PoolClosed("the SDK client pool is closed")
        entry.client = client
        entry.ready.set()
        where = endpoint_of(base_url) if base_url else "its default endpoint"
        log.debug("built a %s SDK client for %s", kind, where)
        return entry

    async def _release(self, entry: _Entry) -> None:
        entry.holders -= 1
        if entry.holders == 0:
            entry.idle_since = trio.current_time()
            entry.idle_rank = next(self._idle_ranks)
        await self._sweep()

    async def _sweep(self) -> None:
        """Drop and close the clients idle past `idle_seconds`, and the longest-idle ones
        beyond `max_idle`. Shielded and bounded: closing one client only closes its idle
        sockets."""
        if self._closed:
            return
        now = trio.current_time()
        idle = sorted(
            (
                (entry.idle_rank, entry.idle_since, key)
                for key, entry in self._entries.items()
                if entry.idle_since is not None
            ),
            key=lambda item: item[0],
        )
        excess = len(idle) - self.max_idle
        stale = [
            key
            for place, (_rank, since, key) in enumerate(idle)
            if place < excess or now - since >= self.idle_seconds
        ]
        if not stale:
            return
        doomed = [self._entries.pop(key).client for key in stale]
        await _close_all(doomed)

    async def aclose(self) -> None:
        """Close every client, held or not, and refuse leases from now on. Idempotent;
        bounded and shielded from the caller's cancellation."""
        if self._closed:
            return
        self._closed = True
        doomed = [entry.client for entry in self._entries.values() if entry.client is not None]
        self._entries.clear()
        await _close_all(doomed)


async def _close_all(clients: list[Any]) -> None:
    """Close `clients` side by side, each within its bound, shielded."""
    if not clients:
        return
    with trio.CancelScope(shield=True):
        async with trio.open_nursery() as nursery:
            for client in clients:
                nursery.start_soon(_close_quietly, client)


async def _close_quietly(client: _Closable) -> None:
    with trio.move_on_after(_CLOSE_TIMEOUT, shield=True):
        try:
            await client.close()
        except Exception:
            log.warning("closing an SDK client failed", exc_info=True)
