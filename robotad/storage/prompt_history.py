"""The cross-session prompt history: ``prompt-history.jsonl``, one submitted prompt a line.

A derived, append-only projection of what people typed, so a search can run across sessions and
working folders without decoding any session record (G-167). Never authoritative: the records
own every message (G-168). Lines are ``{prompt, sessionId, cwd, timestamp}`` (G-164), appended
with one ``O_APPEND`` write into an owner-only file kept open between prompts, as a session
log is (`log_files.FileLogSink`: a file moved or removed meanwhile is reopened by name); no
line is ever rewritten.

`search` walks the file backwards in blocks (64 KiB by default), so the newest entries come
first and finding the newest 50 costs the same however long the file is. A line spanning block
boundaries, or longer than a block, is reassembled intact (G-169). A line that fails to parse is
counted in `unreadable_lines`, never silently dropped (G-170).

A search's answer always fits one wire frame (16 MiB), however long the prompts: a prompt over
`SHOWN_PROMPT_CHARS` characters comes back as its beginning followed by a marker saying how many
characters were left out (`shown_prompt`; the query still matches the whole prompt), and the
search stops adding entries once their JSON would pass `ANSWER_BUDGET` bytes — then fewer than
`limit` entries come back, the newest ones. (A few 5 MB prompts used to make ``robotactl ls``,
which asks for 5,000 entries, fail for good: the reply was larger than a frame.)

Counting is of the lines *scanned*: the search stops as soon as `limit` entries matched, so
`unreadable_lines` covers the part of the file read to find them (the whole file only when fewer
than `limit` entries match). Only a missing file is empty history; anything else that stops the
read (no permission, a folder, FIFO or symlink in its place, I/O error) raises `OSError` (G-171).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import Path

import msgspec

from protocol.shapes import utc_now

from . import fsio
from .log_files import FileLogSink

__all__ = [
    "ANSWER_BUDGET",
    "HISTORY_FILE",
    "SHOWN_PROMPT_CHARS",
    "PromptEntry",
    "PromptHistory",
    "SearchResult",
    "shown_prompt",
]

HISTORY_FILE = "prompt-history.jsonl"
DEFAULT_BLOCK = 64 * 1024
DEFAULT_LIMIT = 50
#: Characters of a prompt a search returns; the rest is replaced by a marker.
SHOWN_PROMPT_CHARS = 64 * 1024
#: Bytes of entries (their JSON) one search returns at most: a quarter of a frame, so the
#: reply fits one with room to spare.
ANSWER_BUDGET = 4 * 1024 * 1024


class PromptEntry(msgspec.Struct, rename="camel", forbid_unknown_fields=True, frozen=True):
    """One submitted prompt. `timestamp` is the ISO-8601 UTC string it was written with."""

    prompt: str
    session_id: str
    cwd: str
    timestamp: str


@dataclass(frozen=True, slots=True)
class SearchResult:
    entries: list[PromptEntry]
    unreadable_lines: int


class PromptHistory:
    """The prompt-history file at `path` (usually ``<state>/prompt-history.jsonl``)."""

    def __init__(self, path: Path, *, block_size: int = DEFAULT_BLOCK) -> None:
        if block_size < 1:
            raise ValueError("block_size must be positive")
        self._path = Path(path)
        self._block = block_size
        self._decoder = msgspec.json.Decoder(PromptEntry)
        self._encoder = msgspec.json.Encoder()
        #: Kept open between prompts, checked against the path before each (`FileLogSink`).
        self._sink = FileLogSink(self._path, root=self._path.parent)

    @property
    def path(self) -> Path:
        return self._path

    def append(self, prompt: str, session_id: str, cwd: str, timestamp: str | None = None) -> None:
        """Append one entry (timestamp: now, ISO-8601 UTC ending in Z, unless given)."""
        when = timestamp if timestamp is not None else msgspec.to_builtins(utc_now())
        self._sink.append(self._encoder.encode(PromptEntry(prompt, session_id, cwd, when)))

    def close(self) -> None:
        """Release the file's descriptor (a later `append` opens it again)."""
        self._sink.close()

    def search(
        self, query: str | None = None, cwd: str | None = None, limit: int = DEFAULT_LIMIT
    ) -> SearchResult:
        """Newest-first entries whose prompt contains `query` (case-insensitive) and whose
        cwd equals `cwd` (each filter only when given), at most `limit` of them and no more
        than `ANSWER_BUDGET` bytes of them, each prompt as `shown_prompt` gives it."""
        needle = query.casefold() if query else None
        found: list[PromptEntry] = []
        unreadable = 0
        used = 0
        if limit <= 0:
            return SearchResult([], 0)
        with contextlib.closing(self._lines_newest_first()) as lines:
            for line in lines:
                try:
                    entry = self._decoder.decode(line)
                except (msgspec.DecodeError, msgspec.ValidationError):
                    unreadable += 1
                    continue
                if cwd is not None and entry.cwd != cwd:
                    continue
                if needle is not None and needle not in entry.prompt.casefold():
                    continue
                entry = shown_prompt(entry)
                used += len(self._encoder.encode(entry)) + 1
                if found and used > ANSWER_BUDGET:
                    break
                found.append(entry)
                if len(found) >= limit:
                    break
        return SearchResult(found, unreadable)

    def _lines_newest_first(self) -> Generator[bytes, None, None]:
        """Every nonempty line, last first, reading the file backwards block by block."""
        fd = fsio.open_regular(self._path)
        if fd is None:
            return
        try:
            position = os.fstat(fd).st_size
            tail: list[bytes] = []  # pieces of the line that ends where the last block began
            while position > 0:
                start = max(0, position - self._block)
                block = os.pread(fd, position - start, start)
                if len(block) != position - start:
                    raise OSError("the prompt history changed size while being read")
                position = start
                pieces = block.split(b"\n")
                if len(pieces) == 1:
                    tail.append(block)  # no newline: the line goes on before this block
                    continue
                last = pieces[-1]
                line = b"".join([last, *reversed(tail)])
                if line:
                    yield line
                for middle in reversed(pieces[1:-1]):
                    if middle:
                        yield middle
                tail = [pieces[0]]
            line = b"".join(reversed(tail))
            if line:
                yield line
        finally:
            os.close(fd)


def shown_prompt(entry: PromptEntry) -> PromptEntry:
    """`entry` as a search returns it: a prompt over `SHOWN_PROMPT_CHARS` characters cut
    there, with `` … [prompt shortened: N more characters]`` after it."""
    left_out = len(entry.prompt) - SHOWN_PROMPT_CHARS
    if left_out <= 0:
        return entry
    marker = f" … [prompt shortened: {left_out} more characters]"
    return msgspec.structs.replace(entry, prompt=entry.prompt[:SHOWN_PROMPT_CHARS] + marker)
