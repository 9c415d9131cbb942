"""The daemon's prompt history (``history/search``) as prompt_toolkit history for Up, Down
and Ctrl-R.

robotad records every prompt of every session (PROTOCOL.md §8, ``prompt-history.jsonl``);
`load_prompt_history` asks for this directory's prompts and then everyone's, newest first,
and `ordered_prompts` puts this directory's first (so Up recalls what was typed here before
what was typed elsewhere), each prompt once. `DaemonHistory` serves that list to the prompt
and takes the prompts typed in this chat at the front; it stores nothing itself (the daemon
records what `session/run` receives).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Final

from prompt_toolkit.history import History

from protocol.methods import HistoryEntry, SearchResult

if TYPE_CHECKING:
    from protocol.peer import JsonRpcPeer

__all__ = ["HISTORY_LIMIT", "DaemonHistory", "load_prompt_history", "ordered_prompts"]

#: Prompts asked for, per query (this directory's, then everyone's).
HISTORY_LIMIT: Final = 500


def ordered_prompts(here: Sequence[HistoryEntry], everywhere: Sequence[HistoryEntry]) -> list[str]:
    """Prompts newest first: those typed in this directory, then the others; each once."""
    seen: set[str] = set()
    prompts: list[str] = []
    for entry in [*here, *everywhere]:
        if entry.prompt.strip() and entry.prompt not in seen:
            seen.add(entry.prompt)
            prompts.append(entry.prompt)
    return prompts


async def load_prompt_history(peer: JsonRpcPeer, cwd: str) -> list[str]:
    """This directory's prompts then everyone's, newest first (see `ordered_prompts`)."""
    here = await peer.request(
        "history/search", {"cwd": cwd, "limit": HISTORY_LIMIT}, result_type=SearchResult
    )
    everywhere = await peer.request(
        "history/search", {"limit": HISTORY_LIMIT}, result_type=SearchResult
    )
    return ordered_prompts(here.entries, everywhere.entries)


class DaemonHistory(History):
    """Prompt history filled from the daemon with `replace` (newest first)."""

    def replace(self, prompts: Iterable[str]) -> None:
        """Serve `prompts` (newest first) from the next prompt on."""
        self._loaded_strings = list(prompts)
        self._loaded = True

    def load_history_strings(self) -> Iterable[str]:
        return []  # filled by `replace`; nothing is read from disk here

    def store_string(self, string: str) -> None:
        pass  # the daemon records the prompt when the turn starts
