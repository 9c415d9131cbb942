"""robotactl's exit statuses (PROTOCOL.md §9); scripts rely on these numbers.

- 0 `COMPLETED`: the command did what it was asked (a turn completed).
- 1 `ERROR`: the daemon is unreachable, a call failed (a JSON-RPC error), or anything else
  went wrong.
- 2 `USAGE`: bad command line — unknown option, missing argument, invalid JSON parameters.
  click uses 2 for its usage errors, so the two agree.
- 3 `WAITING`: a turn stopped waiting for approval and there was no terminal to ask on.
- 4 `ABORTED`: the turn was aborted.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["EXIT_CODES_HELP", "ExitCode"]


class ExitCode(IntEnum):
    COMPLETED = 0
    ERROR = 1
    USAGE = 2
    WAITING = 3
    ABORTED = 4


#: The same table for ``--help`` epilogs (``\b`` keeps click from re-flowing it).
EXIT_CODES_HELP = (
    "\b\nExit codes:\n"
    "  0  completed\n"
    "  1  error (daemon unreachable, call failed)\n"
    "  2  usage (bad options, arguments or JSON)\n"
    "  3  waiting for approval (no TTY to ask on)\n"
    "  4  aborted"
)
