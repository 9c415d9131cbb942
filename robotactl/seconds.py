"""`Seconds`: a command-line option that is a finite, non-negative number of seconds.

click's `FloatRange` lets ``nan`` and ``inf`` through (every comparison with nan is false), and
either becomes a traceback or a JSON ``null`` further on; this type refuses them as the usage
errors they are, and says "'soon' is not a number of seconds" of what is no number at all.
"""

from __future__ import annotations

import math
from typing import Any

import click

__all__ = ["Seconds"]


class Seconds(click.FloatRange):
    """Seconds, at least `minimum`, finite."""

    name = "seconds"

    def __init__(self, minimum: float = 0.0) -> None:
        super().__init__(min=minimum)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str):
            try:
                float(value)
            except ValueError:  # click's own words would be "is not a valid seconds"
                self.fail(f"{value!r} is not a number of seconds", param, ctx)
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number of seconds", param, ctx)
        return number
