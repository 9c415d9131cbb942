"""The session's history and the one path by which it changes.

Every message a turn produces goes through `Conversation.commit` — the loop's ``commit``
callback. That is the single place where a recoverable execution's journal write is awaited
before history changes (G-096, G-097): while a `CommitBarrier` is installed, its
``before_append`` runs first, and a failure there leaves history untouched and propagates.
Compaction's summary goes through `apply_compaction` with ``before_compaction`` the same way.

Each change is written to the session log as a ``history_mutation`` (so a replay rebuilds this
history, G-145), and each tool message as a ``tool_result`` — once: a message recovery puts
back that the log holds already is appended with ``logged`` and not written again. The
context tracker measures this history; `state` gives the current `ContextState`.

`revision` counts the changes; the session marks the revision its last successful save held
(`mark_saved`), so `saved` says whether the stored record holds this history exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from protocol.shapes import ContextState, Message
from robotad.agent.loop import open_calls
from robotad.session.context_window import ContextTracker
from robotad.session.reporting import SessionReporter
from robotad.storage import log_events

#: The result of a call a new prompt finds unanswered with nothing to answer it. Nothing
#: here knows whether it ran — an export taken while it ran, or of a session where robotad
#: stopped while it ran, holds it so — so it says so, never "not run" (PROTOCOL.md §10.2,
#: architecture decision 64).
NEVER_ANSWERED = (
    "outcome unknown: nothing here holds this call's execution (the session was imported, or "
    "its journal is gone), so the next prompt closed it without running it; whether it ran "
    "before that is not known (in full, in part or not at all). Check its effect before "
    "running it again."
)

__all__ = ["CommitBarrier", "Conversation"]


class CommitBarrier(Protocol):
    """Awaited before history changes (the recoverable execution's journal). Raising refuses
    the change: nothing is appended or replaced."""

    async def before_append(self, message: Message) -> None: ...

    async def before_compaction(
        self, summary: Message, trigger: Literal["manual", "auto"]
    ) -> None: ...


class Conversation:
    """One session's history (a list owned here; read it, never mutate it elsewhere)."""

    def __init__(
        self, messages: Sequence[Message], reporter: SessionReporter, tracker: ContextTracker
    ) -> None:
        self.messages: list[Message] = list(messages)
        self.tracker = tracker
        self.barrier: CommitBarrier | None = None
        #: Bumped by every change of `messages`.
        self.revision = 0
        self._saved_revision: int | None = None
        self._reporter = reporter

    @property
    def saved(self) -> bool:
        """Whether the last successful save held exactly this history."""
        return self._saved_revision == self.revision

    def mark_saved(self, revision: int) -> None:
        """A save of the history as it was at `revision` succeeded."""
        self._saved_revision = revision

    def state(self) -> ContextState:
        return self.tracker.state(self.messages)

    async def close_unheld_round(self) -> None:
        """Close the calls of the last round that have no result, as failed, before a new
        prompt. A new turn only starts when no execution holds such a round, so these are an
        imported session's, or one whose journal is gone: never run after the prompt, and
        never left between (a provider refuses a call without its result)."""
        for call in open_calls(self.messages):
            await self.commit(Message.tool(call.id, call.name, NEVER_ANSWERED, ok=False))

    async def commit(self, message: Message) -> None:
        """Append one message a turn produced, after the barrier (if any) accepted it."""
        if self.barrier is not None:
            await self.barrier.before_append(message)
        self.append(message)

    def append(self, message: Message, *, logged: bool = False) -> None:
        """Append without a barrier (a user message before a journaled execution starts, an
        injected message, one recovery puts back). `logged`: the session log holds this
        change already (a stopped process, or an earlier recovery, wrote it), so nothing is
        written to it again."""
        self.messages.append(message)
        self.revision += 1
        if logged:
            return
        self._reporter.log(
            "history_mutation", log_events.HistoryMutationEntry(op="append", messages=[message])
        )
        if message.role == "tool":
            self._reporter.tool_result(
                message.tool_call_id if isinstance(message.tool_call_id, str) else "",
                message.name if isinstance(message.name, str) else "",
                message.ok,
                message.content,
            )

    async def apply_compaction(
        self, history: list[Message], trigger: Literal["manual", "auto"]
    ) -> None:
        """Replace history with a compacted one (its last message is the summary), after the
        barrier accepted the summary; forgets the usage measured on the old history."""
        if self.barrier is not None:
            await self.barrier.before_compaction(history[-1], trigger)
        self.replace(history)
        self.tracker.reset()

    def replace(self, history: Sequence[Message]) -> None:
        """History becomes exactly `history`."""
        self.messages[:] = list(history)
        self.revision += 1
        self.tracker.invalidate()
        self._reporter.log(
            "history_mutation",
            log_events.HistoryMutationEntry(op="replace", messages=list(history)),
        )

    async def log_whole(self, *, even_empty: bool = False) -> None:
        """Write the whole history as one ``replace``, so the log's replay starts from what
        this session holds: for a session loaded with history, and with `even_empty` for a
        stored one loaded without (a crash in its first turn left that turn's prompt in the
        log but never in the record, and replay must not bring it back). A history over the
        spill limit names a sidecar, stored on a worker thread (architecture decision 62)."""
        if self.messages or even_empty:
            await self._reporter.store_and_log(
                "history_mutation",
                log_events.HistoryMutationEntry(op="replace", messages=list(self.messages)),
            )
