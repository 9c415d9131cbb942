"""robotad's wire protocol: types, framing, JSON-RPC peer, error codes (PROTOCOL.md).

This package never imports the daemon, and only `protocol.peer` and `protocol.client` import
trio. The names below are re-exported lazily, so ``import protocol.errors`` (or any one
module) costs only that module; the full reference is ``protocol/REFERENCE.md``.

    from protocol import open_connection, RpcError
    async with open_connection() as peer:
        status = await peer.request("daemon/status")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.lazy import lazy_attributes

if TYPE_CHECKING:
    from protocol.client import open_connection as open_connection
    from protocol.errors import RpcError as RpcError
    from protocol.events import EVENT_METHOD as EVENT_METHOD
    from protocol.events import SessionEvent as SessionEvent
    from protocol.framing import DEFAULT_MAX_FRAME_BYTES as DEFAULT_MAX_FRAME_BYTES
    from protocol.framing import Framing as Framing
    from protocol.jsonrpc import ConnectionLost as ConnectionLost
    from protocol.jsonrpc import MalformedResponse as MalformedResponse
    from protocol.methods import METHODS as METHODS
    from protocol.methods import PROTOCOL_VERSION as PROTOCOL_VERSION
    from protocol.peer import CallContext as CallContext
    from protocol.peer import JsonRpcPeer as JsonRpcPeer
    from protocol.peer import Router as Router
    from protocol.socket_path import resolve_socket_path as resolve_socket_path

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "EVENT_METHOD",
    "METHODS",
    "PROTOCOL_VERSION",
    "CallContext",
    "ConnectionLost",
    "Framing",
    "JsonRpcPeer",
    "MalformedResponse",
    "Router",
    "RpcError",
    "SessionEvent",
    "open_connection",
    "resolve_socket_path",
]

_HOMES = {
    "open_connection": "protocol.client",
    "RpcError": "protocol.errors",
    "EVENT_METHOD": "protocol.events",
    "SessionEvent": "protocol.events",
    "DEFAULT_MAX_FRAME_BYTES": "protocol.framing",
    "Framing": "protocol.framing",
    "METHODS": "protocol.methods",
    "PROTOCOL_VERSION": "protocol.methods",
    "CallContext": "protocol.peer",
    "ConnectionLost": "protocol.jsonrpc",
    "JsonRpcPeer": "protocol.peer",
    "MalformedResponse": "protocol.jsonrpc",
    "Router": "protocol.peer",
    "resolve_socket_path": "protocol.socket_path",
}


__getattr__ = lazy_attributes(globals(), _HOMES)
