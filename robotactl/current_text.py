"""What a file holds now, for showing what a Write would replace (robotactl's chat and ACP).

`read_small_text(path)` is the text of a small UTF-8 regular file, or None: no file, something
other than a regular file (a FIFO is never waited on: the open does not block, and only a
regular file is read), unreadable, not UTF-8, or over `WRITE_DIFF_BYTES` (too long to show as
a diff). The file is opened as the Write would find it, following a symlink to what it names.
"""

from __future__ import annotations

import os
import stat
from typing import Final

__all__ = ["WRITE_DIFF_BYTES", "read_small_text"]

#: The largest file whose current text a Write's diff shows.
WRITE_DIFF_BYTES: Final = 256 * 1024


def read_small_text(path: str) -> str | None:
    """The text of the file at `path` when it is a small UTF-8 regular file; None otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, WRITE_DIFF_BYTES + 1)
        while len(data) <= WRITE_DIFF_BYTES and (more := os.read(fd, WRITE_DIFF_BYTES + 1)):
            data += more
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > WRITE_DIFF_BYTES:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
