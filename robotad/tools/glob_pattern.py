"""The glob language of Glob and of Grep's `glob` filter, compiled to a regular expression.

Matched against a ``/``-separated path relative to the search root:

- ``*`` matches any run of characters within one path segment, ``?`` one character of a
  segment, ``[abc]`` / ``[a-z]`` / ``[!abc]`` one character from (or not from) a set;
- ``**`` as a whole segment matches zero or more segments (``src/**/*.py`` matches
  ``src/a.py`` and ``src/x/y/a.py``; a trailing ``**`` matches everything below);
- ``{a,b}`` stands for either alternative (nesting allowed, e.g. ``*.{ts,tsx}``);
- ``\\`` makes the next character literal.

Dot files are matched like any other name. `split_anchor` separates a pattern's leading
wildcard-free folders (``../lib/**/*.py``, ``~/.ssh/*``, ``/etc/*.conf``) from the rest: those
folders are where a search starts, which the permission gate must judge as the search's path.

The expression is compiled with the `regex` package (in its ``re``-compatible mode), not `re`:
a pattern the model writes with many stars between letters (``*a*a*a*a*a*a*a*a*a*a*b``) made
`re` backtrack for 18 s on one 40-character name, holding the interpreter lock — every session
of the daemon stopped — where `regex` answers at once.

Pure functions over strings; no file system access.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from robotad.tools.paths import canonical_path

if TYPE_CHECKING:
    import regex

__all__ = [
    "MAX_ALTERNATIVES",
    "GlobError",
    "compile_glob",
    "expand_braces",
    "max_depth",
    "split_anchor",
]

MAX_ALTERNATIVES = 256
"""Brace expansion beyond this many patterns is refused."""


_MAGIC = frozenset("*?[{\\")


class GlobError(ValueError):
    """A pattern that cannot be compiled; the message says why."""


def split_anchor(pattern: str, root: str) -> tuple[str, str]:
    """`pattern` split into the folder its wildcard-free leading segments name, taken from
    `root` (absolute, canonical; ``~`` and an absolute pattern leave it), and the rest, which
    always keeps the last segment: ``("../lib/**/*.py", "/p/app")`` gives ``("/p/lib",
    "**/*.py")``; a pattern without such segments gives ``(root, pattern)``. Raises
    `GlobError` for a pattern that names only a folder, `ValueError` (an `ArgumentError`)
    for one holding a NUL byte."""
    segments = os.path.expanduser(pattern).split("/")
    literal: list[str] = []
    while len(segments) > 1:
        # A backslash only escaping characters (``\.ssh``) still names one folder.
        plain = re.sub(r"\\(.)", r"\1", segments[0])
        if _MAGIC.intersection(plain) or plain.endswith("\\"):
            break
        segments.pop(0)
        literal.append(plain)
    prefix = "/".join(literal)
    if literal and prefix == "":
        prefix = "/"
    base = canonical_path(prefix, Path(root)) if prefix else root
    rest = "/".join(segments)
    if rest == "" and literal:
        raise GlobError(f"{pattern!r} names a directory; add a file pattern, e.g. {pattern}*")
    return base, rest


def compile_glob(pattern: str) -> regex.Pattern[str]:
    """A regular expression whose `fullmatch` accepts exactly the relative paths `pattern`
    names (compiled by `regex`: see the module doc)."""
    import regex  # lazily: the daemon starts without it

    if pattern == "":
        raise GlobError("glob pattern is empty")
    alternatives = [_translate(expanded) for expanded in expand_braces(pattern)]
    return regex.compile("|".join(alternatives), regex.V0 | regex.DOTALL)


def max_depth(pattern: str) -> int | None:
    """How many segments a path matching `pattern` can have, or None when ``**`` makes it
    unbounded. Lets a directory walk stop descending early."""
    deepest = 0
    for expanded in expand_braces(pattern):
        segments = expanded.split("/")
        if "**" in segments:
            return None
        deepest = max(deepest, len(segments))
    return deepest


def expand_braces(pattern: str) -> list[str]:
    """Every brace-free pattern `pattern` stands for, in order. A ``{`` with no matching ``}``
    or no top-level comma is literal. Raises `GlobError` past `MAX_ALTERNATIVES`."""
    done: list[str] = []
    pending = [pattern]
    while pending:
        current = pending.pop(0)
        group = _first_brace_group(current)
        if group is None:
            done.append(current)
        else:
            start, end, choices = group
            pending[:0] = [current[:start] + choice + current[end + 1 :] for choice in choices]
        if len(done) + len(pending) > MAX_ALTERNATIVES:
            raise GlobError(f"glob pattern expands to more than {MAX_ALTERNATIVES} alternatives")
    return done


def _first_brace_group(pattern: str) -> tuple[int, int, list[str]] | None:
    """(index of "{", index of its "}", top-level alternatives) of the first real group."""
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if char == "{":
            parsed = _brace_group_at(pattern, index)
            if parsed is not None:
                return index, parsed[0], parsed[1]
        index += 1
    return None


def _brace_group_at(pattern: str, start: int) -> tuple[int, list[str]] | None:
    depth = 0
    choices: list[str] = []
    piece_start = start + 1
    index = start
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                if not choices:
                    return None  # "{x}" has no alternatives: literal, as in a shell
                choices.append(pattern[piece_start:index])
                return index, choices
        elif char == "," and depth == 1:
            choices.append(pattern[piece_start:index])
            piece_start = index + 1
        index += 1
    return None


def _translate(pattern: str) -> str:
    segments = pattern.split("/")
    # ``**/**`` is ``**``: repeated, each would try every split of a path between them, and a
    # regex engine backtracks through all of them on a path that does not match.
    segments = [s for i, s in enumerate(segments) if s != "**" or segments[i - 1 : i] != ["**"]]
    parts: list[str] = []
    for position, segment in enumerate(segments):
        last = position == len(segments) - 1
        if segment == "**":
            # Zero or more whole segments; at the end, anything at all below.
            parts.append(".*" if last else "(?:.*/)?")
        else:
            parts.append(_translate_segment(segment) + ("" if last else "/"))
    return "".join(parts)


def _translate_segment(segment: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(segment):
        char = segment[index]
        if char == "*":
            # A run of stars is one: ``[^/]*`` twelve times over took a minute to refuse
            # a 30-character name, holding the daemon's interpreter all the while.
            if out[-1:] != ["[^/]*"]:
                out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            closing = segment.find("]", index + 2)
            if closing < 0:
                out.append(re.escape(char))
            else:
                body = segment[index + 1 : closing]
                negated = body[:1] in ("!", "^")
                if negated:
                    body = body[1:]
                body = "".join("\\" + c if c in "\\[]&~|" else c for c in body)
                out.append(f"[^/{body}]" if negated else f"[{body}]")
                index = closing
        elif char == "\\" and index + 1 < len(segment):
            index += 1
            out.append(re.escape(segment[index]))
        else:
            out.append(re.escape(char))
        index += 1
    return "".join(out)
