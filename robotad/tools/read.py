"""Read: a window of a text file, numbered like ``cat -n``.

Each line comes back as its 1-based number right-aligned in six columns, a tab, and the text
without its line ending (``\\r\\n`` and lone ``\\r`` count as line endings). A line longer than
`MAX_LINE_CHARS` is cut with a marker saying how much was left out, and the whole answer stops
at `MAX_OUTPUT_CHARS` with a note giving the offset to continue from. Notes are set in square
brackets on lines of their own, so they never pose as numbered file content.

Refused, as failed results: a missing path, a directory, a special file, a binary or non-UTF-8
file (see `textfile`), an offset past the end, a file over `WHOLE_FILE_MAX_BYTES` read
without `offset` or `limit` (the message suggests reading it in parts), and a file that is not
the one the permission check judged (`ToolContext.real_path`: a link on the path changed
after the check).

A ``tool-result:`` reference — what the model gets in place of a tool result too long to show
(the session's spill store) — is read the same way, from the store, so a stored result is
never lost to the model.
"""

from __future__ import annotations

import io
import os
from typing import Annotated

import trio
from msgspec import UNSET, Meta, Struct, UnsetType

from robotad.agent.tool import ArgumentError, ToolContext, ToolProfile, ToolResult, TypedTool
from robotad.storage.spill import REFERENCE_PREFIX, SpillError, SpillNotFound, SpillStore
from robotad.tools.paths import canonical_path
from robotad.tools.textfile import (
    SNIFF_BYTES,
    FileRefused,
    binary_reason,
    describe_os_error,
    moved_since_check,
    open_regular_file,
    read_line,
)

__all__ = [
    "DEFAULT_LINE_LIMIT",
    "MAX_LINE_CHARS",
    "MAX_OUTPUT_CHARS",
    "WHOLE_FILE_MAX_BYTES",
    "ReadArguments",
    "ReadTool",
    "number_line",
]

DEFAULT_LINE_LIMIT = 2000
"""Lines returned when the call gives no `limit`."""

MAX_LINE_CHARS = 2000
"""Characters of one line shown before it is cut."""

MAX_OUTPUT_CHARS = 60_000
"""Characters of numbered output in one answer; past it the answer says where to continue.
Below the size at which a session spills a tool result to its store (64 K characters), so
a read always reaches the model as text, never as an opaque ``tool-result:`` reference."""

WHOLE_FILE_MAX_BYTES = 256 * 1024
"""A file larger than this must be read with `offset` and/or `limit`."""


class ReadArguments(Struct, forbid_unknown_fields=True, frozen=True):
    """Read a UTF-8 text file; lines come back numbered from 1 like `cat -n`."""

    file_path: Annotated[
        str,
        Meta(
            min_length=1,
            description="The file to read; relative paths are taken from the session's cwd.",
        ),
    ]
    offset: (
        Annotated[int, Meta(ge=1, description="First line to return (1-based). Default 1.")]
        | UnsetType
    ) = UNSET
    limit: (
        Annotated[
            int, Meta(ge=1, description=f"How many lines to return. Default {DEFAULT_LINE_LIMIT}.")
        ]
        | UnsetType
    ) = UNSET


def number_line(number: int, text: str, dropped: int = 0) -> str:
    """One line in ``cat -n`` form, with a marker when `dropped` characters were cut off."""
    marker = f" … [line truncated: {dropped} more characters]" if dropped else ""
    return f"{number:>6}\t{text}{marker}"


