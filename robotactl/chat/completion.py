"""Tab completion: slash command names, permission modes after ``/mode``, and file paths
(relative to the session's cwd, ``~`` expanded) for the word under the cursor."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

from prompt_toolkit.completion import CompleteEvent, Completer, Completion, PathCompleter
from prompt_toolkit.document import Document

from robotactl.chat.slash import SLASH_COMMANDS

__all__ = ["MODES", "ChatCompleter"]

MODES: Final = ("default", "acceptEdits", "plan", "bypassPermissions", "auto")


class ChatCompleter(Completer):
    """Completes for the chat prompt; `cwd()` is the session's working directory."""

    def __init__(self, cwd: Callable[[], str]) -> None:
        self._paths = PathCompleter(expanduser=True, get_paths=lambda: [cwd()])

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterable[Completion]:
        text = document.text_before_cursor
        if text.startswith("/") and " " not in text:
            for name, (_synopsis, _, what) in SLASH_COMMANDS.items():
                if name.startswith(text[1:]):
                    yield Completion(f"/{name}", -len(text), display_meta=what)
            return
        if text.startswith("/mode ") and " " not in text[6:]:
            typed = text[6:]
            yield from (Completion(m, -len(typed)) for m in MODES if m.startswith(typed))
            return
        word = text.split()[-1] if text and not text[-1].isspace() else ""
        if not word:
            return
        yield from self._paths.get_completions(Document(word, len(word)), complete_event)
