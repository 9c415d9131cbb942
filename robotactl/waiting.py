"""The line that says a turn is waiting for the model, on a terminal's stderr.

While nothing of a turn has shown for `QUIET_BEFORE` seconds (the model has not started its
reply, or is thinking between tool rounds), `WaitingLine` keeps one line on stderr updated:
``⠹ waiting for the model… 12s`` (or for the tool that runs). Anything the turn then shows
clears it first, so it never mixes with the reply. It exists only when stderr is a terminal
and ``--json`` is off (`for_terminal`); it is never drawn over a reply line still open on
stdout, and it uses no escape codes at all unless colour is allowed (with ``NO_COLOR`` or
``TERM=dumb``: plain ``\\r`` and spaces only). It is cut to fit the terminal's width, since
a line that wraps cannot be redrawn in place.

The same line shows robotactl's other waits on a terminal: a one-shot command's request that
robotad has not answered yet (`robotactl.unanswered`), and ``shutdown --wait`` waiting for
robotad to exit (`wait_readable`).
"""

from __future__ import annotations

import os
import sys
from typing import IO, Final

from robotactl.render import Output, color_enabled
from robotactl.terminal_text import visible

__all__ = ["QUIET_BEFORE", "TICK", "WaitingLine", "wait_readable"]

#: Seconds of silence before the line appears, and between its redraws.
QUIET_BEFORE: Final = 0.5
TICK: Final = 0.2
_FRAMES: Final = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


class WaitingLine:
    """One redrawable line on `stream` (a terminal)."""

    def __init__(self, stream: IO[str], *, styled: bool) -> None:
        self.stream = stream
        self.styled = styled
        self._width = 0
        self._frame = 0

    @classmethod
    def for_terminal(cls, output: Output) -> WaitingLine | None:
        """A line on stderr when it is a terminal and the output is for people; else None."""
        stream = sys.stderr
        if output.json_mode or not _is_terminal(stream):
            return None
        return cls(stream, styled=color_enabled(stream))

    def draw(self, seconds: float, what: str = "the model") -> None:
        """Show ``waiting for <what>… Ns``, replacing what this line showed before (`what`, a
        tool's name, made visible)."""
        text = f"{_FRAMES[self._frame % len(_FRAMES)]} waiting for {visible(what)}… {int(seconds)}s"
        self._frame += 1
        # A line that wraps cannot be redrawn with ``\r``: each redraw would leave a row.
        room = _columns(self.stream) - 1
        if room >= 0 and len(text) > room:
            text = text[: room - 1] + "…" if room else ""
        shown = f"\x1b[2m{text}\x1b[0m" if self.styled else text
        wide = self._width if room < 0 else min(self._width, room)
        padding = " " * max(0, wide - len(text))
        self.stream.write(f"\r{shown}{padding}")
        self.stream.flush()
        self._width = len(text)

    def clear(self) -> None:
        if not self._width:
            return
        self.stream.write("\r" + " " * self._width + "\r")
        self.stream.flush()
        self._width = 0


def wait_readable(fd: int, timeout: float, line: WaitingLine | None, what: str) -> bool:
    """Block until `fd` is readable, at most `timeout` seconds; whether it became so. `line`
    (when not None) shows ``waiting for <what>…`` after `QUIET_BEFORE`, and is cleared when the
    wait ends, however it ends."""
    import select
    import time

    started = time.monotonic()
    try:
        while True:
            waited = time.monotonic() - started
            if waited >= timeout:
                return False
            if line is not None and waited >= QUIET_BEFORE:
                line.draw(waited, what)
            step = timeout - waited
            if line is not None:
                step = min(step, max(TICK, QUIET_BEFORE - waited))
            readable, _, _ = select.select([fd], [], [], step)
            if readable:
                return True
    finally:
        if line is not None:
            line.clear()


def _columns(stream: IO[str]) -> int:
    """The terminal's width in columns; 0 when unknown (then nothing is cut)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (AttributeError, OSError, ValueError):
        return 0


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