class ReadTool(TypedTool[ReadArguments]):
    """The built-in Read tool (risk ``inspect``; permission argument ``file_path``, a path)."""

    name = "Read"
    description = (
        "Read a text file from the local file system. Returns numbered lines (`cat -n` style). "
        f"Reads up to {DEFAULT_LINE_LIMIT} lines from the start by default; use offset and "
        f"limit for a window, and always for files over {WHOLE_FILE_MAX_BYTES // 1024} KiB. "
        f"Lines over {MAX_LINE_CHARS} characters are truncated. Binary files are refused. "
        "A `tool-result:` reference (an earlier tool result too long to show) reads the same "
        "way: pass it as file_path."
    )
    profile = ToolProfile(
        risk="inspect", argument_key="file_path", argument_kind="path", stored_results=True
    )
    Arguments = ReadArguments

    def __init__(self, spill: SpillStore | None = None) -> None:
        #: Where results too long to show were stored (their ``tool-result:`` references).
        self.spill = spill

    async def run(self, arguments: ReadArguments, ctx: ToolContext) -> ToolResult:
        whole = arguments.offset is UNSET and arguments.limit is UNSET
        offset = 1 if arguments.offset is UNSET else arguments.offset
        limit = DEFAULT_LINE_LIMIT if arguments.limit is UNSET else arguments.limit
        if arguments.file_path.startswith(REFERENCE_PREFIX):
            return await trio.to_thread.run_sync(
                self._read_stored, arguments.file_path, offset, limit
            )
        try:
            path = canonical_path(arguments.file_path, ctx.cwd)
        except ArgumentError as exc:
            return ToolResult(ok=False, content=f"file_path: {exc}")
        return await trio.to_thread.run_sync(
            _read_window, path, offset, limit, whole, ctx.real_path
        )

    def _read_stored(self, reference: str, offset: int, limit: int) -> ToolResult:
        """A window of a result the session stored instead of showing (its reference is all
        the model got): numbered like a file's, however long the result."""
        if self.spill is None:
            return _failed(f"{reference}: no tool result is stored under that name", reference)
        try:
            data = self.spill.get(reference)
        except SpillNotFound:
            return _failed(f"{reference} is unknown or has expired", reference)
        except SpillError as exc:
            return _failed(f"{reference}: {exc}", reference)
        text = io.TextIOWrapper(io.BytesIO(data.encode("utf-8")), encoding="utf-8", newline=None)
        return _numbered_window(text, reference, offset, limit)


def _read_window(
    path: str, offset: int, limit: int, whole: bool, real_path: str | None
) -> ToolResult:
    try:
        with open_regular_file(path) as raw:
            moved = moved_since_check(raw.fileno(), path, real_path)
            if moved is not None:
                return _failed(moved, path)
            size = os.fstat(raw.fileno()).st_size
            if whole and size > WHOLE_FILE_MAX_BYTES:
                return _failed(
                    f"{path} is {size} bytes, over the {WHOLE_FILE_MAX_BYTES}-byte limit for "
                    "reading a whole file; read it in parts with offset and limit "
                    f"(e.g. offset=1, limit={DEFAULT_LINE_LIMIT // 4})",
                    path,
                )
            head = raw.read(SNIFF_BYTES)
            reason = binary_reason(head, complete=len(head) < SNIFF_BYTES)
            if reason is not None:
                return _failed(f"refusing to read {path}: {reason}", path)
            raw.seek(0)
            text = io.TextIOWrapper(raw, encoding="utf-8-sig", errors="replace", newline=None)
            return _numbered_window(text, path, offset, limit)
    except FileRefused as exc:
        return _failed(str(exc), path)
    except OSError as exc:
        return _failed(describe_os_error(exc, path), path)


def _numbered_window(text: io.TextIOWrapper, path: str, offset: int, limit: int) -> ToolResult:
    number = 0
    while number < offset - 1:
        if read_line(text, MAX_LINE_CHARS, trio.from_thread.check_cancelled) is None:
            break
        number += 1
        if number % 10_000 == 0:  # skipping into a huge file can take a while
            trio.from_thread.check_cancelled()
    if number < offset - 1 or (offset > 1 and _at_end(text)):
        return _failed(
            f"offset {offset} is past the end of {path}, which has {number} line(s)", path
        )

    shown: list[str] = []
    used = 0
    note = ""
    while len(shown) < limit:
        line = read_line(text, MAX_LINE_CHARS, trio.from_thread.check_cancelled)
        if line is None:
            break
        number += 1
        rendered = number_line(number, *line)
        if shown and used + len(rendered) + 1 > MAX_OUTPUT_CHARS:
            note = f"[output limit reached; continue with offset={number}]"
            break
        shown.append(rendered)
        used += len(rendered) + 1
    else:
        if not _at_end(text):
            note = f"[more lines follow; continue with offset={number + 1}]"

    if not shown:
        return ToolResult(
            ok=True,
            content=f"[{path} is empty]",
            metadata={"path": path, "start_line": offset, "lines": 0, "truncated": False},
        )
    content = "\n".join([*shown, note] if note else shown)
    return ToolResult(
        ok=True,
        content=content,
        metadata={
            "path": path,
            "start_line": offset,
            "lines": len(shown),
            "truncated": bool(note),
        },
    )


def _at_end(text: io.TextIOWrapper) -> bool:
    """True at end of file; otherwise the stream position is left where it was."""
    position = text.tell()
    at_end = text.read(1) == ""
    text.seek(position)
    return at_end


def _failed(message: str, path: str) -> ToolResult:
    return ToolResult(ok=False, content=message, metadata={"path": path})
