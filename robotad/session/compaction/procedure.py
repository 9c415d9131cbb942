"""The session's compaction procedure: hooks, events, log, abort and the all-or-nothing apply.

`CompactionProcedure.run` summarises the conversation with the session's current provider
(`robotad.session.compaction.summary.Compactor`) and applies the summary, or changes nothing:

- nothing but system messages: a no-op — ``compacted: false``, no hook, no event, no log entry
  (G-183, G-184);
- otherwise a ``compaction`` event and log entry with phase "started", PreCompact, the
  summary call (text-only, G-172), then the summary replaces history after the commit barrier
  accepted it — system messages first, then the summary (G-175) — the context tracker starts
  over, phase "completed", PostCompact, and the session is saved (a manual compaction is
  saved before "completed": a refused write puts history back, phase "failed", and answers
  `StorageFailed`);
- an empty summary, a provider failure or an idle timeout of the summary call: phase
  "failed" and `CompactionFailed` (G-177, G-210) with history, tracker and stored record as
  they were (G-178);
- an abort during the call, or after it returned but before the summary was applied: phase
  "aborted" and `CompactionAborted`, nothing applied (G-180…G-182). A manual compaction
  settles its abort signal as it applies the summary: an abort after that is not taken
  (answered false) and only stops the PostCompact hook.

The trigger given is the one value every hook input, event, log entry and error carries
(G-055). The caller holds the claim; the abort signal is the claim holder's.
"""

from __future__ import annotations

import logging
from typing import Literal

import trio

from protocol.errors import CompactionAborted, CompactionFailed
from protocol.shapes import Message
from robotad.agent.provider import idle_timeout_reason
from robotad.agent.stream_tap import StreamTap
from robotad.session.compaction.summary import (
    DEFAULT_SUMMARY_TEMPLATE,
    CompactionError,
    CompactionNoOp,
    CompactionResult,
    Compactor,
    prompt_budget,
)
from robotad.session.conversation import Conversation
from robotad.session.hooks.lifecycle import HookLifecycle
from robotad.session.ports import CompactOutcome, SessionCallbacks
from robotad.session.reporting import SessionReporter
from robotad.session.turn.work import TurnContext
from robotad.storage.failure import storage_failed

__all__ = ["CompactionProcedure"]

logger = logging.getLogger("robotad.session.compaction.summary")

Trigger = Literal["manual", "auto"]


class CompactionProcedure:
    """Compacts one session's conversation; see the module doc."""

    def __init__(
        self,
        session_id: str,
        conversation: Conversation,
        lifecycle: HookLifecycle,
        reporter: SessionReporter,
        session: SessionCallbacks,
        *,
        template: str | None = None,
        idle_timeout: float | None = None,
    ) -> None:
        self._session_id = session_id
        self._conversation = conversation
        self._lifecycle = lifecycle
        self._reporter = reporter
        self._session = session
        self.template = template or DEFAULT_SUMMARY_TEMPLATE
        self.idle_timeout = idle_timeout

    async def run(
        self, turn: TurnContext, *, trigger: Trigger, instructions: str | None = None
    ) -> CompactOutcome:
        """Compact now, under `turn`'s abort signal; raises `CompactionFailed` or
        `CompactionAborted` (history untouched), or whatever the commit barrier raises."""
        conversation = self._conversation
        before = conversation.state()
        if all(message.role == "system" for message in conversation.messages):
            return CompactOutcome(False, before, before)
        self._reporter.compaction(turn.turn_id, trigger, "started")
        result: CompactionResult | CompactionNoOp | None = None
        with turn.abort.scope():
            await self._lifecycle.pre_compact(turn, trigger, instructions)
            result = await self._summarise(turn, trigger, instructions)
        # A manual compaction's outcome is decided here: an abort from now on only stops the
        # PostCompact hook. An automatic one belongs to its turn, which settles later.
        settled = turn.abort.settle() if trigger == "manual" else not turn.abort.aborted
        if not settled or result is None:
            self._reporter.compaction(turn.turn_id, trigger, "aborted")
            raise CompactionAborted(self._session_id, trigger)
        if isinstance(result, CompactionNoOp):  # history changed under us: nothing left
            self._reporter.compaction(turn.turn_id, trigger, "completed")
            return CompactOutcome(False, before, conversation.state())
        kept, latest_usage = list(conversation.messages), conversation.tracker.latest_usage
        try:
            await conversation.apply_compaction(result.history, trigger)
            if trigger == "manual":
                await self._persist_manual(kept, latest_usage)
        except Exception:
            self._reporter.compaction(turn.turn_id, trigger, "failed")
            raise
        if trigger != "manual":
            # Saved before it is told completed, as a manual one is: a daemon stopped during
            # the PostCompact hook had logged "completed" over a record without it. Before the
            # turn's prompt enters history, so the record holds no half turn; a refused write
            # is the turn's own save's to retry (best effort, as that one is).
            await self._session.save()
        after = conversation.state()
        self._reporter.compaction(turn.turn_id, trigger, "completed")
        with turn.abort.scope():  # a late abort stops the hook: the compaction stands, saved
            await self._lifecycle.post_compact(turn, trigger, result.summarized)
        return CompactOutcome(True, before, after)

    async def _persist_manual(self, kept: list[Message], latest_usage: int | None) -> None:
        """A manual compaction is done only once saved: a refused write puts the history back
        as it was (`kept`), with the usage its figures counted (`latest_usage`, G-178), and
        answers `StorageFailed` (PROTOCOL §10.1), so a client told it failed never finds it
        done, and compacting again starts from the same history."""
        try:
            with trio.CancelScope(shield=True):
                await self._session.persist()
        except Exception as exc:
            refused = storage_failed(exc, self._session_id)
            if refused is None:
                raise
            self._conversation.replace(kept)
            self._conversation.tracker.restore(latest_usage)
            raise refused from exc

    async def _summarise(
        self, turn: TurnContext, trigger: Trigger, instructions: str | None
    ) -> CompactionResult | CompactionNoOp:
        window = self._conversation.tracker.max_tokens
        compactor = Compactor(
            self._session.provider(), self.template, max_chars=prompt_budget(window)
        )
        try:
            with trio.CancelScope() as idle:
                tap = StreamTap(idle, self.idle_timeout)
                return await compactor.compact(
                    list(self._conversation.messages),
                    trigger=trigger,
                    instructions=instructions,
                    observer=tap,
                )
            reason = idle_timeout_reason(
                compactor.provider, self.idle_timeout, replying=tap.replying
            )
        except CompactionError as exc:
            reason = exc.reason
        except Exception as exc:
            logger.warning("compaction provider raised %s", type(exc).__name__)
            reason = f"unexpected {type(exc).__name__} from the provider"
        if turn.abort.aborted:
            # A provider that turned the abort's cancellation into an error: still an abort.
            self._reporter.compaction(turn.turn_id, trigger, "aborted")
            raise CompactionAborted(self._session_id, trigger)
        self._reporter.compaction(turn.turn_id, trigger, "failed")
        raise CompactionFailed(self._session_id, trigger, reason)
