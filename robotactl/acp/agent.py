"""The ACP agent: the editor's requests, answered by forwarding them to robotad.

`AcpAgent.router` serves the editor (PROTOCOL.md §10.6). Sessions are robotad's sessions, same
ids: ``session/new`` creates one (with `SessionDefaults`), ``session/load`` opens one and
replays its history before answering, ``session/resume`` re-attaches without replaying,
``session/close`` detaches only (the session stays in robotad), ``session/list`` lists
robotad's. A session robotad cannot open is robotad's error (-32002 and its message), never a
fresh session. Every robotad error reaches the editor as the same JSON-RPC error.

`on_robotad_notification` routes robotad's ``session/event``s to the session's `Attachment`.
The editor's MCP servers become a new session's own (`_create_session`, decision 70); at a
load or resume the session keeps those it was created with, and the log says so.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import msgspec
import trio

from protocol.errors import InvalidParams, SessionBusy, SessionNotFound
from protocol.events import EVENT_METHOD, SessionEvent
from protocol.methods import HistoryResult, SessionList
from protocol.peer import CallContext, JsonRpcPeer, Router
from protocol.shapes import SessionInfo
from robotactl import __version__
from robotactl.acp.attachment import Attachment
from robotactl.acp.defaults import SessionDefaults
from robotactl.acp.mcp_servers import (
    in_editor_terms,
    kept_indexes,
    mcp_servers,
    named_servers,
    refused_servers,
)
from robotactl.acp.modes import mode_state
from robotactl.acp.prompt import PromptDriver
from robotactl.acp.prompt_text import prompt_text
from robotactl.acp.schema import (
    ACP_PROTOCOL_VERSION,
    AgentCapabilities,
    CancelParams,
    CurrentModeUpdate,
    Implementation,
    InitializeParams,
    InitializeResult,
    ListedSession,
    ListSessionsParams,
    ListSessionsResult,
    LoadSessionParams,
    LoadSessionResult,
    McpCapabilities,
    McpServerEntry,
    NewSessionParams,
    NewSessionResult,
    PromptCapabilities,
    PromptParams,
    PromptResult,
    SessionCapabilities,
    SessionNotification,
    SessionRefParams,
    SessionUpdate,
    SetModeParams,
)

__all__ = ["LIST_PAGE", "AcpAgent"]

logger = logging.getLogger("robotactl.acp")

#: Sessions per ``session/list`` page.
LIST_PAGE = 200

#: The most ``session/create``s one ``session/new`` sends (each rename of servers whose
#: names robotad's own servers hold, then one without the servers it refused otherwise).
_CREATE_ATTEMPTS = 8

_event_decoder = msgspec.json.Decoder(SessionEvent)


class AcpAgent:
    """Serves one editor over `editor` (bound later) with robotad at `robotad`; forwarders
    run in `nursery`."""

    def __init__(self, defaults: SessionDefaults) -> None:
        self.defaults = defaults
        self.router = Router()
        self._attachments: dict[str, Attachment] = {}
        self._prompts: dict[str, PromptDriver] = {}
        #: The arrival (`CallContext.arrival`) of each session's latest cancel that found no
        #: prompt of an earlier arrival running (see `cancel`).
        self._cancelled_through: dict[str, int] = {}
        self._editor: JsonRpcPeer | None = None
        self._robotad: JsonRpcPeer | None = None
        self._nursery: trio.Nursery | None = None
        self._register()

    def bind(self, editor: JsonRpcPeer, robotad: JsonRpcPeer, nursery: trio.Nursery) -> None:
        self._editor, self._robotad, self._nursery = editor, robotad, nursery

    @property
    def robotad(self) -> JsonRpcPeer:
        assert self._robotad is not None, "bind() first"
        return self._robotad

    @property
    def editor(self) -> JsonRpcPeer:
        assert self._editor is not None, "bind() first"
        return self._editor

    def on_robotad_notification(self, method: str, params: msgspec.Raw) -> None:
        """robotad's notifications: each session event goes to its attachment."""
        if method != EVENT_METHOD:
            return
        try:
            event = _event_decoder.decode(params)
        except msgspec.DecodeError as exc:
            logger.debug("ignoring an event this robotactl cannot read: %s", exc)
            return
        attachment = self._attachments.get(event.session_id)
        if attachment is not None:
            attachment.deliver(event)

    # -- methods ----------------------------------------------------------------------------

    def _register(self) -> None:
        add = self.router.add
        add("initialize", InitializeParams, self.initialize, inline=True)
        add("authenticate", dict[str, Any], self.authenticate, inline=True)
        add("session/new", NewSessionParams, self.new_session)
        add("session/load", LoadSessionParams, self.load_session)
        add("session/resume", LoadSessionParams, self.resume_session)
        add("session/close", SessionRefParams, self.close_session)
        add("session/list", ListSessionsParams, self.list_sessions)
        add("session/set_mode", SetModeParams, self.set_mode)
        add("session/prompt", PromptParams, self.prompt)
        add("session/cancel", CancelParams, self.cancel)

    async def initialize(self, params: InitializeParams, ctx: CallContext) -> InitializeResult:
        capabilities = AgentCapabilities(
            PromptCapabilities(image=False, audio=False, embedded_context=True),
            McpCapabilities(http=True, sse=False),
            SessionCapabilities(list={}, resume={}, close={}),
            load_session=True,
        )
        info = Implementation("robotactl", __version__, title="robota")
        return InitializeResult(ACP_PROTOCOL_VERSION, capabilities, info, [])

    async def authenticate(self, params: dict[str, Any], ctx: CallContext) -> dict[str, Any]:
        return {}  # robotad needs no login: its socket is the user's own

    async def new_session(self, params: NewSessionParams, ctx: CallContext) -> NewSessionResult:
        info = await self._create_session(params.cwd, params.mcp_servers or ())
        attachment = await self._attach(info)
        await self._start(attachment)
        return NewSessionResult(info.session_id, mode_state(info.permission_mode))

    async def _create_session(self, cwd: str, entries: Sequence[McpServerEntry]) -> SessionInfo:
        """robotad's new session with the editor's MCP servers (decision 70). robotad's own
        servers are not listed first (``mcp/list`` starts them all and waits for each): a
        name robotad refuses at ``.name`` (one of its configured servers has it) is renamed,
        ``-2``, ``-3``…, and asked again; then a server robotad refuses for anything else is
        left out, the log saying why, and the session starts without it."""
        servers, left_out = mcp_servers(entries)
        for reason in left_out:
            logger.warning("MCP server from the editor is not used: %s", reason)
        kept = kept_indexes(entries)
        reserved: set[str] = set()
        dropped = False
        for _ in range(_CREATE_ATTEMPTS):
            try:
                return await self._create(cwd, servers)
            except InvalidParams as exc:
                issues = exc.issues
            refused = refused_servers(issues)
            clashes = {servers[i]["name"] for i in named_servers(issues) if i < len(servers)}
            if refused is None or dropped or (clashes and clashes <= reserved):
                break  # about the session itself, or not settled by what was done already
            if clashes:
                reserved |= clashes
                servers, _ = mcp_servers(entries, reserved)
                continue
            for index, said in refused.items():  # the session starts without them
                name = entries[kept[index]].name if index < len(kept) else str(index)
                logger.warning("MCP server from the editor is not used: %s (%s)", name, said)
            servers = [server for i, server in enumerate(servers) if i not in refused]
            dropped = True
        raise InvalidParams(in_editor_terms(issues, kept))

    async def _create(self, cwd: str, servers: list[dict[str, Any]]) -> SessionInfo:
        create: dict[str, Any] = {"cwd": cwd, **self.defaults.create_params()}
        if servers:
            create["mcpServers"] = servers
        return await self.robotad.request("session/create", create, result_type=SessionInfo)

    async def load_session(self, params: LoadSessionParams, ctx: CallContext) -> LoadSessionResult:
        _note_mcp_servers(params.mcp_servers)
        info = await self._open(params.session_id)
        attachment = self._attachments.get(info.session_id) or await self._attach(info)
        history = await self.robotad.request(
            "session/history", {"sessionId": info.session_id}, result_type=HistoryResult
        )
        await attachment.show(attachment.translator.replay(history.messages))
        await self._start(attachment)
        return LoadSessionResult(mode_state(info.permission_mode))

    async def resume_session(
        self, params: LoadSessionParams, ctx: CallContext
    ) -> LoadSessionResult:
        _note_mcp_servers(params.mcp_servers)
        info = await self._open(params.session_id)
        attachment = self._attachments.get(info.session_id) or await self._attach(info)
        await self._start(attachment)
        return LoadSessionResult(mode_state(info.permission_mode))

    async def close_session(self, params: SessionRefParams, ctx: CallContext) -> dict[str, Any]:
        """Detach from the session (it stays in robotad); not while this editor prompts it."""
        if (running := self._prompts.get(params.session_id)) is not None:
            raise _busy(params.session_id, running)
        attachment = self._attachments.pop(params.session_id, None)
        if attachment is None:
            raise _not_attached(params.session_id)
        attachment.detach()
        await self.robotad.request("session/unsubscribe", {"sessionId": params.session_id})
        return {}

    async def list_sessions(
        self, params: ListSessionsParams, ctx: CallContext
    ) -> ListSessionsResult:
        listing = await self.robotad.request("session/list", {}, result_type=SessionList)
        entries = [
            ListedSession(
                s.session_id,
                s.cwd,
                **({"title": s.title} if isinstance(s.title, str) else {}),
                **({"updated_at": s.updated_at} if s.updated_at else {}),
            )
            for s in listing.sessions
            if s.cwd is not None and (params.cwd is None or s.cwd == params.cwd)
        ]
        start = _cursor_offset(params.cursor)
        page = entries[start : start + LIST_PAGE]
        if start + LIST_PAGE < len(entries):
            return ListSessionsResult(page, next_cursor=str(start + LIST_PAGE))
        return ListSessionsResult(page)

    async def set_mode(self, params: SetModeParams, ctx: CallContext) -> dict[str, Any]:
        attachment = self._attached(params.session_id)
        change = {"sessionId": params.session_id, "mode": params.mode_id}
        try:
            result = await self.robotad.request("session/setPermissionMode", change)
        except InvalidParams as exc:  # located in robotad's params: say it in the editor's
            issues = [{**i, "path": i["path"].replace("$.mode", "$.modeId", 1)} for i in exc.issues]
            raise InvalidParams(issues) from None
        attachment.mode = str(result.get("mode", params.mode_id))
        await self._send_update(params.session_id, CurrentModeUpdate(attachment.mode))
        return {}

    async def prompt(self, params: PromptParams, ctx: CallContext) -> PromptResult:
        # Refused here, located, when robotad would close the connection over its size.
        text = prompt_text(params.prompt)
        attachment = self._attached(params.session_id)
        if (running := self._prompts.get(params.session_id)) is not None:
            raise _busy(params.session_id, running)
        driver = PromptDriver(attachment, self.robotad, self.editor, arrival=ctx.arrival)
        self._prompts[params.session_id] = driver
        if self._cancelled_through.pop(params.session_id, 0) > ctx.arrival:
            await driver.cancel()  # its cancel was sent after it and handled before it
        try:
            stop = await driver.run(text)
        finally:
            del self._prompts[params.session_id]
        await self._tell_mode(attachment)
        return PromptResult(stop)

    async def cancel(self, params: CancelParams, ctx: CallContext) -> None:
        """Cancel the session's prompt: the one the editor sent before this cancel. Requests
        run as tasks in no set order, so that prompt's handler may not have started yet; the
        cancel is then left for it (`_cancelled_through`, by arrival), and a prompt the editor
        sent after the cancel is never cancelled by it, whenever either runs."""
        driver = self._prompts.get(params.session_id)
        if driver is not None and driver.arrival < ctx.arrival:
            await driver.cancel()
            return
        latest = self._cancelled_through.get(params.session_id, 0)
        self._cancelled_through[params.session_id] = max(latest, ctx.arrival)

    # -- helpers ----------------------------------------------------------------------------

    async def _open(self, session_id: str) -> SessionInfo:
        return await self.robotad.request(
            "session/open", {"sessionId": session_id}, result_type=SessionInfo
        )

    async def _attach(self, info: SessionInfo) -> Attachment:
        attachment = Attachment(
            info.session_id, info.cwd, info.permission_mode, self.robotad, self._send_update
        )
        self._attachments[info.session_id] = attachment
        await attachment.subscribe()
        return attachment

    async def _start(self, attachment: Attachment) -> None:
        """Start the attachment's forwarder unless it runs already."""
        assert self._nursery is not None
        if not attachment.forwarding:
            await self._nursery.start(attachment.run)

    def _attached(self, session_id: str) -> Attachment:
        attachment = self._attachments.get(session_id)
        if attachment is None:
            raise _not_attached(session_id)
        return attachment

    async def _send_update(self, session_id: str, update: SessionUpdate) -> None:
        await self.editor.notify("session/update", SessionNotification(session_id, update))

    async def _tell_mode(self, attachment: Attachment) -> None:
        """Tell the editor of a mode changed elsewhere (a terminal's ``robotactl mode``)."""
        info = await self.robotad.request(
            "session/get", {"sessionId": attachment.session_id}, result_type=SessionInfo
        )
        if info.permission_mode != attachment.mode:
            attachment.mode = info.permission_mode
            await self._send_update(attachment.session_id, CurrentModeUpdate(attachment.mode))


def _not_attached(session_id: str) -> SessionNotFound:
    error = SessionNotFound(session_id)
    error.message = (
        f"session {session_id} is not open in this editor (session/new, load or resume it first)"
    )
    return error


def _busy(session_id: str, running: PromptDriver) -> SessionBusy:
    """The session runs a prompt of this editor: said so, even before its turn has started
    (robotad's "work that belongs to no turn" would read as someone else's)."""
    error = SessionBusy(session_id, running.turn_id)
    error.message = (
        f"session {session_id} is busy with a prompt this editor sent: wait for it to end, "
        "or cancel it"
    )
    return error


def _cursor_offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not cursor.isdigit():
        raise InvalidParams([{"path": "$.cursor", "message": "not a cursor this agent gave"}])
    return int(cursor)


def _note_mcp_servers(servers: Sequence[McpServerEntry] | None) -> None:
    """Log the editor's MCP servers on a load or resume: a session keeps the servers it was
    created with (robotad stores them with it), so servers named now are not added."""
    for server in servers or ():
        logger.info(
            "MCP server %r from the editor is not added: a session keeps the servers it was "
            "created with",
            server.name,
        )
