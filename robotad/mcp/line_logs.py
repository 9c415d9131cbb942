"""What a stdio MCP server writes besides its answers, into robotad's log, bounded.

`LineLog` logs a server's lines at most `LineLog.LINES_PER_MINUTE` a minute and says once how
many it left out; `StderrLog` is a server's stderr, `StdoutNoiseLog` the lines of its stdout
that are not JSON-RPC, skipped after the handshake (`robotad.mcp.stdio`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

from robotad.log import fields

__all__ = ["LineLog", "StderrLog", "StdoutNoiseLog"]

log = logging.getLogger("robotad.mcp")


class LineLog:
    """Lines a server wrote, into robotad's log at most `LINES_PER_MINUTE` a minute: a server
    that floods it cannot drown the log, nor make the journal's rate limit drop robotad's own
    lines; how many were left out is said once the minute is over (or the stream ends).
    `_log` logs one line, `_left_out` how many were not."""

    LINES_PER_MINUTE: Final = 200

    def __init__(self, server: str, clock: Callable[[], float]) -> None:
        self.server = server
        self.clock = clock
        self._window_start = clock()
        self._logged = 0
        self._left_out = 0

    def line(self, text: str) -> None:
        if self.clock() - self._window_start >= 60:
            self.flush()
            self._window_start = self.clock()
            self._logged = 0
        if self._logged >= self.LINES_PER_MINUTE:
            self._left_out += 1
            return
        self._logged += 1
        self._log(text)

    def flush(self) -> None:
        """Say how many lines were left out, if any."""
        if self._left_out:
            self._say_left_out(self._left_out)
            self._left_out = 0

    def _log(self, text: str) -> None:
        raise NotImplementedError

    def _say_left_out(self, count: int) -> None:
        raise NotImplementedError


class StderrLog(LineLog):
    """A server's stderr, line by line (3 MB of it became 15,000 log lines)."""

    def _log(self, text: str) -> None:
        log.info("stderr: %s", text, extra=fields(mcp_server=self.server))

    def _say_left_out(self, count: int) -> None:
        log.info(
            "stderr: %d more lines not logged (over %d a minute)",
            count,
            self.LINES_PER_MINUTE,
            extra=fields(mcp_server=self.server),
        )


class StdoutNoiseLog(LineLog):
    """The lines of a server's stdout that are not JSON-RPC, skipped after the handshake: a
    server that prints as it works (a stray ``print``) made one warning of every line."""

    def _log(self, text: str) -> None:
        log.warning(
            "skipped a stdout line that is not JSON-RPC",
            extra=fields(mcp_server=self.server, line=text),
        )

    def _say_left_out(self, count: int) -> None:
        log.warning(
            "skipped %d more stdout lines that are not JSON-RPC without logging them (over %d "
            "a minute)",
            count,
            self.LINES_PER_MINUTE,
            extra=fields(mcp_server=self.server),
        )
