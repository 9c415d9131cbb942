"""The editor's pipe: stdin and stdout as one trio stream, and stdout kept for ACP alone.

`editor_stream` takes a private duplicate of stdout for the protocol and points file
descriptor 1 at stderr, so a stray ``print`` (ours or a library's) can never corrupt the
NDJSON stream the editor parses: only the returned stream writes there.
"""

from __future__ import annotations

import os
import sys

import trio

__all__ = ["editor_stream"]


def editor_stream() -> trio.StapledStream[trio.lowlevel.FdStream, trio.lowlevel.FdStream]:
    """A stream reading the editor's messages from stdin and writing ours to stdout."""
    sys.stdout.flush()
    protocol_out = os.dup(1)
    os.dup2(2, 1)
    return trio.StapledStream(
        trio.lowlevel.FdStream(protocol_out), trio.lowlevel.FdStream(os.dup(0))
    )
