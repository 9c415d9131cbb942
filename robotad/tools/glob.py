"""Glob: files whose path matches a glob pattern, most recently modified first.

The pattern (see `glob_pattern` for the language; ``**`` crosses directories) is matched
against each file's path relative to the search directory: `path`, default the session's cwd.
Leading segments without wildcards move the search directory, so ``../lib/**/*.py`` and
absolute patterns such as ``/etc/*.conf`` work; the permission gate sees the directory actually
searched as the call's `path` (the profile's `anchor_key`, `glob_pattern.split_anchor`).
Only files are listed (symlinks to files included; directories and broken links are not), as
absolute paths, newest first, at most `MAX_RESULTS` with a note when more matched.

Version-control internals (`SKIPPED_DIRECTORIES`: ``.git``, ``.hg``, ``.svn``) are never
descended into unless the search starts inside one: they are large, and nearly never what a
file search means. Symlinked directories are not followed (no loops, no escaping the tree).
Unreadable directories are skipped silently. The walk runs in a worker thread and stops
promptly when the call is cancelled: it looks before each directory and each file.
"""

from __future__ import annotations

import heapq
import os
import stat
from collections.abc import Callable, Iterator
from typing import Annotated

import trio
from msgspec import UNSET, Meta, Struct, UnsetType

from robotad.agent.tool import ArgumentError, ToolContext, ToolProfile, ToolResult, TypedTool
from robotad.tools.glob_pattern import GlobError, compile_glob, max_depth, split_anchor
from robotad.tools.paths import canonical_path
from robotad.tools.textfile import moved_since_check, walkable_path

__all__ = [
    "MAX_RESULTS",
    "SKIPPED_DIRECTORIES",
    "GlobArguments",
    "GlobTool",
    "walk_files",
]

MAX_RESULTS = 1000
"""Paths listed in one answer."""

SKIPPED_DIRECTORIES = frozenset({".git", ".hg", ".svn"})
"""Directory names a walk never enters (the walk's own starting directory excepted)."""


class GlobArguments(Struct, forbid_unknown_fields=True, frozen=True):
    """Find files by glob pattern."""

    pattern: Annotated[
        str,
        Meta(min_length=1, description="Glob pattern, e.g. `**/*.py` or `src/*.{ts,tsx}`."),
    ]
    path: (
        Annotated[
            str,
            Meta(min_length=1, description="Directory to search in. Default: the session's cwd."),
        ]
        | UnsetType
    ) = UNSET


def walk_files(root: str, *, depth_limit: int | None = None) -> Iterator[tuple[str, str]]:
    """Yield ``(absolute path, path relative to root with "/")`` for each non-directory entry
    under `root`, directory by directory in sorted order, skipping `SKIPPED_DIRECTORIES` and
    not following symlinked directories. `depth_limit` caps the segments of a relative path.

    Blocking; meant for a worker thread started by `trio.to_thread.run_sync`, where it checks
    for cancellation at every directory and before every entry it yields (what the caller does
    with each, a stat, a judgement, a search, can take a while over a folder of many files).
    """
    check_cancelled = trio.from_thread.check_cancelled
    for directory, subdirectories, files in os.walk(root):
        check_cancelled()
        relative = os.path.relpath(directory, root)
        prefix = "" if relative == "." else relative.replace(os.sep, "/") + "/"
        depth = prefix.count("/")
        if depth_limit is not None and depth + 2 > depth_limit:
            subdirectories[:] = []
        else:
            subdirectories[:] = sorted(d for d in subdirectories if d not in SKIPPED_DIRECTORIES)
        for name in sorted(files):
            check_cancelled()
            yield os.path.join(directory, name), prefix + name


class GlobTool(TypedTool[GlobArguments]):
    """The built-in Glob tool (risk ``inspect``; permission argument ``path``, a path)."""

    name = "Glob"
    description = (
        "Find files by glob pattern (`*` within a directory, `**` across directories, "
        "`{a,b}` alternatives), searching under path (default: the session's cwd). Returns "
        f"absolute file paths, most recently modified first, at most {MAX_RESULTS}."
    )
    profile = ToolProfile(
        risk="inspect", argument_key="path", argument_kind="path", anchor_key="pattern"
    )
    Arguments = GlobArguments

    async def run(self, arguments: GlobArguments, ctx: ToolContext) -> ToolResult:
        try:
            root = canonical_path("." if arguments.path is UNSET else arguments.path, ctx.cwd)
            base, relative = split_anchor(arguments.pattern, root)
            compile_glob(relative)
        except (ArgumentError, GlobError) as exc:
            return ToolResult(ok=False, content=str(exc))
        if ctx.real_path is not None and base != root:
            # The gate moves a pattern's leading folders into `path`; this one did not.
            return ToolResult(ok=False, content=f"{base} is not the folder that was checked")
        policy = ctx.policy

        def hidden(path: str) -> bool:
            return policy is not None and policy.hides(self.name, path)

        return await trio.to_thread.run_sync(
            _glob, base, relative, arguments.pattern, ctx.real_path, hidden
        )


def _glob(
    base: str,
    relative: str,
    pattern: str,
    real_path: str | None,
    hidden: Callable[[str], bool],
) -> ToolResult:
    try:
        fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        what = "is not a directory" if os.path.exists(base) else "does not exist"
        return ToolResult(
            ok=False, content=f"search directory {base} {what}", metadata={"path": base}
        )
    try:
        moved = moved_since_check(fd, base, real_path)
        if moved is not None:
            return ToolResult(ok=False, content=moved, metadata={"path": base})
        # Walked through the descriptor: the folder checked, whatever its name leads to now.
        pinned = base if real_path is None else walkable_path(fd, real_path)
        counts = {"found": 0, "hidden": 0}

        def shown() -> Iterator[tuple[int, str]]:
            for mtime, path in _matches(pinned, base, relative):
                counted = "hidden" if hidden(path) else "found"
                counts[counted] += 1
                if counted == "found":
                    yield -mtime, path

        # Only the newest are kept: a list of every match grew ~300 bytes a file (a search
        # of a home folder, millions of files) to show a thousand of them.
        newest = heapq.nsmallest(MAX_RESULTS, shown())
    finally:
        os.close(fd)
    found, left_out = counts["found"], counts["hidden"]
    metadata = {"path": base, "matches": found, "truncated": found > MAX_RESULTS}
    note = f"[{left_out} file(s) a deny rule hides are left out]" if left_out else ""
    if not found:
        content = f"No files match {pattern!r} under {base}"
        return ToolResult(ok=True, content=f"{content} {note}".rstrip(), metadata=metadata)
    lines = [path for _, path in newest]
    if note:
        lines.append(note)
    if found > MAX_RESULTS:
        lines.append(
            f"[{found} files matched; showing the {MAX_RESULTS} most recently modified. "
            "Narrow the pattern or the path to see the rest.]"
        )
    return ToolResult(ok=True, content="\n".join(lines), metadata=metadata)


def _matches(walked: str, base: str, relative: str) -> Iterator[tuple[int, str]]:
    """``(mtime, path under base)`` of each file under `walked` (`base`, or the descriptor
    it is open at) whose relative path matches `relative`."""
    regex = compile_glob(relative)
    for path, relative_path in walk_files(walked, depth_limit=max_depth(relative)):
        if not regex.fullmatch(relative_path):
            continue
        try:
            status = os.stat(path)  # follows a symlink: a link to a file counts, a broken one not
        except OSError:
            continue
        if not stat.S_ISDIR(status.st_mode):
            yield status.st_mtime_ns, os.path.join(base, relative_path)
