"""What the person's input does: attach to a session, send prompts, answer approvals, abort.

`ChatController` lives on the trio side with the connection. The prompt hands it each typed
line (`submit`), each approval key (`answer`) and each Ctrl-C (`interrupt`); every action runs
as its own task in the chat's nursery, so a slow request never freezes the prompt. A failed
request is printed (``error CODE: message`` and robotactl's hint) and the chat goes on. A
lost connection (`connection_lost`, noticed by the host as soon as it happens, or by a request
that fails with it) ends the chat at once, saying so, showing the input not sent, and saying
that a running turn's outcome is unknown; the command then exits non-zero. A prompt whose
``session/run`` was out when the connection went counts as a running turn: robotad may have
taken it, so it is never said to be "not sent". A line that is not UTF-8 text (a terminal
sending other bytes) is refused and put back, its bad bytes shown as U+FFFD: robotad takes
UTF-8 only.

Prompts are sent with ``session/run {wait: false, turnId}`` under a turn id chosen here, so
the events of this client's own turns are told from another client's; the reply arrives as
events (`robotactl.chat.follower`). An approval is answered with ``session/resume``; ``a``
first adds the exact-call allow rule (`robotactl.chat.approval`). Slash commands are carried
out by `robotactl.chat.actions`.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import trio

from protocol.errors import RpcError, StaleResponse
from protocol.jsonrpc import ConnectionLost
from protocol.methods import HistoryResult, PermissionRules, RunResult, SessionList
from protocol.shapes import SessionInfo
from robotactl.chat.approval import Answer, exact_call_rule, response
from robotactl.chat.follower import EventFollower
from robotactl.chat.history import DaemonHistory, load_prompt_history
from robotactl.chat.render import Renderer, describe_call
from robotactl.chat.screen import Screen
from robotactl.chat.slash import UnknownCommand, parse_slash, prompt_text
from robotactl.chat.state import ChatState, ToolCallRecord
from robotactl.formatting import shorten
from robotactl.sessions import pick_session, resolve_session_streaming

if TYPE_CHECKING:
    from protocol.peer import JsonRpcPeer

__all__ = ["ChatController", "StartOptions"]

#: Messages of the history read back when attaching (the last turn is shown from them).
ATTACH_TAIL = 40
#: A lone surrogate: how a byte that is not UTF-8 reaches a decoded line (``surrogateescape``).
_NOT_UTF8 = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class StartOptions:
    """Which session the chat starts on: `session_id`, else a new one with `new`, else the
    most recently updated session of `cwd` (a new one when there is none)."""

    cwd: str
    session_id: str | None = None
    new: bool = False


class ChatController:
    """The trio side of the chat (see the module docstring)."""

    def __init__(
        self,
        state: ChatState,
        screen: Screen,
        renderer: Renderer,
        follower: EventFollower,
        history: DaemonHistory,
    ) -> None:
        self.state = state
        self.screen = screen
        self.renderer = renderer
        self.follower = follower
        self.history = history
        self._peer: JsonRpcPeer | None = None
        self._nursery: trio.Nursery | None = None
        #: Arguments of the tool calls of the history messages rendered so far, by call id.
        self._call_arguments: dict[str, dict[str, Any]] = {}
        #: Whether the lost connection was already reported (by the host or a request).
        self.connection_gone = False

    @property
    def peer(self) -> JsonRpcPeer:
        assert self._peer is not None, "the controller is not started"
        return self._peer

    async def start(self, peer: JsonRpcPeer, nursery: trio.Nursery, options: StartOptions) -> None:
        """Attach to the session `options` names (creating it when asked or when none)."""
        self._peer = peer
        self._nursery = nursery
        self.follower.peer = peer
        if options.session_id:
            named = await resolve_session_streaming(peer, options.session_id)
            info = await self.request("session/open", {"sessionId": named})
        else:
            chosen = None if options.new else await self._default_session(options.cwd)
            if chosen is None:
                info = await self.request("session/create", {"cwd": options.cwd})
            else:
                info = await self.request("session/open", {"sessionId": chosen})
        await self.attach(info, show_tail=not options.new)

    async def request(self, method: str, params: dict[str, Any]) -> SessionInfo:
        """A request answered with a `SessionInfo`."""
        return await self.peer.request(method, params, result_type=SessionInfo)

    async def _default_session(self, cwd: str) -> str | None:
        listing = await self.peer.request("session/list", {}, result_type=SessionList)
        return pick_session(listing.sessions, cwd)

    async def attach(self, info: SessionInfo, *, show_tail: bool = True) -> None:
        """Switch to `info`'s session: follow its events, show its last turn, load history."""
        previous = self.state.session_id or None
        await self.follower.follow(info.session_id, previous)
        self.state.attach(info)
        self.renderer.cwd = info.cwd
        if info.running:
            self.state.turn_started(f"running:{info.session_id}")
        self.screen.print(self.renderer.notice(f"session {info.session_id} in {info.cwd}"))
        if show_tail and info.message_count:
            await self._show_last_turn(info.session_id)
        if info.running:
            self.screen.print(self.renderer.notice("a turn is running; its reply follows"))
        for request in self.state.pending:
            self.screen.print(
                self.renderer.approval(request.tool, request.arguments, request.reason)
            )
        self.history.replace(await load_prompt_history(self.peer, info.cwd))
        self.screen.refresh()

    async def _show_last_turn(self, session_id: str) -> None:
        """Print the session's last turn as the history has it (what happened meanwhile)."""
        total = (
            await self.peer.request(
                "session/history", {"sessionId": session_id, "limit": 0}, result_type=HistoryResult
            )
        ).total
        page = await self.peer.request(
            "session/history",
            {"sessionId": session_id, "offset": max(0, total - ATTACH_TAIL)},
            result_type=HistoryResult,
        )
        messages = page.messages
        # A compaction's summary is a user message too, but nobody typed it.
        prompts = [i for i, message in enumerate(messages) if _is_prompt(message)]
        for message in messages[prompts[-1] if prompts else 0 :]:
            for text in self.render_message(message):
                self.screen.print(text)

    def render_message(self, message: Any) -> list[str]:
        """A history message as the chat shows it (prompt, reply, tool lines, a compaction's
        summary as a notice). A tool result shows its call's arguments when the assistant
        message that made the call was rendered before it."""
        if message.role == "user" and not _is_prompt(message):
            head = "⋯ compacted history, summarised: "
            width = max(20, self.screen.width() - len(head) - 1)  # one line, never wrapped
            return [self.renderer.notice(head + shorten(message.content or "", width))]
        if message.role == "user":
            return [self.renderer.prompt_echo(message.content or "")]
        if message.role == "assistant":
            shown = [self.renderer.markdown(message.content)] if message.content else []
            for call in message.calls:
                self._call_arguments[call.id] = call.arguments
                shown.append(
                    self.renderer.notice(f"→ {describe_call(call.name, call.arguments, 60)}")
                )
            return shown
        if message.role == "tool":
            metadata = message.metadata if isinstance(message.metadata, dict) else {}
            call_id = message.tool_call_id or ""
            arguments = self._call_arguments.get(call_id, {})
            call = ToolCallRecord(call_id, message.name or "tool", arguments)
            call.ok = metadata.get("ok", True) is not False
            call.preview = message.content or ""
            return [self.renderer.tool_line(call)]
        return []

    # -- what the prompt hands over (called on the trio side) ------------------------------

    def spawn(self, action: Callable[[], Awaitable[None]]) -> None:
        """Run `action` as its own task; print its request failures, end on a lost link."""
        assert self._nursery is not None

        async def guarded() -> None:
            try:
                await action()
            except RpcError as exc:
                self.show_error(exc)
            except ConnectionLost:
                self.connection_lost()
            self.screen.refresh()

        self._nursery.start_soon(guarded)

    def show_error(self, exc: RpcError) -> None:
        from robotactl.hints import hint_for

        text = f"error {exc.code}: {exc.message}"
        hint = hint_for(exc.code, exc.data)
        self.screen.print(self.renderer.error(text + (f"\nhint: {hint}" if hint else "")))

    def connection_lost(self) -> None:
        """robotad closed the connection: say so once, with what it means, and leave.

        The input not sent is printed (the prompt would otherwise vanish with the chat), and a
        turn that was running is said to have an unknown outcome: robotad may have stopped
        with it. The host turns the lost connection into a non-zero exit.
        """
        if self.connection_gone:
            return
        self.connection_gone = True
        lines = ["robotad closed the connection"]
        if self.state.running:
            lines.append(
                "the running turn's outcome is unknown; once robotad is back, "
                f"`robotactl chat -s {self.state.session_id}` shows it"
            )
        unsent = self.screen.input_text()
        if unsent.strip():
            lines.append(f"not sent: {unsent}")
        self.screen.print(self.renderer.error("\n".join(lines)))
        self.screen.leave()

    def submit(self, line: str) -> None:
        """A line the person sent: a pick from ``/sessions``, a slash command (kept in the
        scrollback as ``› /command``, as a prompt is) or a prompt.
        A line holding bytes that are not UTF-8 is refused and put back (see the module).
        After ``/sessions`` a number or a listed id switches; any other line ends the
        picking and goes on as typed (a prompt is sent, never taken for a session id)."""
        from robotactl.chat.actions import SlashActions

        self.state.leave_armed = False
        if _NOT_UTF8.search(line):
            self.screen.print(
                self.renderer.error(
                    "not sent: the line holds bytes that are not UTF-8 text (shown as \ufffd); "
                    "robotad takes UTF-8 only. Edit it and send again."
                )
            )
            self.screen.put_back(_NOT_UTF8.sub("\ufffd", line))
            return
        if self.state.picking is not None:
            choices, self.state.picking = self.state.picking, None
            choice = line.strip()
            if not choice or choice.isdigit() or choice in choices:
                if choice:
                    self.spawn(lambda: SlashActions(self).switch_to(choice, choices))
                return
        try:
            command = parse_slash(line)
        except UnknownCommand as exc:
            self.screen.print(self.renderer.prompt_echo(line.strip()))
            self.screen.print(self.renderer.error(str(exc)))
            return
        if command is not None:
            # Kept in the scrollback like a prompt: what a command printed says what asked.
            self.screen.print(self.renderer.prompt_echo(line.strip()))
            self.spawn(lambda: SlashActions(self).run(command))
        elif line.strip():
            self.spawn(lambda: self.send_prompt(prompt_text(line)))

    async def send_prompt(self, prompt: str) -> None:
        """Send `prompt` as a new turn, unless one runs or a request waits (then it is kept in
        the input). Refused by robotad, it is put back; the connection lost before the answer,
        the turn stays running here (see the module docstring)."""
        state = self.state
        refusal = None
        if state.pending:
            refusal = "answer the waiting approval first (y/a/n); your prompt is kept"
        elif state.running:
            refusal = "a turn is running (Ctrl-C or /abort stops it); your prompt is kept"
        if refusal is not None:
            self.screen.print(self.renderer.error(refusal))
            self.screen.put_back(prompt)
            return
        turn_id = uuid.uuid4().hex
        state.own_turns.add(turn_id)
        self.screen.print(self.renderer.prompt_echo(prompt))
        state.turn_started(turn_id)
        params = {"sessionId": state.session_id, "prompt": prompt, "turnId": turn_id}
        try:
            await self.peer.request("session/run", {**params, "wait": False}, result_type=RunResult)
        except RpcError:
            if state.turn_id == turn_id:
                state.turn_ended()
            self.screen.put_back(prompt)
            raise

    def answer(self, answer: Answer) -> None:
        """The person answered the first waiting request with y, a or n."""
        if not self.state.pending:
            return
        request = self.state.pending[0]
        self.state.drop_request(request.request_id)
        verdict = {"once": "approved", "always": "approved always", "deny": "denied"}[answer]
        what = describe_call(request.tool, request.arguments, max(20, self.screen.width() - 20))
        self.screen.print(self.renderer.notice(f"{verdict}: {what}"))

        async def resume() -> None:
            session_id = self.state.session_id
            if answer == "always":
                await self._allow_exactly(request.tool, request.arguments)
            params = {
                "sessionId": session_id,
                "executionId": request.execution_id,
                "responses": [response(request.request_id, answer != "deny")],
            }
            try:
                await self.peer.request("session/resume", params, result_type=RunResult)
            except StaleResponse:
                self.screen.print(self.renderer.notice("that request was answered elsewhere"))

        self.spawn(resume)

    async def _allow_exactly(self, tool: str, arguments: dict[str, Any]) -> None:
        info = self.state.info
        rule = exact_call_rule(tool, arguments, info.cwd if info else "")
        if rule is None:
            self.screen.print(self.renderer.notice(f"{tool} has no exact rule: approved once"))
            return
        params = {"sessionId": self.state.session_id, "rule": rule}
        await self.peer.request(
            "session/addRule",
            {**params, "kind": "allow", "scope": "session"},
            result_type=PermissionRules,
        )
        self.screen.print(self.renderer.notice(f"allowed for this session: {rule}"))

    def interrupt(self) -> None:
        """Ctrl-C on an empty prompt: abort the running turn; the next Ctrl-C (before any
        other input) leaves. With nothing to abort, the first press says how to leave."""
        state = self.state
        if state.leave_armed:
            self.leave()
        elif state.running and not state.abort_asked:
            state.abort_asked = True
            state.leave_armed = True
            self.screen.print(self.renderer.notice("^C aborting the turn… (Ctrl-C again leaves)"))
            self.spawn(self.abort)
        else:
            state.leave_armed = True
            self.screen.print(self.renderer.notice("^C (again, or Ctrl-D, to leave)"))
        self.screen.refresh()

    async def abort(self) -> None:
        result = await self.peer.request("session/abort", {"sessionId": self.state.session_id})
        if not result.get("aborted"):
            self.state.abort_asked = False
            self.screen.print(self.renderer.notice("nothing was running to abort"))

    def leave(self) -> None:
        """End the chat; a running turn goes on in robotad, a waiting request waits (each
        said, with how to come back to it)."""
        state = self.state
        back = f"`robotactl chat -s {state.session_id}` comes back to it"
        if state.running:
            self.screen.print(self.renderer.notice(f"the turn goes on in robotad; {back}"))
        elif state.pending:
            count = len(state.pending)
            waiting = "an approval waits" if count == 1 else f"{count} approvals wait"
            self.screen.print(self.renderer.notice(f"{waiting} unanswered; {back}"))
        self.screen.leave()


def _is_prompt(message: Any) -> bool:
    """Whether a history message is a prompt someone sent (not a compaction's summary)."""
    metadata = message.metadata if isinstance(message.metadata, dict) else {}
    return bool(message.role == "user" and "compaction" not in metadata)
