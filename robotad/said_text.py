"""What a child process said, as one line a person can read safely.

`one_line_tail` is the one way robotad quotes another program's words back (a failed
classifier's stderr in its denial, decision 61; an MCP server's last words on stderr in
``mcp/list``, decision 86): each line stripped, the blank ones dropped, joined by `` | ``,
tabs as spaces, every other control character and bidi control shown as ``<U+001B>`` (they
would steer a terminal or reorder the text around them), and of that the end that fits.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

__all__ = ["one_line_tail"]

#: Characters never quoted as they are: they steer a terminal (an escape sequence, a carriage
#: return) or reorder the text around them (bidi controls). Tabs become spaces first.
_UNSAFE: Final = re.compile(
    "[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


def one_line_tail(lines: Iterable[str], limit: int, *, cut: bool = False) -> str:
    """`lines` as one safe line (see the module) of at most `limit` characters: its end, with
    ``…`` first (counted) when anything was left out — here, or before `lines` (`cut`: the
    caller kept only the end of what was said). Empty when nothing was said."""
    text = " | ".join(line.strip() for line in lines if line.strip()).replace("\t", " ")
    if not text:
        return ""
    pieces = [f"<U+{ord(char):04X}>" if _UNSAFE.match(char) else char for char in text]
    if not cut and sum(map(len, pieces)) <= limit:
        return "".join(pieces)
    kept: list[str] = []  # from the end, as many as fit after the "…"
    size = 1
    for piece in reversed(pieces):
        if size + len(piece) > limit:
            break
        kept.append(piece)
        size += len(piece)
    return "…" + "".join(reversed(kept))
