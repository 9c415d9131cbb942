"""robotad's wire protocol: types, framing, JSON-RPC peer, error codes (PROTOCOL.md).

This package never imports the daemon, and only `protocol.peer` and `protocol.client` import
trio. It re-exports nothing, so ``import protocol.errors`` costs only that module; import each
name from its module. The full reference is ``protocol/REFERENCE.md``.

- `framing`, `jsonrpc` — sans-I/O framing (NDJSON, Content-Length) and JSON-RPC state.
- `peer`, `client` — the trio shells; `blocking_client` — the plain-socket one;
  `unix_connect` — the connect both make, which waits for a place in a full backlog.
- `methods`, `shapes`, `events`, `errors` — the wire types and codes; `validate` — the total walker.
- `socket_path` — where the socket is; `gen_reference` — writes REFERENCE.md from the Structs.

    from protocol.client import open_connection
    async with open_connection() as peer:
        status = await peer.request("daemon/status")
"""
