"""Which sessions wait for a person without being loaded (PROTOCOL §10.2).

``session/list`` and ``daemon/status`` count a session with a parked execution as waiting,
loaded or not, from the daemon's first moment. A loaded session says so itself
(`LiveSession.pending`); for the others, `ParkedSessions` keeps the ids:

- at start-up, before the daemon is ready, `scan` reads every session's journal folder
  (``journal/<id>/<execution>.jsonl``) without loading anything: a session waits when one of
  its executions never finished and its last journaled reply has a call without a result —
  what loading the session would find pending (`RecoverableExecutions.recover`: every result
  is journaled before it enters history, so the journal holds every result the record
  does). That call was waiting for its approval, approved and not yet started (the daemon
  stopped in between), running (after the restart: uncertain), or not yet asked about. An
  execution whose calls all have results is not waiting, though it asked for approval: it
  was cut off after the calls, on its way to the next reply. A journal that cannot be
  decoded counts as waiting — corruption is never read as "nothing pending" — and a torn
  final line (a write that never returned) is ignored, as the journal's own repair would. A
  journal folder whose session has no record (removed by hand) is no session's and skipped;
  and a session whose record has no call without a result does not wait, whatever its
  journal holds: loading finds nothing pending then (an abandon saved its closed round and
  robotad stopped before it discarded the journal, which it never marks finished). Only
  the records of sessions whose journal waits are read;
- when a session is unloaded, `note` records what its live session knew;
- when a session is deleted, `discard` forgets it.

Files are only ever read, with ``O_NOFOLLOW``; a symlink or other non-regular file in place of
a journal is corruption (waiting), a folder that is not a safe session id is skipped.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Container
from pathlib import Path

from robotad.agent.loop import open_calls
from robotad.storage.fsio import read_regular
from robotad.storage.ids import is_safe_session_id
from robotad.storage.journal import JournalCorrupt, decode_journal
from robotad.storage.journal_records import (
    EffectFinishedRecord,
    FinishedRecord,
    JournalRecord,
    ReplyRecord,
)
from robotad.storage.record import Valid
from robotad.storage.store import FileSessionStore, Missing

__all__ = ["ParkedSessions", "journal_waits", "record_round_open"]

log = logging.getLogger("robotad.daemon")

_SUFFIX = ".jsonl"


class ParkedSessions:
    """The ids of unloaded sessions that wait for approval."""

    def __init__(self) -> None:
        self._ids: set[str] = set()

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._ids

    def scan(
        self,
        state_dir: Path,
        has_record: Callable[[str], bool],
        round_open: Callable[[str], bool],
    ) -> None:
        """Blocking: learn every waiting session from the journals under `state_dir`; a
        session counts only when `has_record` (the store's own test) says it is stored and,
        once its journal waits, `round_open` (`record_round_open`) says its record does."""
        root = Path(state_dir) / "journal"
        try:
            entries = list(os.scandir(root))
        except (FileNotFoundError, NotADirectoryError):
            return
        for entry in entries:
            if not is_safe_session_id(entry.name) or not entry.is_dir(follow_symlinks=False):
                continue
            if not has_record(entry.name):
                continue
            try:
                waits = journal_waits(Path(entry.path))
            except OSError as exc:
                log.warning("cannot read the journal of %s: %s", entry.name, exc.strerror)
                waits = True
            if waits and round_open(entry.name):
                self._ids.add(entry.name)

    def note(self, session_id: str, *, waiting: bool) -> None:
        """What an unloading session knew: whether it waits."""
        if waiting:
            self._ids.add(session_id)
        else:
            self._ids.discard(session_id)

    def discard(self, session_id: str) -> None:
        self._ids.discard(session_id)

    def count_unloaded(self, loaded: Container[str]) -> int:
        """How many waiting sessions are not among `loaded`."""
        if not self._ids:
            return 0
        return sum(1 for session_id in self._ids if session_id not in loaded)


def journal_waits(folder: Path) -> bool:
    """Blocking: whether any execution journaled in `folder` never finished and left a call
    of its last reply without a result (or cannot be read: see the module docstring)."""
    for entry in os.scandir(folder):
        if not entry.name.endswith(_SUFFIX):
            continue
        try:
            data = read_regular(Path(entry.path))
        except OSError:
            return True
        if data is None:
            continue
        complete = data[: data.rfind(b"\n") + 1]
        try:
            records = decode_journal(entry.name.removesuffix(_SUFFIX), complete)
        except JournalCorrupt:
            return True
        if _open_calls(records):
            return True
    return False


def record_round_open(store: FileSessionStore, session_id: str) -> bool:
    """Blocking: whether the stored record of `session_id` ends in a round with a call
    without a result, the one thing loading can find pending. A record that cannot be read
    or does not load counts as open (never read as "nothing pending"); a missing one not."""
    try:
        outcome = store.load(session_id)
    except OSError:
        return True
    if isinstance(outcome, Missing):
        return False
    return not isinstance(outcome, Valid) or bool(open_calls(outcome.record.messages))


def _open_calls(records: list[JournalRecord]) -> bool:
    """Whether an unfinished execution's last reply has a call without a result."""
    last_reply: ReplyRecord | None = None
    answered: set[str] = set()
    for record in records:
        if isinstance(record, FinishedRecord):
            return False
        if isinstance(record, ReplyRecord):
            last_reply = record
        elif isinstance(record, EffectFinishedRecord):
            answered.add(record.call_id)
    calls = last_reply.message.calls if last_reply is not None else []
    return any(call.id not in answered for call in calls)
