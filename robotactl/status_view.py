"""The ``status`` table: how a ``daemon/status`` result reads to a person.

Shared by ``robotactl status`` through click and by `robotactl.entry`'s quick path, so it
imports neither click nor msgspec nor `typing`: only `datetime`.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

__all__ = ["format_uptime", "status_rows"]


def status_rows(result: Mapping[str, object], *, now: datetime) -> list[tuple[str, str]]:
    """The human ``status`` table for a ``daemon/status`` result; absent members show ``?``."""

    def get(name: str) -> str:
        value = result.get(name)
        return "?" if value is None else str(value)

    version = get("version")
    if result.get("protocolVersion") is not None:
        version += f" (protocol {result['protocolVersion']})"
    started = result.get("startedAt")
    uptime = "?"
    if isinstance(started, str):
        try:
            since = datetime.fromisoformat(started)
        except ValueError:
            uptime = f"? (started {started})"
        else:
            if since.tzinfo is None:
                since = since.replace(tzinfo=UTC)
            seconds = (now - since).total_seconds()
            uptime = f"{format_uptime(seconds)} (since {started})"
    sessions = result.get("sessions")
    if isinstance(sessions, Mapping):
        counts = ", ".join(
            f"{sessions.get(kind, '?')} {kind}" for kind in ("loaded", "running", "waiting")
        )
    else:
        counts = "?"
    return [
        ("version", version),
        ("pid", get("pid")),
        ("uptime", uptime),
        ("socket", get("socketPath")),
        ("state dir", get("stateDir")),
        ("sessions", counts),
    ]


def format_uptime(seconds: float) -> str:
    """``42s``, ``5m 07s``, ``2h 03m``, ``3d 04h``: the two largest units, floored."""
    total = max(0, int(seconds))
    days, rest = divmod(total, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours:02d}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"
