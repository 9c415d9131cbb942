"""Edit: replace an exact string in an existing text file, atomically.

`old_string` must occur exactly once, unless `replace_all` asks for every occurrence. Refused,
as failed results naming the file: a missing file, a directory or special file, a binary file, a
file over `MAX_EDIT_BYTES` or an edit that would make it so, a `new_string` that cannot be
written as UTF-8 (a lone surrogate), an empty `old_string`, `old_string` equal to `new_string`, no
occurrence ("not found"), and several occurrences without `replace_all` (saying how many).

Bytes outside the edit are kept exactly, undecodable ones included (surrogateescape round
trip). When the file uses ``\\r\\n`` line endings and `old_string` only matches once its
``\\n`` are read as ``\\r\\n`` (the way Read shows such a file), both strings are taken with
``\\r\\n``. The answer shows the edited region, numbered like Read's output.
"""

from __future__ import annotations

from typing import Annotated

import trio
from msgspec import Meta, Struct

from robotad.agent.tool import ArgumentError, ToolContext, ToolProfile, ToolResult, TypedTool
from robotad.sandbox.confinement import Confinement, SandboxUnavailable
from robotad.tools.paths import canonical_path
from robotad.tools.read import MAX_LINE_CHARS, number_line
from robotad.tools.textfile import (
    FileRefused,
    describe_os_error,
    open_regular_file,
    write_atomically,
)

__all__ = ["MAX_EDIT_BYTES", "SNIPPET_CONTEXT_LINES", "EditArguments", "EditTool"]

MAX_EDIT_BYTES = 10 * 1024 * 1024
"""Larger files are refused: the edit holds the whole file in memory twice."""

SNIPPET_CONTEXT_LINES = 3
"""Unchanged lines shown around the first replacement."""

_SNIPPET_MAX_LINES = 40


class EditArguments(Struct, forbid_unknown_fields=True, frozen=True):
    """Replace an exact string in a file."""

    file_path: Annotated[
        str,
        Meta(
            min_length=1,
            description="The file to edit; relative paths are taken from the session's cwd.",
        ),
    ]
    old_string: Annotated[
        str, Meta(description="The exact text to replace; must occur once unless replace_all.")
    ]
    new_string: Annotated[str, Meta(description="The replacement; must differ from old_string.")]
    replace_all: Annotated[
        bool, Meta(description="Replace every occurrence of old_string. Default false.")
    ] = False


class EditTool(TypedTool[EditArguments]):
    """The built-in Edit tool (risk ``modify``; permission argument ``file_path``, a path)."""

    name = "Edit"
    description = (
        "Replace an exact string in an existing text file. old_string must match the file "
        "exactly (without Read's line-number prefixes) and occur exactly once; include more "
        "surrounding text to make it unique, or set replace_all to change every occurrence."
    )
    profile = ToolProfile(risk="modify", argument_key="file_path", argument_kind="path")
    Arguments = EditArguments

    def __init__(self, confinement: Confinement | None = None) -> None:
        self.confinement = confinement or Confinement()

    async def run(self, arguments: EditArguments, ctx: ToolContext) -> ToolResult:
        try:
            path = canonical_path(arguments.file_path, ctx.cwd)
        except ArgumentError as exc:
            return ToolResult(ok=False, content=f"file_path: {exc}")
        try:
            async with self.confinement.exclusive(ctx.cwd):
                refusal = await self.confinement.write_refusal(path, ctx.cwd)
                if refusal is not None:
                    return ToolResult(ok=False, content=refusal, metadata={"path": path})
                if arguments.old_string == "":
                    return _failed(
                        "old_string is empty; use Write to create or replace a whole file", path
                    )
                if arguments.old_string == arguments.new_string:
                    return _failed(
                        "old_string and new_string are the same; nothing would change", path
                    )
                return await trio.to_thread.run_sync(_edit_file, path, arguments)
        except SandboxUnavailable as exc:
            return _failed(str(exc), path)


