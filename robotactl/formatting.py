"""Plain functions that turn protocol values into short text for people.

Everything here is a pure function over values — no streams, no daemon, no trio or msgspec —
so each is tested directly. `robotactl.render.Output` writes what these produce. What they
make of a model's or a record's text is made visible (`robotactl.terminal_text.visible`): no
escape sequence, lone carriage return or bidi control of it reaches the terminal. A tool
call's name and arguments are shown exactly (`visible_exactly`): a zero-width or non-ASCII
space in them shows as ``<U+200B>``, since they are what a person approves.

- `format_call` — a tool call on one line: ``Write(file_path="/tmp/x", content="Hello…")``.
- `format_arguments` — a tool call's arguments one per line, in full, for an approval prompt.
- `one_line` / `shorten` — collapse and cut free text to fit a column.
- `format_when` — an ISO-8601 instant as ``12:03`` today, ``Mar 04 12:03`` this year, else a date.
- `home_relative` — ``~/src/x`` for a path under the home directory.
- `format_tokens` / `format_context` — token counts and a context-window summary.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from robotactl.terminal_text import visible, visible_exactly

__all__ = [
    "ELLIPSIS",
    "WHOLE_ARGUMENTS",
    "format_arguments",
    "format_call",
    "format_context",
    "format_tokens",
    "format_value",
    "format_when",
    "home_relative",
    "one_line",
    "parse_instant",
    "shorten",
]

ELLIPSIS = "…"
#: Arguments shown whole by `format_call`: the permission keys of the built-in tools
#: (PROTOCOL.md §4) and Glob/Grep's pattern.
WHOLE_ARGUMENTS = frozenset({"file_path", "command", "path", "url", "pattern"})
#: What "whole" means for a value in `WHOLE_ARGUMENTS`: more than a command or a path holds.
_WHOLE = 1 << 20
#: Longest rendering of one argument value inside `format_call`.
CALL_VALUE_WIDTH = 60
#: Longest rendering of one argument value in an approval prompt (the exact action matters,
#: but a megabyte of file content does not fit on a screen).
PROMPT_VALUE_WIDTH = 2000


def one_line(text: str) -> str:
    """`text` with every run of whitespace (newlines included) collapsed to one space."""
    return " ".join(text.split())


def shorten(text: str, width: int) -> str:
    """`text` on one line, made visible, cut to at most `width` characters with a trailing
    ellipsis."""
    flat = visible(one_line(text))
    if width <= 0:
        return ""
    if len(flat) <= width:
        return flat
    return flat[: max(0, width - 1)].rstrip() + ELLIPSIS


def format_value(value: Any, width: int = CALL_VALUE_WIDTH) -> str:
    """One argument value as compact JSON (strings quoted, escapes visible), cut to `width`.

    JSON rather than ``repr`` so a newline in file content reads ``\\n`` and the line stays
    one line; JSON escapes C0 controls, and what it leaves (DEL, C1 and bidi controls) is made
    visible, as is every character that draws nothing (`visible_exactly`).
    """
    text = visible_exactly(json.dumps(value, ensure_ascii=False, separators=(", ", ": ")))
    if len(text) <= width:
        return text
    if not isinstance(value, str):
        return text[: max(0, width - 1)] + ELLIPSIS
    cut = text[: max(1, width - 2)]
    if (len(cut) - len(cut.rstrip("\\"))) % 2:
        cut = cut[:-1]  # never leave half an escape sequence
    return cut + ELLIPSIS + '"'  # a cut string still reads as a string


def format_call(tool: str, arguments: Mapping[str, Any], width: int = CALL_VALUE_WIDTH) -> str:
    """``Tool(key=value, …)`` on one line, each value cut to `width` characters — except the
    argument permissions are decided on (`WHOLE_ARGUMENTS`: the path, command or URL), which
    is always shown whole: it is what a person approves. The tool's name is shown exactly."""
    inner = ", ".join(
        f"{key}={format_value(value, _WHOLE if key in WHOLE_ARGUMENTS else width)}"
        for key, value in arguments.items()
    )
    return f"{visible_exactly(tool)}({inner})"


def format_arguments(arguments: Mapping[str, Any], width: int = PROMPT_VALUE_WIDTH) -> list[str]:
    """The arguments one per line, ``key: value``: a string's lines shown as they are
    (indented under the key, shown exactly), other values as JSON; each value cut at `width`
    characters — but the path, command or URL a permission is decided on (`WHOLE_ARGUMENTS`),
    shown whole: a 3,000-character command cut at 2,000 hid what it ran last."""
    lines: list[str] = []
    for key, value in arguments.items():
        name = visible_exactly(key)
        limit = _WHOLE if key in WHOLE_ARGUMENTS else width
        if isinstance(value, str) and "\n" in value:
            shown = value if len(value) <= limit else value[:limit] + ELLIPSIS
            more = f" ({len(value) - limit} more characters)" if len(value) > limit else ""
            lines.append(f"{name}:{more}")
            lines.extend(f"  | {line}" for line in visible_exactly(shown).splitlines())
        else:
            shown = format_value(value, limit)
            cut = isinstance(value, str) and shown != format_value(value, _WHOLE)
            note = f" ({len(value)} characters in all)" if cut else ""
            lines.append(f"{name}: {shown}{note}")
    return lines


def parse_instant(text: str | None) -> datetime | None:
    """An ISO-8601 instant (``Z`` or an offset) as an aware UTC datetime; None if unreadable
    or if it has no UTC date (``0001-01-01T00:00:00+01:00`` is in year 0)."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        return None


def format_when(text: str | None, *, now: datetime) -> str:
    """A stored instant in the local time zone, as short as is unambiguous next to `now`:
    ``14:03`` today, ``Mar 04 14:03`` this year, ``2023-03-04`` before; ``?`` if unreadable."""
    moment = parse_instant(text)
    if moment is None:
        return "?"
    local = moment.astimezone()
    here = now.astimezone()
    if local.date() == here.date():
        return local.strftime("%H:%M")
    if local.year == here.year:
        return local.strftime("%b %d %H:%M")
    return local.strftime("%Y-%m-%d")


def home_relative(path: str | None, home: str | None = None) -> str:
    """`path` with the home directory shown as ``~``, made visible; ``?`` for a missing path."""
    if not path:
        return "?"
    base = home if home is not None else os.path.expanduser("~")
    if base and base != "/" and (path == base or path.startswith(base.rstrip("/") + "/")):
        return visible("~" + path[len(base.rstrip("/")) :])
    return visible(path)


def format_tokens(count: int) -> str:
    """``950``, ``12.3k``, ``200k``, ``1.5M``."""
    if count < 1000:
        return str(count)
    if count < 1_000_000:
        value = count / 1000
        return f"{value:.1f}k".replace(".0k", "k") if value < 100 else f"{value:.0f}k"
    value = count / 1_000_000
    return f"{value:.1f}M".replace(".0M", "M")


def format_context(used: int, maximum: int, used_percentage: float) -> str:
    """``12.3k / 200k tokens (6.15% used)``."""
    return f"{format_tokens(used)} / {format_tokens(maximum)} tokens ({used_percentage:.2f}% used)"
