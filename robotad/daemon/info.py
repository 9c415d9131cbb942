"""What the daemon says about a session: `SessionInfo` of a live one, a ``session/list`` row.

`session_info` reads only in-memory state (it runs inline in the connection's reader):
``messageCount`` is the number of messages in history, ``turnCount`` the completed turns,
``running`` whether a turn, compaction or direct execution holds the session (or the manager
has started one that has not finished), ``pending`` the parked execution if any, and
``context`` the session's current `ContextState`.

`session_summary` merges a stored row with the live session of the same id, if loaded: the
live one is fresher (its history may hold messages a running turn has not saved yet). A damaged
record's members that could not be read are null (PROTOCOL §5); it is listed, never hidden
(G-006). `newest_first` is the list order: newest ``updatedAt`` first, rows without a
readable instant last.
"""

from __future__ import annotations

from datetime import datetime

from msgspec import UNSET

from protocol.methods import SessionSummary
from protocol.shapes import SessionInfo
from robotad.daemon.live import LiveSession
from robotad.storage.store import StoredSession

__all__ = ["newest_first", "session_info", "session_summary"]


def session_info(live: LiveSession) -> SessionInfo:
    """The ``SessionInfo`` of a loaded session."""
    session = live.session
    return SessionInfo(
        session_id=session.session_id,
        cwd=str(session.cwd),
        provider=session.provider_name,
        model=session.model,
        permission_mode=session.permission_mode,  # type: ignore[arg-type]
        created_at=live.writer.created_at,
        updated_at=live.writer.updated_at,
        message_count=len(session.get_history()),
        turn_count=session.turn_count,
        running=live.busy,
        pending=live.pending(),
        context=session.get_context_state(),
        idle_timeout_ms=session.idle_timeout_ms,
        max_rounds=session.round_cap,
        instructions=UNSET if session.instructions is None else list(session.instructions),
        sandbox=session.sandbox.mode,
    )


def session_summary(
    row: StoredSession, live: LiveSession | None, *, parked: bool = False
) -> SessionSummary:
    """One ``session/list`` entry for a stored record and, when loaded, its live session.
    `parked`: an unloaded session's journal holds a parked execution (it is ``waiting``)."""
    title = UNSET if row.title is None else row.title
    forked_from = UNSET if row.forked_from is None else row.forked_from.session_id
    if live is not None and row.status == "ok":
        return SessionSummary(
            session_id=row.session_id,
            cwd=str(live.session.cwd),
            created_at=live.writer.created_at,
            updated_at=live.writer.updated_at,
            message_count=len(live.session.get_history()),
            loaded=True,
            running=live.busy,
            waiting=live.pending() is not None,
            status="ok",
            title=title,
            forked_from=forked_from,
        )
    damaged = row.status != "ok"
    return SessionSummary(
        session_id=row.session_id,
        cwd=(row.cwd or None) if damaged else row.cwd,
        created_at=(row.created_at or None) if damaged else row.created_at,
        updated_at=(row.updated_at or None) if damaged else row.updated_at,
        message_count=(row.message_count or None) if damaged else row.message_count,
        loaded=False,
        running=False,
        waiting=parked and not damaged,
        status=row.status,
        title=title,
        forked_from=forked_from,
    )


def newest_first(summary: SessionSummary) -> tuple[int, float, str]:
    """Sort key: newest ``updatedAt`` first; rows without a readable instant after them."""
    text = summary.updated_at
    if text:
        try:
            when = datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
        else:
            return (0, -when, summary.session_id)
    return (1, 0.0, summary.session_id)
