"""How a ``session/log`` report says it left problems out (PROTOCOL §5), for both sides.

A report lists a bounded number of problems (architecture decision 49); when there were more,
its last problem has no ``line`` and no ``event`` and says how many more there are. The daemon
writes that message with `left_out_message`, and a client reads the count back with
`left_out_count` to tell the whole number of problems, not only those listed.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["left_out_count", "left_out_message"]

_LEFT_OUT: Final = re.compile(r"([1-9][0-9]*) more problems? not listed")


def left_out_message(count: int) -> str:
    """The message of the problem that stands for `count` (≥ 1) problems not listed."""
    noun = "problem" if count == 1 else "problems"
    return f"{count} more {noun} not listed"


def left_out_count(message: str) -> int | None:
    """How many problems the problem whose message is `message` stands for, when it is the
    one `left_out_message` writes; None for any other message."""
    matched = _LEFT_OUT.fullmatch(message)
    return int(matched.group(1)) if matched else None
