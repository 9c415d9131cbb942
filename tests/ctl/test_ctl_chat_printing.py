"""The chat's prompt printing above itself, on a real pseudo-terminal in this process.

`ChatPrompt` runs with its input and output on a pty's terminal side; the test holds the other
side, as a terminal emulator would, and keeps what the chat wrote (`PtyChat.shown`). What the
chat writes passes through `_Terminal`, which notes the terminal's local modes each time a
printed line goes out and can press a key right then, as a person could while a reply is
printed. Every wait is bounded by `PROCESS_TIMEOUT`.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import struct
import sys
import termios
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from prompt_toolkit.application import create_app_session
from prompt_toolkit.input.vt100 import Vt100Input
from prompt_toolkit.output.vt100 import Vt100_Output

from protocol.events import ApprovalRequested
from protocol.shapes import ApprovalRequest
from robotactl.chat.follower import EventFollower
from robotactl.chat.history import DaemonHistory
from robotactl.chat.prompt import ChatPrompt
from robotactl.chat.render import Renderer
from robotactl.chat.state import ChatState

from .conftest import PROCESS_TIMEOUT

#: The local modes under which the terminal driver, not the chat, acts on a key.
COOKED = termios.ICANON | termios.ECHO | termios.ISIG


class _Terminal:
    """The chat's stdout: the pty's terminal side. Each write holding `watch` notes the
    terminal's local modes then, and first sends `press` (when set) from the emulator side."""

    encoding = "utf-8"

    def __init__(self, terminal: int, emulator: int, watch: str) -> None:
        self.terminal = terminal
        self.emulator = emulator
        self.watch = watch
        self.press = b""
        #: The terminal's local modes at each write of `watch`.
        self.modes: list[int] = []

    def write(self, text: str) -> int:
        if self.watch in text:
            self.modes.append(termios.tcgetattr(self.terminal)[3])
            if self.press:
                os.write(self.emulator, self.press)
        os.write(self.terminal, text.encode())
        return len(text)

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        return self.terminal

    def isatty(self) -> bool:
        return True


class _Controller:
    """Stands for the chat's controller: the prompt only hands its methods to `dispatch`."""

    def submit(self, line: str) -> None: ...

    def interrupt(self) -> None: ...

    def leave(self) -> None: ...

    def answer(self, answer: str) -> None: ...


class PtyChat:
    """A running `ChatPrompt` on the pty, what it wrote, and the actions it handed over."""

    def __init__(self, prompt: ChatPrompt, output: _Terminal) -> None:
        self.prompt = prompt
        self.output = output
        self.shown = bytearray()
        self.handed: list[str] = []
        self.handed_any = asyncio.Event()

    def dispatch(self, function: Callable[..., None], *args: Any) -> None:
        self.handed.append(function.__name__)
        self.handed_any.set()

    async def until_shown(self, *texts: str) -> bytes:
        """What the chat wrote, once it holds every one of `texts`."""
        while not all(text.encode() in self.shown for text in texts):
            await asyncio.sleep(0.01)
        return bytes(self.shown)


@pytest.fixture
def pty() -> Iterator[tuple[int, int]]:
    """(emulator side, terminal side) of a new 80×24 pty, closed afterwards."""
    emulator, terminal = os.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    try:
        yield emulator, terminal
    finally:
        os.close(terminal)
        os.close(emulator)


@contextlib.asynccontextmanager
async def pty_chat(
    pty: tuple[int, int], monkeypatch: pytest.MonkeyPatch, watch: str
) -> AsyncIterator[PtyChat]:
    """The prompt running on `pty` (ended on the way out), its writes of `watch` noted."""
    emulator, terminal = pty
    output = _Terminal(terminal, emulator, watch)
    monkeypatch.setattr(sys, "stdout", output)  # where a print outside the prompt goes
    loop = asyncio.get_running_loop()
    with (
        open(terminal, encoding="utf-8", closefd=False) as stdin,
        create_app_session(
            input=Vt100Input(stdin),
            output=Vt100_Output.from_pty(output, term="xterm-256color"),  # type: ignore[arg-type]
        ),
    ):
        chat = PtyChat(ChatPrompt(ChatState(), DaemonHistory(), color=False), output)
        chat.prompt.bind(_Controller(), chat.dispatch)  # type: ignore[arg-type]
        loop.add_reader(emulator, lambda: chat.shown.extend(os.read(emulator, 65536)))
        running = asyncio.ensure_future(chat.prompt.run())
        try:
            while not chat.prompt.session.app.is_running:
                await asyncio.sleep(0.01)
            yield chat
        finally:
            chat.prompt.leave()
            await running
            loop.remove_reader(emulator)


def test_a_key_pressed_while_a_line_is_printed_is_the_chats(
    pty: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """prompt_toolkit's ``run_in_terminal`` printed in cooked mode: a Ctrl-C pressed then
    raised SIGINT (the chat ended with a traceback), a Ctrl-D was swallowed. The terminal now
    stays raw while a line is printed, and the key reaches the chat's own binding."""
    monkeypatch.setenv("PROMPT_TOOLKIT_NO_CPR", "1")  # nobody answers on the emulator side
    line = "a line of the reply\n"

    async def main() -> PtyChat:
        async with pty_chat(pty, monkeypatch, line) as chat:
            chat.output.press = b"\x03"  # Ctrl-C
            chat.prompt.print(line)
            # A Ctrl-C the terminal driver took never comes (the asserts below say so).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(chat.handed_any.wait(), PROCESS_TIMEOUT)
            return chat

    chat = asyncio.run(asyncio.wait_for(main(), 2 * PROCESS_TIMEOUT))
    assert chat.output.modes, "the line was never written"
    assert not [m for m in chat.output.modes if m & COOKED], "the line was written cooked"
    assert chat.handed == ["interrupt"]


def test_what_is_printed_for_an_event_comes_before_the_prompt_shows_a_later_state(
    pty: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An approval request is printed (its tool, reason and arguments) and asked about in the
    prompt area. ``run_in_terminal`` printed only once the terminal had answered the cursor-
    position request still out, so a slow terminal (here: one that never answers) showed the
    question first, the details later; a person could answer before seeing them."""
    request = ApprovalRequest("r1", "x1", "Bash", {"command": "ls -l"}, "asks before Bash")

    async def main() -> bytes:
        async with pty_chat(pty, monkeypatch, "approval needed") as chat:
            follower = EventFollower(
                chat.prompt.state, chat.prompt, Renderer(color=False, width=chat.prompt.width)
            )
            follower.apply(ApprovalRequested("s1", 1, "t1", "x1", [request]))
            chat.prompt.refresh()  # as the follower does after each event
            return await chat.until_shown("approval needed", "Allow Bash ls -l?")

    shown = asyncio.run(asyncio.wait_for(main(), PROCESS_TIMEOUT))
    assert shown.index(b"approval needed: Bash") < shown.index(b"Allow Bash ls -l?")
