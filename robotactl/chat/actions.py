"""Carrying out the slash commands (`robotactl.chat.slash` names and parses them).

Each command is one documented request (or two) and a few printed lines: ``/new`` and
``/model NAME`` create a session in this one's cwd (robotad has no way to change a session's
model, so ``/model NAME`` starts a new session on that model and says so), ``/fork`` forks
and ``/sessions`` switches (it lists this cwd's sessions first, then the others with their
cwd) — all three then attach to the new session — ``/compact``,
``/context``, ``/mode``, ``/allow``, ``/deny``, ``/abort``, ``/history``, ``/export`` and
``/last`` report what the daemon answered. ``/export FILE`` writes the artifact through a
temporary file renamed into place, so FILE is either whole or untouched.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from protocol.methods import (
    CompactResult,
    ExportResult,
    HistoryResult,
    PermissionRules,
    SessionList,
    SetPermissionModeResult,
)
from protocol.shapes import ContextState
from robotactl.chat.slash import SlashCommand, help_text
from robotactl.formatting import format_context, format_when, shorten
from robotactl.sessions import AmbiguousSession, match_session_id, same_directory

if TYPE_CHECKING:
    from protocol.peer import JsonRpcPeer
    from protocol.shapes import Message, SessionInfo
    from robotactl.chat.render import Renderer
    from robotactl.chat.screen import Screen
    from robotactl.chat.state import ChatState

__all__ = ["ChatPort", "SlashActions"]

#: Messages ``/history`` shows without N.
DEFAULT_HISTORY = 10


class ChatPort(Protocol):
    """What the slash commands need of the chat (the chat's `ChatController` is it): its
    state, screen and renderer, its connection, and five of its moves. This module never
    imports the controller, which imports it."""

    @property
    def state(self) -> ChatState: ...

    @property
    def screen(self) -> Screen: ...

    @property
    def renderer(self) -> Renderer: ...

    @property
    def peer(self) -> JsonRpcPeer:
        """The connection to robotad."""

    async def request(self, method: str, params: dict[str, Any]) -> SessionInfo:
        """Send `method` with `params`; its result is a `SessionInfo`."""

    async def attach(self, info: SessionInfo, *, show_tail: bool = True) -> None:
        """Switch the chat to `info`'s session (showing its last turn when `show_tail`)."""

    async def abort(self) -> None:
        """Abort the session's running turn."""

    def leave(self) -> None:
        """End the chat."""

    def render_message(self, message: Message) -> list[str]:
        """A history message as the chat shows it."""


class SlashActions:
    """The slash commands, run against `chat`'s session and screen."""

    def __init__(self, chat: ChatPort) -> None:
        self.chat = chat
        self.state = chat.state
        self.screen = chat.screen
        self.renderer = chat.renderer

    def say(self, text: str) -> None:
        self.screen.print(self.renderer.line(text))

    def note(self, text: str) -> None:
        self.screen.print(self.renderer.notice(text))

    async def run(self, command: SlashCommand) -> None:
        """Carry out `command` (its name is known: `parse_slash` checked it)."""
        handler = getattr(self, f"do_{command.name}")
        await handler(command.argument)

    def _session(self, **extra: Any) -> dict[str, Any]:
        return {"sessionId": self.state.session_id, **extra}

    async def do_help(self, _: str) -> None:
        self.say(help_text())

    async def do_quit(self, _: str) -> None:
        self.chat.leave()

    async def do_new(self, _: str, **extra: Any) -> None:
        info = self.state.info
        params: dict[str, Any] = {"cwd": info.cwd if info else os.getcwd(), **extra}
        if info is not None:
            params.setdefault("provider", info.provider)
        created = await self.chat.request("session/create", params)
        await self.chat.attach(created, show_tail=False)

    async def do_model(self, name: str) -> None:
        info = self.state.info
        if not name:
            self.say(f"model: {info.model if info else '?'} ({info.provider if info else '?'})")
            return
        self.note(f"robotad keeps a session's model; starting a new session on {name}")
        await self.do_new("", model=name)

    async def do_fork(self, message_id: str) -> None:
        params = self._session(**({"atMessageId": message_id} if message_id else {}))
        forked = await self.chat.request("session/fork", params)
        self.note(f"forked {self.state.session_id} → {forked.session_id}")
        await self.chat.attach(forked, show_tail=False)

    async def do_sessions(self, choice: str) -> None:
        listing = await self.chat.peer.request("session/list", {}, result_type=SessionList)
        cwd = self.state.info.cwd if self.state.info is not None else os.getcwd()
        # This cwd's sessions first (newest first, as robotad lists them), then the others.
        entries = sorted(
            listing.sessions,
            key=lambda entry: not (entry.cwd and same_directory(entry.cwd, cwd)),
        )
        ids = [entry.session_id for entry in entries]
        if choice:
            await self.switch_to(choice, ids)
            return
        for number, entry in enumerate(entries, start=1):
            here = "*" if entry.session_id == self.state.session_id else " "
            when = format_when(entry.updated_at, now=_now())
            title = entry.title if isinstance(entry.title, str) else ""
            detail = shorten(f"{when} {entry.message_count or 0} msgs {title}", 40)
            elsewhere = entry.cwd is None or not same_directory(entry.cwd, cwd)
            where = f"  in {entry.cwd or '?'}" if elsewhere else ""
            self.say(f"{here}{number:>3} {entry.session_id}  {detail}{where}")
        self.state.picking = ids
        self.note("switch to which? a number or an id (Enter stays)")

    async def switch_to(self, choice: str, ids: list[str]) -> None:
        """Attach to the session `choice` names: a number of the list `ids`, or an id or a
        unique prefix of one (`match_session_id`, as ``chat -s`` takes). A number past the
        list that begins no id is said to be one, not looked up as an id."""
        if choice.isdigit() and 1 <= int(choice) <= len(ids):
            session_id = ids[int(choice) - 1]
        else:
            try:
                session_id = match_session_id(choice, ids)
            except AmbiguousSession as exc:
                self.screen.print(self.renderer.error(str(exc)))
                return
            if session_id == choice and choice.isdigit() and choice not in ids:
                self.screen.print(
                    self.renderer.error(f"no session {choice}: /sessions lists {len(ids)}")
                )
                return
        if session_id == self.state.session_id:
            self.note(f"already in {session_id}")
            return
        info = await self.chat.request("session/open", {"sessionId": session_id})
        await self.chat.attach(info)

    async def do_compact(self, instructions: str) -> None:
        params = self._session(**({"instructions": instructions} if instructions else {}))
        self.note("compacting…")
        result = await self.chat.peer.request("session/compact", params, result_type=CompactResult)
        if not result.compacted:
            self.note("nothing to compact")
            return
        self.state.set_context(result.after)
        self.say(f"compacted: {_context(result.before)} → {_context(result.after)}")

    async def do_context(self, _: str) -> None:
        context = await self.chat.peer.request(
            "session/context", self._session(), result_type=ContextState
        )
        self.state.set_context(context)
        self.say(_context(context))

    async def do_mode(self, mode: str) -> None:
        result = await self.chat.peer.request(
            "session/setPermissionMode",
            self._session(mode=mode),
            result_type=SetPermissionModeResult,
        )
        if self.state.info is not None:
            self.state.info.permission_mode = result.mode
        self.note(f"permission mode: {result.mode}")

    async def do_allow(self, rule: str) -> None:
        await self._add_rule(rule, "allow")

    async def do_deny(self, rule: str) -> None:
        await self._add_rule(rule, "deny")

    async def _add_rule(self, rule: str, kind: str) -> None:
        rules = await self.chat.peer.request(
            "session/addRule",
            self._session(rule=rule, kind=kind, scope="session"),
            result_type=PermissionRules,
        )
        self.note(f"{kind} rules: {', '.join(getattr(rules, kind))}")

    async def do_abort(self, _: str) -> None:
        self.state.abort_asked = self.state.running
        await self.chat.abort()

    async def do_last(self, _: str) -> None:
        call = self.state.last_call
        if call is None:
            self.note("no tool call yet")
        else:
            self.screen.print(self.renderer.tool_detail(call))

    async def do_history(self, count: str) -> None:
        if count and not count.isdigit():
            self.screen.print(self.renderer.error("/history takes a number of messages"))
            return
        want = int(count) if count else DEFAULT_HISTORY
        peer = self.chat.peer
        total = (
            await peer.request("session/history", self._session(limit=0), result_type=HistoryResult)
        ).total
        page = await peer.request(
            "session/history", self._session(offset=max(0, total - want)), result_type=HistoryResult
        )
        for message in page.messages:
            self.note(f"[{message.id}] {message.role}")
            for text in self.chat.render_message(message):
                self.screen.print(text)

    async def do_export(self, file: str) -> None:
        result = await self.chat.peer.request(
            "session/export", self._session(), result_type=ExportResult
        )
        import msgspec

        text = json.dumps(msgspec.to_builtins(result.artifact), indent=2, ensure_ascii=False)
        try:
            target = _write_whole(file, text + "\n")
        except OSError as exc:
            self.screen.print(self.renderer.error(f"cannot write {file}: {exc.strerror or exc}"))
            return
        self.note(f"exported {self.state.session_id} to {target}")


def _context(context: ContextState) -> str:
    return format_context(context.used_tokens, context.max_tokens, context.used_percentage)


def _now() -> Any:
    from datetime import UTC, datetime

    return datetime.now(UTC)


def _write_whole(file: str, text: str) -> Path:
    """Write `text` to `file` (``~`` expanded) through a temporary file renamed into place;
    return the path written."""
    target = Path(file).expanduser()
    directory = target.parent if str(target.parent) else Path(".")
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target
