"""The screen as the trio side sees it: print above the prompt, redraw, leave.

`robotactl.chat.prompt.ChatPrompt` implements it on prompt_toolkit; the follower and the
controller only ever talk to this protocol, so they are tested with a list of lines.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["Screen"]


class Screen(Protocol):
    def print(self, text: str) -> None:
        """Write finished `text` (ending in a newline) into the scrollback, above the prompt,
        at once: before the prompt area is drawn again."""

    def refresh(self) -> None:
        """Redraw the prompt area (live text, approval question, status line)."""

    def put_back(self, text: str) -> None:
        """Return `text` (a prompt that could not be sent) to an empty input line."""

    def input_text(self) -> str:
        """What the input line holds (typed, not sent)."""

    def leave(self) -> None:
        """End the chat (the prompt returns)."""

    def width(self) -> int:
        """The terminal's width in columns."""
