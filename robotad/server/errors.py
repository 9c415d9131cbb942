"""Why a daemon does not start, in one exception every step of the start raises."""

from __future__ import annotations

__all__ = ["StartupError"]


class StartupError(Exception):
    """The daemon cannot start; the message says why and is fit to print as is."""
