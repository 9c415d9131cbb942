"""``mcp/list`` (PROTOCOL.md §10.5) on a `Router`.

It runs in its own task: listing starts the servers not running and waits for each start
(bounded by its startup timeout). With a `sessionId` the session is loaded first (like any
session method) so its own servers are known.
"""

from __future__ import annotations

from msgspec import UNSET

from protocol.methods import McpListParams, McpListResult
from protocol.peer import CallContext, Router
from robotad.daemon.manager import SessionManager
from robotad.mcp.hub import McpHub

__all__ = ["register_mcp_methods"]


def register_mcp_methods(router: Router, manager: SessionManager, hub: McpHub) -> None:
    """Add ``mcp/list`` to `router`."""

    @router.method("mcp/list", McpListParams)
    async def list_servers(params: McpListParams, ctx: CallContext) -> McpListResult:
        session_id = params.session_id if params.session_id is not UNSET else None
        if session_id is not None:
            await manager.session(session_id)
        return McpListResult(servers=await hub.listing(session_id))
