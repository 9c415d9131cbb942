"""Closing, in a session's log, what a stop of robotad cut off (the ``recovered`` entry).

A SIGKILL or crash leaves a session log with provider requests that never got a response and
tool calls that never got a result, and ``session/log`` would call it incomplete for good.
When a stored session is loaded, `close_cut_off` looks at its log: a log whose last line is
``session_end`` (a clean close) or ``recovered`` is left alone at the cost of reading its tail;
otherwise every open request and call is closed by one ``recovered`` entry saying what is
known — a call whose result the history holds (put back from the journal) is ``completed`` or
``failed``, any other ``unknown``; a compaction it cut off (a "started" with no end) is
named by its trigger: it never finished, and a compaction saves all or nothing, so the
history is as it was before it — so the log is complete again and still tells of the crash.
A call still parked for approval is not cut off and stays open. Writing the entry is
best effort: a log that cannot be read or appended is noted in the daemon's log, nothing more
(the session loads all the same).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Literal

import trio
from msgspec import UNSET

from robotad.agent.loop import open_calls
from robotad.log import fields
from robotad.session.session import Session
from robotad.storage import fsio, log_events
from robotad.storage.log_files import FileLogSink, FileLogSource, log_paths
from robotad.storage.log_replay import cut_off
from robotad.storage.session_log import SessionLogger

__all__ = ["REASON", "close_cut_off"]

log = logging.getLogger("robotad.daemon")

Outcome = Literal["completed", "failed", "unknown"]
REASON = "robotad stopped (killed or crashed) while these were open"
#: How much of a log's end is read to find its last line.
_TAIL_BYTES = 64 * 1024
_SETTLED_MARKS = (b'"event":"session_end"', b'"event":"recovered"')


async def close_cut_off(session: Session, logs_dir: Path) -> bool:
    """Write the ``recovered`` entry `session`'s log needs, if any; True when one was written.
    Call after the session's pending execution was recovered, before it runs anything."""
    path = log_paths(logs_dir, session.session_id)[0]
    try:
        if not await trio.to_thread.run_sync(_may_be_cut_off, path):
            return False
        requests, calls, compaction = await trio.to_thread.run_sync(cut_off, FileLogSource(path))
    except OSError as exc:
        # A log that cannot be read (a folder, a FIFO or a link in its place, no permission)
        # is no reason to refuse the session: `session/log` names it.
        where = fields(session_id=session.session_id)
        log.warning("cannot read a session log: %s", exc, extra=where)
        return False
    history = session.get_history()
    pending = session.get_pending_execution()
    uncertain = set(pending.uncertain or []) if pending is not None else set()
    parked = {call.id for call in open_calls(history)} - uncertain if pending else set()
    results = {m.tool_call_id: m.ok for m in history if m.role == "tool"}
    closed = []
    for call_id in calls:
        if call_id in parked:
            continue
        ok = results.get(call_id)
        outcome: Outcome = "unknown" if ok is None else ("completed" if ok else "failed")
        closed.append(log_events.RecoveredCall(call_id=call_id, outcome=outcome))
    if not requests and not closed and compaction is None:
        return False
    entry = log_events.RecoveredEntry(
        reason=REASON,
        request_ids=requests,
        calls=closed,
        compaction=compaction if compaction is not None else UNSET,
    )
    logger = SessionLogger(session.session_id, FileLogSink(path))
    try:
        await trio.to_thread.run_sync(logger.log, "recovered", entry)
    except OSError as exc:
        where = fields(session_id=session.session_id)
        log.warning("cannot close a cut-off session log: %s", exc, extra=where)
        return False
    finally:
        logger.close()
    return True


def _may_be_cut_off(path: Path) -> bool:
    """False when the log is missing or its last line marks it settled (module doc)."""
    fd = fsio.open_regular(path)
    if fd is None:
        return False
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - _TAIL_BYTES)
        tail = os.pread(fd, size - start, start)
    finally:
        os.close(fd)
    last = tail.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    return bool(last) and not any(mark in last for mark in _SETTLED_MARKS)
