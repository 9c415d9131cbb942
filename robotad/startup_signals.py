"""SIGTERM and SIGINT before robotad's own handlers are in: remembered, then obeyed.

Until `serve_daemon` opens its signal receiver, Python's dispositions apply: SIGTERM ends the
process wherever it is (a socket file it bound is left behind, a write under way is cut
short) and SIGINT raises ``KeyboardInterrupt`` in whatever code runs. ``robotad run`` calls
`hold()` first, before its heavy imports; from then on such a signal is only recorded, and
`serve_daemon` takes it (`take()`) once its receiver is open, then stops its start-up at the
next checkpoint, undoing what it made and saying so in its log.

Standard library only: it is imported before anything else of the daemon.
"""

from __future__ import annotations

import signal
from types import FrameType

__all__ = ["HELD_SIGNALS", "hold", "take"]

#: The signals that stop robotad: held from `hold()` on, then received by the daemon.
HELD_SIGNALS = (signal.SIGTERM, signal.SIGINT)

_received: list[int] = []


def hold() -> None:
    """Record SIGTERM and SIGINT from now on instead of dying or raising (main thread only)."""
    for signum in HELD_SIGNALS:
        signal.signal(signum, _remember)


def take() -> signal.Signals | None:
    """The first signal recorded since `hold()` and not taken yet (None: none came); forgets
    them all."""
    if not _received:
        return None
    first = signal.Signals(_received[0])
    _received.clear()
    return first


def _remember(signum: int, _frame: FrameType | None) -> None:
    _received.append(signum)
