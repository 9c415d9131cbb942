"""``robotactl acp``'s main loop: the editor on stdio, robotad on its socket, until either
goes.

`serve` connects to robotad (starting it when allowed, like every robotactl command), then
serves the editor until its input ends and every request it sent is answered — or until it is
gone (a write fails). Either way nothing is aborted: turns and parked approvals live in
robotad. If robotad's connection drops, `serve` raises `RobotadGone` (exit 1, said on
stderr), since an agent without its daemon can answer nothing.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from protocol.peer import JsonRpcPeer
from robotactl.acp.agent import AcpAgent
from robotactl.acp.defaults import SessionDefaults
from robotactl.acp.stdio import editor_stream

if TYPE_CHECKING:
    from protocol.unix_connect import ConnectWatcher

__all__ = ["EDITOR_MAX_MESSAGE_BYTES", "RobotadGone", "serve"]

logger = logging.getLogger("robotactl.acp")


#: The longest line an editor may send (64 MiB). Above robotad's own 16 MiB on purpose: a
#: prompt a user attached too much to reaches `AcpAgent.prompt`, which refuses it with -32602
#: and keeps the connection, where a line over this cap ends it (after a -32600 naming it).
EDITOR_MAX_MESSAGE_BYTES = 64 * 2**20


class RobotadGone(Exception):
    """robotad closed the connection while the editor was still attached."""


async def serve(
    socket_path: Path,
    autostart: bool,
    defaults: SessionDefaults,
    connect_watch: ConnectWatcher | None = None,
) -> None:
    """Serve one editor on stdin/stdout, forwarding to robotad at `socket_path`; its connect
    watched by `connect_watch` (`robotactl.connection.connect`)."""
    from robotactl.connection import connect

    agent = AcpAgent(defaults)
    editor = JsonRpcPeer(
        editor_stream(),
        agent.router,
        framing="ndjson",
        cancel_notice=acp_cancel_notice,
        max_frame_bytes=EDITOR_MAX_MESSAGE_BYTES,
    )
    async with (
        connect(
            socket_path,
            autostart=autostart,
            on_notification=agent.on_robotad_notification,
            watch=connect_watch,
        ) as robotad,
        trio.open_nursery() as nursery,
    ):
        agent.bind(editor, robotad, nursery)
        lost = False

        async def watch_robotad() -> None:
            nonlocal lost
            await robotad.wait_finished()
            lost = True
            nursery.cancel_scope.cancel()

        nursery.start_soon(watch_robotad)
        logger.info("serving an editor on stdio; robotad at %s", socket_path)
        await editor.run()
        nursery.cancel_scope.cancel()
    if lost:
        raise RobotadGone(f"robotad at {socket_path} closed the connection")
    logger.info("the editor closed the connection")


def acp_cancel_notice(request_id: int) -> tuple[str, dict[str, Any]]:
    """ACP's notice that a request of ours is withdrawn (a permission question answered
    elsewhere): ``$/cancel_request {requestId}``, not LSP's ``$/cancelRequest {id}``, which an
    editor ignores, leaving the question on screen."""
    return "$/cancel_request", {"requestId": request_id}
