"""Running the chat: prompt_toolkit on asyncio, with trio as its guest for the connection.

prompt_toolkit runs on an asyncio loop; robotactl's connection (`robotactl.connection.connect`,
a trio `JsonRpcPeer`) runs on trio. `run_chat` starts asyncio, starts trio inside it in guest
mode (``trio.lowlevel.start_guest_run``: trio's tasks run as callbacks of the asyncio loop, on
the same thread), and shows the prompt once trio has connected and attached to the session.
The two sides then share one thread: trio code draws on the prompt directly, and the prompt
hands actions to trio with the trio token's ``run_sync_soon`` (safe from anywhere).

Leaving (Ctrl-D, ``/quit``, a second Ctrl-C) ends the prompt, then cancels trio, which closes
the connection; nothing is asked of the daemon on the way out, so a running turn goes on.
A failure before the prompt (no daemon, an unknown session) propagates from `run_chat`, and so
does one on the trio side later (never hidden behind trio's having finished first). The trio
side watches the connection: when robotad closes it (stopped, restarted, killed), the chat
says so at once (`ChatController.connection_lost`) and `run_chat` raises `ConnectionShown`
(a `ConnectionLost` the screen already told: the command exits 1 without saying it again).
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import outcome
import trio

from protocol.jsonrpc import ConnectionLost
from robotactl.chat.controller import ChatController, StartOptions
from robotactl.chat.follower import EventFollower
from robotactl.chat.history import DaemonHistory
from robotactl.chat.prompt import ChatPrompt
from robotactl.chat.render import Renderer
from robotactl.chat.state import ChatState

if TYPE_CHECKING:
    from protocol.unix_connect import ConnectWatcher

__all__ = ["ConnectionShown", "cancel_trio", "run_chat"]


class ConnectionShown(ConnectionLost):
    """robotad closed the connection under the chat, and the chat has said so on the screen
    (with what was not sent and what a running turn's outcome is)."""


def run_chat(
    socket_path: Path,
    *,
    autostart: bool,
    color: bool,
    start: StartOptions,
    connect_watch: ConnectWatcher | None = None,
) -> None:
    """Run the chat on the daemon at `socket_path` until the person leaves; `connect_watch`
    watches the connect (`robotactl.connection.connect`)."""
    asyncio.run(_host(socket_path, autostart, color, start, connect_watch))


async def _host(
    socket_path: Path,
    autostart: bool,
    color: bool,
    start: StartOptions,
    connect_watch: ConnectWatcher | None,
) -> None:
    loop = asyncio.get_running_loop()
    state = ChatState()
    history = DaemonHistory()
    prompt = ChatPrompt(state, history, color=color)
    renderer = Renderer(color=color, width=prompt.width)
    follower = EventFollower(state, prompt, renderer)
    controller = ChatController(state, prompt, renderer, follower, history)
    #: The trio token and the scope to cancel once attached; None when trio ended first.
    attached: asyncio.Future[tuple[trio.lowlevel.TrioToken, trio.CancelScope] | None] = (
        loop.create_future()
    )
    finished: asyncio.Future[outcome.Outcome[None]] = loop.create_future()

    async def trio_side() -> None:
        from robotactl.connection import connect

        async with (
            connect(
                socket_path,
                autostart=autostart,
                on_notification=follower.on_notification,
                watch=connect_watch,
            ) as peer,
            trio.open_nursery() as nursery,
        ):
            await nursery.start(follower.run)
            await controller.start(peer, nursery, start)
            attached.set_result((trio.lowlevel.current_trio_token(), nursery.cancel_scope))
            await peer.wait_finished()
            controller.connection_lost()
            raise ConnectionShown("connection closed")

    def done(result: outcome.Outcome[None]) -> None:
        if not finished.done():
            finished.set_result(result)
        if not attached.done():
            attached.set_result(None)
        prompt.leave()

    trio.lowlevel.start_guest_run(
        trio_side,
        run_sync_soon_threadsafe=loop.call_soon_threadsafe,
        done_callback=done,
        host_uses_signal_set_wakeup_fd=True,
    )
    ready = await attached
    if ready is not None:
        token, scope = ready
        prompt.bind(controller, lambda function, *args: token.run_sync_soon(function, *args))
        try:
            await prompt.run()
        finally:
            cancel_trio(token, scope)
    _unwrap(await finished)


def cancel_trio(token: trio.lowlevel.TrioToken, scope: trio.CancelScope) -> None:
    """Have trio cancel `scope` soon, unless trio has already finished: then what it ended
    with (`run_chat` re-raises it) is the news, not that it cannot be cancelled any more."""
    with contextlib.suppress(trio.RunFinishedError):
        token.run_sync_soon(scope.cancel)


def _unwrap(result: outcome.Outcome[Any]) -> None:
    """Re-raise what trio ended with (the one exception of a nursery's group)."""
    try:
        result.unwrap()
    except BaseExceptionGroup as group:
        current: BaseException = group
        while isinstance(current, BaseExceptionGroup) and len(current.exceptions) == 1:
            current = current.exceptions[0]
        raise current from None
