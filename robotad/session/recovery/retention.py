"""Which settled executions' journals a session keeps, when its host lets it retire them.

The journal is the host's (G-099). A library host keeps every journal; robotad lets its
sessions retire them (``Session(discard_settled_journals=True)``) so that a session running for
days holds a bounded journal — on disk, in the journal's index and at load. `JournalRetention`
decides, for `recoverable.RecoverableExecutions`:

- an execution that asked for no approval is discarded as soon as the saved record holds its
  outcome (`retire`): nobody can redeliver an answer to it;
- any other settled execution is kept (`keep`) until `JOURNALS_KEPT` more have settled after
  it — the window in which a redelivered answer is still idempotent (G-084); past it, a
  redelivery is stale;
- at load (`prune`), every execution but the pending one and the `JOURNALS_KEPT` most recently
  written is discarded: what earlier runs left, a file a crash kept from being discarded
  included (order by last write is all that survives a restart; a file brought back that way
  takes a slot of the window until it ages out).

Discards made here are not durable (no folder fsync: a file a crash brings back is pruned at a
later load) and never fail the turn: a discard that fails is logged and left for `prune`. With
retention off every method does nothing.
"""

from __future__ import annotations

import collections
import logging

from robotad.storage.journal import ExecutionJournal

__all__ = ["JOURNALS_KEPT", "JournalRetention"]

logger = logging.getLogger("robotad.session.recovery.retention")

#: Settled executions with approvals whose journal a retiring session keeps.
JOURNALS_KEPT = 64


class JournalRetention:
    """The retention of one session's journals (see the module doc)."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        #: Settled executions whose journal is kept, least recently settled first.
        self._kept: collections.deque[str] = collections.deque()

    async def retire(self, journal: ExecutionJournal, execution_id: str) -> None:
        """Discard the journal of a settled execution nothing can need any more."""
        if self.enabled:
            await self._discard(journal, execution_id)

    async def keep(self, journal: ExecutionJournal, execution_id: str) -> None:
        """Keep a settled execution's journal; discard the one kept `JOURNALS_KEPT`
        settlements ago."""
        if not self.enabled:
            return
        self._kept.append(execution_id)
        while len(self._kept) > JOURNALS_KEPT:
            await self._discard(journal, self._kept.popleft())

    async def prune(
        self, journal: ExecutionJournal, executions: list[str], pending: str | None
    ) -> None:
        """At load: keep `pending` and the `JOURNALS_KEPT` most recently written of the
        others (`executions` lists them least recently written first); discard the rest."""
        if not self.enabled:
            return
        settled = [execution_id for execution_id in executions if execution_id != pending]
        cut = max(0, len(settled) - JOURNALS_KEPT)
        for execution_id in settled[:cut]:
            await self._discard(journal, execution_id)
        self._kept = collections.deque(settled[cut:])

    async def _discard(self, journal: ExecutionJournal, execution_id: str) -> None:
        try:
            await journal.discard(execution_id, durable=False)
        except Exception:
            logger.warning("discarding the journal of execution %s failed", execution_id)
