"""The prompt: one prompt_toolkit session for the whole chat, and the `Screen` it offers.

The prompt never takes over the screen: finished output is written into the scrollback above
it, and under the output it draws, from top to bottom, the live area (the reply streaming in,
wrapped to the terminal, its last lines; the tools running), the approval question when a
request waits, the input line(s) and the status line.

`ChatPrompt.print` writes at once, with the terminal left in raw mode: it erases the prompt
area, writes, and has the prompt drawn again under the text. So what is printed for an event
is on the screen before the prompt area shows anything of a later one (an approval's details
before its question), and a key pressed while a line is written reaches the chat.
prompt_toolkit's ``run_in_terminal`` did neither: it wrote later (once the terminal had answered
the cursor-position requests still out), and in cooked mode, where the terminal driver takes
a key itself (Ctrl-C raised SIGINT, which ended the chat with a traceback; Ctrl-D, Ctrl-U and
Ctrl-R were swallowed; any other key was echoed into the output).

Keys: Enter sends (a line ending in ``\\`` continues on a new line instead), Alt-Enter adds a
line, a bracketed paste keeps its newlines; Up/Down walk the prompt history and Ctrl-R searches
it (`robotactl.chat.history`); Tab completes (`robotactl.chat.completion`); with a request
waiting and the input empty, ``y``/``a``/``n`` answer it; Ctrl-C clears the input, or on an
empty input aborts the running turn (a second one, before any other key, leaves); Ctrl-D on an
empty input leaves. Any other key disarms that second Ctrl-C (`ChatState.leave_armed`).
Each action is handed to the trio side with `dispatch` (the controller does the work).

Colour: none with ``NO_COLOR``/``TERM=dumb`` — then every style attribute is dropped, so the
prompt writes no colour, bold or reverse at all.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from prompt_toolkit import PromptSession
from prompt_toolkit.application import get_app_or_none
from prompt_toolkit.filters import Condition, has_focus, is_searching
from prompt_toolkit.formatted_text import StyleAndTextTuples
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.layout import Dimension
from prompt_toolkit.styles import DEFAULT_ATTRS, Attrs, Style, StyleTransformation
from prompt_toolkit.utils import get_cwidth

from robotactl.chat.completion import ChatCompleter
from robotactl.chat.history import DaemonHistory
from robotactl.chat.input_view import ShownHidden
from robotactl.chat.render import describe_call
from robotactl.chat.state import ChatState
from robotactl.chat.status import status_line

if TYPE_CHECKING:
    from robotactl.chat.controller import ChatController

__all__ = ["ANSWER_KEYS", "ChatPrompt", "Dispatch", "answer_keys", "live_lines"]

#: Hands a call to the trio side: ``dispatch(function, *args)``.
Dispatch = Callable[..., None]

#: Most lines of streaming text shown in the live area.
LIVE_LINES: Final = 12


def live_lines(text: str, width: int, count: int) -> list[str]:
    """The last `count` lines of `text` wrapped at `width` columns. Only the end of the text
    is wrapped: the live area is redrawn on every delta, and wrapping a whole reply (it may
    run to megabytes) each time made the chat lag behind the stream. A longer line than
    `count` lines can show is cut first, at a space near its cut when there is one. A line
    is as wide as the terminal draws it: a CJK character or an emoji takes two columns
    (`_fit_cells`), so such a line is never wider than the live area, which cuts what does
    not fit."""
    body = text.rstrip("\n")
    limit = 2 * width * count
    lines: list[str] = []
    stop = len(body)
    while stop >= 0 and len(lines) < count:
        start = body.rfind("\n", 0, stop) + 1
        line = body[start:stop]
        if len(line) > limit:
            cut = len(line) - limit
            space = line.find(" ", cut, cut + width)
            line = line[space + 1 if space >= 0 else cut :]
        wrapped = textwrap.wrap(line, width) or [""]
        lines[:0] = [part for piece in wrapped for part in _fit_cells(piece, width)]
        stop = start - 1
    return lines[-count:]


def _fit_cells(line: str, width: int) -> list[str]:
    """`line` cut into pieces at most `width` terminal columns wide (`textwrap` counts
    characters, so a line of wide characters comes out up to twice too wide)."""
    if get_cwidth(line) <= width:
        return [line]
    pieces: list[str] = []
    piece, used = "", 0
    for character in line:
        cells = get_cwidth(character)
        if used + cells > width and piece:
            pieces.append(piece)
            piece, used = "", 0
        piece += character
        used += cells
    return [*pieces, piece]


#: The keys that answer an approval, as the question lists them.
ANSWER_KEYS: Final = ("y once", "a always", "n no")


def answer_keys(width: int) -> str:
    """``y once · a always · n no``, on as many lines of at most `width` columns as it takes
    (the live area cuts a longer line: a narrow terminal lost ``n no``)."""
    lines = [ANSWER_KEYS[0]]
    for key in ANSWER_KEYS[1:]:
        if len(lines[-1]) + len(" · ") + len(key) <= width:
            lines[-1] += f" · {key}"
        else:
            lines.append(key)
    return "\n".join(lines)


_STYLE: Final = Style.from_dict(
    {
        "live": "",
        "running": "ansibrightblack",
        "question": "bold ansiyellow",
        "prompt": "bold ansicyan",
        "bottom-toolbar": "reverse",
        "shown-hidden": "reverse",
    }
)


class _CompactPromptSession(PromptSession[str]):
    """A prompt whose input area is as tall as its text (and the completion menu, while one
    shows), so the status line sits right under it instead of at the bottom of the screen."""

    def _get_default_buffer_control_height(self) -> Dimension:
        base = super()._get_default_buffer_control_height()
        if self.default_buffer.complete_state is not None:
            return base
        lines = self.default_buffer.document.line_count
        return Dimension(min=lines, max=lines)


class _Plain(StyleTransformation):
    """Drops every attribute: no colour, bold, underline or reverse (NO_COLOR)."""

    def transform_attrs(self, attrs: Attrs) -> Attrs:
        return DEFAULT_ATTRS


class ChatPrompt:
    """The prompt_toolkit side of the chat; implements `robotactl.chat.screen.Screen`."""

    def __init__(
        self,
        state: ChatState,
        history: DaemonHistory,
        *,
        color: bool,
    ) -> None:
        self.state = state
        self.dispatch: Dispatch = lambda function, *args: None
        self._controller: ChatController | None = None
        self._leaving = False
        #: Whether the key being handled is a Ctrl-C handed to the controller.
        self._interrupting = False
        self.session: PromptSession[str] = _CompactPromptSession(
            message=self._message,
            multiline=True,
            history=history,
            completer=ChatCompleter(self._cwd),
            input_processors=[ShownHidden()],
            complete_while_typing=False,
            bottom_toolbar=self._toolbar,
            refresh_interval=0.5,
            key_bindings=self._bindings(),
            style=_STYLE,
            include_default_pygments_style=False,
            style_transformation=None if color else _Plain(),
            reserve_space_for_menu=4,
            erase_when_done=True,
        )
        self.session.app.key_processor.after_key_press += self._after_key

    def _after_key(self, _: object) -> None:
        """Any key but a Ctrl-C handed over disarms leaving (the docstring's "before any
        other key")."""
        if self._interrupting:
            self._interrupting = False
        else:
            self.state.leave_armed = False

    def bind(self, controller: ChatController, dispatch: Dispatch) -> None:
        """Send the person's actions to `controller` through `dispatch`."""
        self._controller = controller
        self.dispatch = dispatch

    @property
    def controller(self) -> ChatController:
        assert self._controller is not None, "the prompt is not bound"
        return self._controller

    async def run(self) -> None:
        """Show the prompt until `leave`."""
        if self._leaving:
            return
        await self.session.prompt_async()

    # -- Screen -----------------------------------------------------------------------------

    def print(self, text: str) -> None:
        """Write `text` above the prompt now, the terminal staying raw (see the module)."""
        app = get_app_or_none()
        if app is None or not app.is_running:
            sys.stdout.write(text)
            sys.stdout.flush()
            return
        app.renderer.erase()  # the prompt area, leaving the cursor where it began
        app.output.write_raw(text)
        app.output.flush()
        # What ``run_in_terminal`` does after its body, minus waiting for the answer: the
        # renderer needs the rows under the cursor again to draw the status line.
        if not app.is_done and not app.key_processor.input_queue:
            app.renderer.request_absolute_cursor_position()
        app.invalidate()

    def refresh(self) -> None:
        app = get_app_or_none()
        if app is not None and app.is_running:
            app.invalidate()

    def put_back(self, text: str) -> None:
        buffer = self.session.default_buffer
        if not buffer.text:
            buffer.text = text
            buffer.cursor_position = len(text)
        self.refresh()

    def input_text(self) -> str:
        return self.session.default_buffer.text

    def leave(self) -> None:
        self._leaving = True
        app = get_app_or_none()
        if app is not None and app.is_running and app.future is not None and not app.future.done():
            app.exit(result="")

    def width(self) -> int:
        return int(self.session.app.output.get_size().columns)

    # -- drawing ----------------------------------------------------------------------------

    def _cwd(self) -> str:
        return self.state.info.cwd if self.state.info is not None else "."

    def _message(self) -> StyleAndTextTuples:
        state = self.state
        width = max(10, self.width() - 1)
        parts: StyleAndTextTuples = []
        if state.live_text.strip():
            lines = live_lines(state.live_text, width, LIVE_LINES)
            parts.append(("class:live", "\n".join(lines) + "\n"))
        for call in state.calls.values():
            if call.ok is None:
                parts.append(
                    ("class:running", f"⋯ {describe_call(call.tool, call.arguments, width - 2)}\n")
                )
        if state.pending:
            request = state.pending[0]
            what = describe_call(request.tool, request.arguments, max(10, width - 10))
            parts.append(("class:question", f"Allow {what}?\n"))
            parts.append(("class:question", answer_keys(width) + "\n"))
        marker = "switch to › " if state.picking is not None else "› "
        parts.append(("class:prompt", marker))
        return parts

    def _toolbar(self) -> str:
        return status_line(self.state, max(10, self.width() - 1))

    # -- keys -------------------------------------------------------------------------------

    def _bindings(self) -> KeyBindings:
        bindings = KeyBindings()
        editing = has_focus(self.session_buffer_name()) & ~is_searching
        empty = Condition(lambda: not self.session.default_buffer.text)
        waiting = Condition(lambda: bool(self.state.pending))

        @bindings.add("enter", filter=editing, eager=True)
        def _send(event: KeyPressEvent) -> None:
            buffer = event.current_buffer
            text = buffer.text
            if text.endswith("\\") and buffer.cursor_position == len(text):
                buffer.delete_before_cursor(1)
                buffer.insert_text("\n")
                return
            buffer.reset(append_to_history=bool(text.strip()))
            self.dispatch(self.controller.submit, text)

        @bindings.add("escape", "enter", filter=editing)
        def _newline(event: KeyPressEvent) -> None:
            event.current_buffer.insert_text("\n")

        @bindings.add("c-c", eager=True)
        def _interrupt(event: KeyPressEvent) -> None:
            buffer = self.session.default_buffer
            if buffer.text:
                buffer.reset()
            else:
                self._interrupting = True
                self.dispatch(self.controller.interrupt)

        @bindings.add("c-d", filter=editing, eager=True)
        def _end(event: KeyPressEvent) -> None:
            buffer = event.current_buffer
            if buffer.text:
                buffer.delete(1)
            else:
                self.dispatch(self.controller.leave)

        for key, answer in (("y", "once"), ("a", "always"), ("n", "deny")):
            self._answer_key(bindings, key, answer, editing & empty & waiting)
        return bindings

    def _answer_key(self, bindings: KeyBindings, key: str, answer: str, when: Any) -> None:
        @bindings.add(key, filter=when, eager=True)
        def _answer(event: KeyPressEvent) -> None:
            self.dispatch(self.controller.answer, answer)

    @staticmethod
    def session_buffer_name() -> str:
        from prompt_toolkit.enums import DEFAULT_BUFFER

        return DEFAULT_BUFFER
