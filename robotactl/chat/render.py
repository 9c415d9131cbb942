"""What the chat prints into the scrollback, rendered by rich as text for the terminal.

`Renderer` turns values into finished text (ANSI-styled when colour is on) at the terminal's
width: a completed reply as Markdown (code blocks highlighted), a tool call as one line with
its outcome (``✓ Read src/cli.py — 120 lines``), an approval request with its arguments (a
unified diff for Write/Edit), notices and errors. Colour follows `robotactl.render`'s rule:
only for a terminal, never with ``NO_COLOR`` set or ``TERM=dumb``; without colour the text
carries no escape sequence at all.

rich sends most control characters as they are (it drops only BEL, BS, VT, FF and CR), so
every text handed to a `Renderer` is made visible first (`robotactl.terminal_text.visible`):
rich's own styling is then the only escape sequence in what it returns.

Rendering is separate from writing: the prompt side writes the text above the prompt.
"""

from __future__ import annotations

import difflib
import io
import os
from collections.abc import Callable, Mapping
from typing import Any, Final

from rich.console import Console, RenderableType
from rich.markdown import Markdown
from rich.text import Text

from robotactl.chat.state import ToolCallRecord
from robotactl.current_text import read_small_text
from robotactl.formatting import format_arguments, format_call, shorten
from robotactl.terminal_text import visible, visible_exactly

__all__ = ["Renderer", "describe_call"]

#: Lines of a diff shown in an approval before it is cut.
DIFF_LINES: Final = 40
#: Syntax theme of code blocks (a dark-background theme every terminal renders legibly).
CODE_THEME: Final = "monokai"


def describe_call(
    tool: str, arguments: Mapping[str, Any], width: int, *, cwd: str | None = None
) -> str:
    """A tool call in a few words: ``Read src/cli.py``, ``Bash git status``, else
    ``Tool(key=value…)``, on one line of at most `width` characters, made visible. A path
    under `cwd` is shown relative to it."""
    for key in ("file_path", "command", "path", "url", "pattern"):
        value = arguments.get(key)
        if isinstance(value, str):
            if cwd and key in ("file_path", "path") and value.startswith(cwd.rstrip("/") + "/"):
                value = value[len(cwd.rstrip("/")) + 1 :]
            return shorten(f"{tool} {value}", width)
    return shorten(format_call(tool, arguments), width)


class Renderer:
    """Renders for a terminal `width()` columns wide, with colour when `color`."""

    def __init__(self, *, color: bool, width: Callable[[], int]) -> None:
        self.color = color
        self.width = width
        #: The session's cwd: tool lines show paths under it relative to it.
        self.cwd: str | None = None

    def _render(self, renderable: RenderableType) -> str:
        buffer = io.StringIO()
        console = Console(
            file=buffer,
            width=max(20, self.width()),
            force_terminal=self.color,
            no_color=not self.color,
            color_system="truecolor" if self.color else None,
            highlight=False,
            emoji=False,
        )
        console.print(renderable)
        return buffer.getvalue()

    def markdown(self, text: str) -> str:
        """A reply (or a part of one) rendered as Markdown."""
        return self._render(Markdown(visible(text).strip("\n"), code_theme=CODE_THEME))

    def line(self, text: str, style: str = "") -> str:
        """One line of plain text (never read as markup), styled when colour is on."""
        return self._render(Text(visible(text), style=style))

    def prompt_echo(self, prompt: str, *, other_client: bool = False) -> str:
        """A prompt as sent: ``› text`` (``» text (another client)`` for someone else's)."""
        mark, note = ("»", "  (another client)") if other_client else ("›", "")
        return self._render(Text(f"{mark} {visible(prompt)}{note}", style="bold cyan"))

    def tool_line(self, call: ToolCallRecord) -> str:
        """``✓ Read src/cli.py — first words of the result`` (``✗`` when it failed)."""
        mark, style = ("✓", "green") if call.ok else ("✗", "red")
        width = max(20, self.width())
        summary = describe_call(call.tool, call.arguments, width // 2, cwd=self.cwd)
        preview = shorten(call.preview, max(0, width - len(summary) - 5))
        text = Text(f"{mark} ", style=style)
        text.append(summary, style="bold")
        if preview:
            text.append(f" — {preview}", style="dim")
        return self._render(text)

    def tool_detail(self, call: ToolCallRecord) -> str:
        """A tool call in full, for ``/last``: every argument, the decision, the result."""
        text = Text(visible(f"{call.tool} ({call.call_id})") + "\n", style="bold")
        for line in format_arguments(call.arguments):
            text.append(f"  {line}\n")
        if call.decision is not None:
            text.append(f"permission: {visible(call.decision)}\n", style="dim")
        if call.ok is not None:
            outcome = "ok" if call.ok else "failed"
            text.append(f"result ({outcome}):\n", style="green" if call.ok else "red")
            text.append(visible(call.preview))
        return self._render(text)

    def approval(self, tool: str, arguments: Mapping[str, Any], reason: str) -> str:
        """An approval request: the tool and reason, its arguments, a diff for Write/Edit."""
        text = Text("approval needed: ", style="bold yellow")
        text.append(visible_exactly(f"{tool} — {reason}") + "\n")
        diff = _diff(tool, arguments)
        if diff is None:
            for line in format_arguments(arguments):
                text.append(f"  {line}\n")
        else:
            text.append(f"  {visible_exactly(str(arguments.get('file_path', '')))}\n")
            for line in diff:
                style = "green" if line.startswith("+") else "red" if line.startswith("-") else ""
                text.append(f"  {line}\n", style=style)
        return self._render(text)

    def notice(self, text: str) -> str:
        return self._render(Text(visible(text), style="dim"))

    def error(self, text: str) -> str:
        return self._render(Text(visible(text), style="red"))


def _diff(tool: str, arguments: Mapping[str, Any]) -> list[str] | None:
    """The change a Write or Edit makes, as unified diff lines (cut at `DIFF_LINES`). A Write
    is compared with the file as it is now: what it replaces shows as removed lines (a file
    whose text cannot be shown is said to be replaced). Both sides are shown exactly first
    (`visible_exactly`), so a lone carriage return shows as ``^M``, not as a line break, and a
    zero-width space as ``<U+200B>``."""
    notes: list[str] = []
    if tool == "Write" and isinstance(arguments.get("content"), str):
        before: list[str] = []
        path = arguments.get("file_path")
        if isinstance(path, str) and os.path.lexists(path):
            current = read_small_text(path)
            if current is None:
                notes.append("(replaces an existing file whose text is not shown)")
            else:
                before = visible_exactly(current).splitlines()
        after = visible_exactly(str(arguments["content"])).splitlines()
    elif tool == "Edit" and isinstance(arguments.get("old_string"), str):
        before = visible_exactly(str(arguments["old_string"])).splitlines()
        after = visible_exactly(str(arguments.get("new_string", ""))).splitlines()
    else:
        return None
    lines = [
        line
        for line in difflib.unified_diff(before, after, lineterm="", n=2)
        if not line.startswith(("---", "+++"))
    ]
    if len(lines) > DIFF_LINES:
        lines = [*lines[:DIFF_LINES], f"… {len(lines) - DIFF_LINES} more lines"]
    return [*notes, *lines]
