"""Grep: lines matching a Python regular expression, as ``path:line:text``.

`path` (default the session's cwd) is a file or a directory; a directory is walked like Glob
walks it (sorted, version-control internals skipped, symlinked directories not followed).
`glob` filters the walked files: a pattern without ``/`` (``*.py``) is matched against the
file name at any depth, one with ``/`` (``src/**/*.ts``) against the path relative to `path`.
An explicitly named file is searched whatever `glob` says.

Each line is searched on its own (``^``/``$`` anchor at the line), in UTF-8 with undecodable
bytes replaced. The expression is Python's (`regex` in its ``re``-compatible mode, not `re`
itself): a pattern with nested quantifiers, such as ``(a+)+$``, can backtrack for hours on one
line it does not match, and `re` holds the interpreter lock all the while — every session of
the daemon stopped with it. `regex` matches with the lock released and gives up at a deadline:
a search still running after `TIME_LIMIT_S` is a failed result naming the line it was on.

A cancelled call (the turn aborted) stops the search at the next line or file. A match
already underway cannot be interrupted (`regex` offers no way): the call waits for it no
longer than `stoppable.STOP_GRACE_S`, and leaves it to end in its worker thread, at the call's
deadline at the latest, its answer dropped.

Binary files (a NUL byte in the first `SNIFF_BYTES`), files over `MAX_FILE_BYTES`, special files
and, walking a folder, the files the session's `ToolContext.policy` withholds (protected secrets
such as ``.env`` files, PROTOCOL.md §10.7, and files a deny or ask rule of Grep or Read covers) are
skipped, and the answer says how many. Output paths are absolute; a matched line is cut at
`MAX_LINE_CHARS`; the search stops after `MAX_MATCHES` matches with a note. An invalid regular
expression or glob is a failed result.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, BinaryIO

import trio
from msgspec import UNSET, Meta, Struct, UnsetType

from robotad.agent.tool import ArgumentError, ToolContext, ToolProfile, ToolResult, TypedTool
from robotad.tools.glob import walk_files
from robotad.tools.glob_pattern import GlobError, compile_glob
from robotad.tools.paths import canonical_path
from robotad.tools.stoppable import run_stoppable
from robotad.tools.textfile import (
    SNIFF_BYTES,
    FileRefused,
    describe_os_error,
    moved_since_check,
    open_regular_file,
    opened_real_path,
)

if TYPE_CHECKING:
    import regex

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_LINE_CHARS",
    "MAX_MATCHES",
    "TIME_LIMIT_S",
    "GrepArguments",
    "GrepTool",
]

MAX_MATCHES = 500
"""Matching lines reported in one answer."""

MAX_FILE_BYTES = 5 * 1024 * 1024
"""Larger files are skipped."""

MAX_LINE_CHARS = 500
"""Characters of a matching line shown."""

TIME_LIMIT_S = 20.0
"""Seconds one Grep call may spend searching."""


class GrepArguments(Struct, forbid_unknown_fields=True, frozen=True):
    """Search file contents with a regular expression."""

    pattern: Annotated[
        str, Meta(min_length=1, description="Python regular expression, searched per line.")
    ]
    path: (
        Annotated[
            str,
            Meta(
                min_length=1,
                description="File or directory to search. Default: the session's cwd.",
            ),
        ]
        | UnsetType
    ) = UNSET
    glob: (
        Annotated[
            str,
            Meta(min_length=1, description="Only search files matching this glob, e.g. `*.py`."),
        ]
        | UnsetType
    ) = UNSET


class _TooSlow(Exception):
    """The search passed its deadline at line `number` of `path`."""

    def __init__(self, path: str, number: int) -> None:
        super().__init__(path, number)
        self.path = path
        self.number = number


@dataclass
class _Search:
    regex: regex.Pattern[str]
    #: When the search gives up (`time.monotonic`).
    deadline: float
    lines: list[str] = field(default_factory=list)
    files_matched: int = 0
    binary: int = 0
    oversized: int = 0
    unreadable: int = 0
    withheld: int = 0

    @property
    def full(self) -> bool:
        return len(self.lines) >= MAX_MATCHES


class GrepTool(TypedTool[GrepArguments]):
    """The built-in Grep tool (risk ``inspect``; permission argument ``path``, a path)."""

    name = "Grep"
    description = (
        "Search file contents with a Python regular expression, line by line, under path (a "
        "file or directory; default: the session's cwd), optionally only in files matching "
        "glob (`*.py` matches names at any depth). Returns `path:line:text` lines, at most "
        f"{MAX_MATCHES}. Binary files and files over {MAX_FILE_BYTES // (1024 * 1024)} MiB "
        "are skipped."
    )
    profile = ToolProfile(risk="inspect", argument_key="path", argument_kind="path")
    Arguments = GrepArguments

    async def run(self, arguments: GrepArguments, ctx: ToolContext) -> ToolResult:
        try:
            root = canonical_path("." if arguments.path is UNSET else arguments.path, ctx.cwd)
        except ArgumentError as exc:
            return ToolResult(ok=False, content=f"path: {exc}")
        import regex  # lazily: the daemon starts without it

        try:
            compiled = regex.compile(arguments.pattern, flags=regex.V0)
        except regex.error as exc:
            return _failed(f"invalid regular expression {arguments.pattern!r}: {exc}", root)
        try:
            name_filter = None if arguments.glob is UNSET else compile_glob(arguments.glob)
        except GlobError as exc:
            return _failed(f"invalid glob {arguments.glob!r}: {exc}", root)
        by_name = arguments.glob is not UNSET and "/" not in arguments.glob

        policy = ctx.policy

        def withheld(path: str) -> bool:
            return policy is not None and policy.withholds(self.name, path, root)

        search = _Search(compiled, time.monotonic() + TIME_LIMIT_S)
        return await run_stoppable(
            _grep, root, search, name_filter, by_name, arguments.pattern, withheld, ctx.real_path
        )


def _grep(
    root: str,
    search: _Search,
    name_filter: regex.Pattern[str] | None,
    by_name: bool,
    pattern: str,
    withheld: Callable[[str], bool],
    real_path: str | None,
) -> ToolResult:
    def vet(raw: BinaryIO, path: str) -> str | None:
        return moved_since_check(raw.fileno(), path, real_path)

    try:
        if os.path.isdir(root):
            tree = _search_tree(root, search, name_filter, by_name, withheld)
            return _render(tree, root, pattern)
        skipped = _search_file(root, search, vet)
    except _TooSlow as exc:
        return _failed(
            f"the pattern {pattern!r} took more than {TIME_LIMIT_S:g} s to search (stopped at "
            f"{exc.path}:{exc.number}): nested quantifiers such as (a+)+ can backtrack without "
            "end on a line they do not match; simplify the pattern, or narrow path or glob",
            root,
        )
    if skipped == "binary":
        return _failed(f"cannot search {root}: it looks binary (contains NUL bytes)", root)
    if skipped == "oversized":
        return _failed(f"cannot search {root}: it is over {MAX_FILE_BYTES} bytes", root)
    if skipped is not None:
        return _failed(f"cannot search: {skipped}", root)
    return _render(search, root, pattern)


def _search_tree(
    root: str,
    search: _Search,
    name_filter: regex.Pattern[str] | None,
    by_name: bool,
    withheld: Callable[[str], bool],
) -> _Search:
    def chosen() -> Iterable[str]:
        for path, relative in walk_files(root):
            subject = relative.rsplit("/", 1)[-1] if by_name else relative
            if name_filter is not None and not name_filter.fullmatch(subject):
                continue
            if withheld(path):
                search.withheld += 1
                continue
            yield path

    def vet(raw: BinaryIO, path: str) -> str | None:
        # Judged again by the file actually opened: a link swapped in after the check above
        # cannot lead the search to a file the rules withhold.
        try:
            real = opened_real_path(raw.fileno(), path)
        except OSError:
            return "withheld"
        if real == path:
            return None  # no link on the way: the file is the one `chosen` judged
        return "withheld" if withheld(real) else None

    return _search_files(chosen(), search, vet)


#: What a search asks of each file it opened (and the name it opened it by): a reason to skip
#: it, or None.
Vet = Callable[[BinaryIO, str], str | None]


def _search_files(paths: Iterable[str], search: _Search, vet: Vet) -> _Search:
    for path in paths:
        trio.from_thread.check_cancelled()
        if search.full:
            break
        skipped = _search_file(path, search, vet)
        if skipped == "binary":
            search.binary += 1
        elif skipped == "oversized":
            search.oversized += 1
        elif skipped == "withheld":
            search.withheld += 1
        elif skipped is not None:
            search.unreadable += 1
    return search


def _search_file(path: str, search: _Search, vet: Vet) -> str | None:
    """Search one file; None when searched, else why it was skipped: "binary", "oversized",
    what `vet` said of the opened file ("withheld", or why it is not the file checked), or a
    description of why it could not be read."""
    try:
        with open_regular_file(path) as raw:
            if (refusal := vet(raw, path)) is not None:
                return refusal
            if os.fstat(raw.fileno()).st_size > MAX_FILE_BYTES:
                return "oversized"
            data = raw.read(MAX_FILE_BYTES + 1)
    except FileRefused as exc:
        return str(exc)
    except OSError as exc:
        return describe_os_error(exc, path)
    if len(data) > MAX_FILE_BYTES:
        return "oversized"
    if b"\0" in data[:SNIFF_BYTES]:
        return "binary"
    matched = False
    find, deadline = search.regex.search, search.deadline
    check_cancelled = trio.from_thread.check_cancelled
    for number, line in enumerate(data.decode("utf-8", "replace").split("\n"), start=1):
        check_cancelled()  # the call was cancelled: stop between two lines
        line = line.removesuffix("\r")
        try:  # the interpreter lock released while it matches; never past the deadline
            found = find(line, concurrent=True, timeout=max(deadline - time.monotonic(), 0.001))
        except TimeoutError:
            raise _TooSlow(path, number) from None
        if found is None:
            continue
        matched = True
        shown = line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " …"
        search.lines.append(f"{path}:{number}:{shown}")
        if search.full:
            break
    search.files_matched += matched
    return None


def _render(search: _Search, root: str, pattern: str) -> ToolResult:
    metadata = {
        "path": root,
        "matches": len(search.lines),
        "files": search.files_matched,
        "truncated": search.full,
    }
    lines = list(search.lines) or [f"No matches for {pattern!r} under {root}"]
    if search.full:
        lines.append(
            f"[stopped after {MAX_MATCHES} matches; narrow the pattern, path or glob to see more]"
        )
    if search.binary or search.oversized or search.unreadable or search.withheld:
        lines.append(f"[skipped {_skipped_note(search)}]")
    return ToolResult(ok=True, content="\n".join(lines), metadata=metadata)


def _skipped_note(search: _Search) -> str:
    parts = []
    if search.binary:
        parts.append(f"{search.binary} binary file(s)")
    if search.oversized:
        parts.append(f"{search.oversized} file(s) over {MAX_FILE_BYTES} bytes")
    if search.unreadable:
        parts.append(f"{search.unreadable} unreadable or special file(s)")
    if search.withheld:
        parts.append(
            f"{search.withheld} file(s) the permission rules withhold (a protected secret "
            "such as .env, or a file an ask rule covers, asks when Grep names it; a file a "
            "deny rule covers stays denied)"
        )
    return ", ".join(parts)


def _failed(message: str, path: str) -> ToolResult:
    return ToolResult(ok=False, content=message, metadata={"path": path})