def _edit_file(path: str, arguments: EditArguments) -> ToolResult:
    try:
        with open_regular_file(path) as raw:
            data = raw.read(MAX_EDIT_BYTES + 1)
        if len(data) > MAX_EDIT_BYTES:
            return _failed(f"{path} is over the {MAX_EDIT_BYTES}-byte limit for editing", path)
        if b"\0" in data:
            return _failed(f"refusing to edit {path}: it looks binary (contains NUL bytes)", path)
        text = data.decode("utf-8", errors="surrogateescape")

        old, new = arguments.old_string, arguments.new_string
        count = text.count(old)
        if count == 0 and "\r\n" in text and "\n" in old and "\r" not in old:
            old, new = old.replace("\n", "\r\n"), new.replace("\n", "\r\n")
            count = text.count(old)
        if count == 0:
            return _failed(f"old_string not found in {path}", path)
        if count > 1 and not arguments.replace_all:
            return _failed(
                f"old_string found {count} times in {path}; include more surrounding text to "
                "make it unique, or set replace_all to replace every occurrence",
                path,
            )
        refusal = _growth_refusal(path, len(data), count, old, new)
        if refusal is not None:
            return _failed(refusal, path)
        first = text.index(old)
        edited = text.replace(old, new)
        write_atomically(path, edited.encode("utf-8", errors="surrogateescape"), make_parents=False)
    except FileRefused as exc:
        return _failed(str(exc), path)
    except OSError as exc:
        return _failed(describe_os_error(exc, path), path)

    noun = "occurrence" if count == 1 else "occurrences"
    snippet = _snippet(edited, first, len(new))
    return ToolResult(
        ok=True,
        content=f"Replaced {count} {noun} in {path}:\n{snippet}",
        metadata={"path": path, "replacements": count},
    )


def _growth_refusal(path: str, size: int, count: int, old: str, new: str) -> str | None:
    """Why replacing `count` times `old` by `new` in `path` (`size` bytes) cannot be done, or
    None. The edited file is held to the limit the file is: every occurrence of a character
    replaced by a long text would otherwise be built in memory, gigabytes from a small file."""
    try:
        grown = len(new.encode("utf-8", errors="surrogateescape"))
    except UnicodeEncodeError as exc:
        return f"new_string cannot be written as UTF-8 (at character {exc.start})"
    edited = size + count * (grown - len(old.encode("utf-8", errors="surrogateescape")))
    if edited > MAX_EDIT_BYTES:
        return (
            f"the edit would make {path} {edited} bytes, over the {MAX_EDIT_BYTES}-byte limit "
            "for editing"
        )
    return None


def _snippet(text: str, start: int, length: int) -> str:
    """The lines holding `text[start:start + length]` with some context, numbered."""
    first_line = text.count("\n", 0, start) + 1
    last_line = first_line + text.count("\n", start, start + length)
    begin = max(1, first_line - SNIPPET_CONTEXT_LINES)
    end = min(last_line + SNIPPET_CONTEXT_LINES, begin + _SNIPPET_MAX_LINES - 1)
    low = start
    for _ in range(first_line - begin + 1):
        low = text.rfind("\n", 0, low)
        if low < 0:
            break
    high = low
    for _ in range(end - begin + 1):
        high = text.find("\n", high + 1)
        if high < 0:
            high = len(text)
            break
    lines = text[low + 1 : high].split("\n")
    if high == len(text) and text.endswith("\n") and len(lines) > 1:
        lines.pop()  # the empty "line" after a final newline is not a line
    rendered = []
    for number, line in enumerate(lines, start=begin):
        line = line.removesuffix("\r")
        dropped = max(0, len(line) - MAX_LINE_CHARS)
        shown = line[:MAX_LINE_CHARS].encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        rendered.append(number_line(number, shown, dropped))
    return "\n".join(rendered)


def _failed(message: str, path: str) -> ToolResult:
    return ToolResult(ok=False, content=message, metadata={"path": path})
