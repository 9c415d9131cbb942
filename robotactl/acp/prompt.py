"""``session/prompt``: one robotad turn, driven from the editor until it stops.

`PromptDriver.run` starts the turn (``session/run`` with a fresh ``turnId``, its request
left running in the background like every ``session/resume`` after it) and follows the turn's
events (`Attachment.watch_turn`); the prompt is answered once those requests have returned too,
so robotad has let go of the turn and takes the next prompt at once:

- completed → ``end_turn`` (``max_turn_requests`` when robotad stopped it at ``maxRounds``);
- aborted → ``cancelled``; failed → the JSON-RPC error robotad reported, as it reported it;
- waiting → each request becomes a ``session/request_permission``; the answers go back with
  ``session/resume`` (after ``session/addRule`` for an "always"), and the driver follows the
  turn again. If the approval is
  answered elsewhere meanwhile (a terminal's ``robotactl approve``, another editor) the
  editor's question is withdrawn and the turn simply goes on.

`cancel` (the editor's ``session/cancel``) aborts a running turn; a turn waiting for approval
is abandoned (nothing of it runs; its open calls close as failed) — the prompt ends
``cancelled`` either way. A cancel while an approval left parked is settled first (asked
again, or its approved execution running) ends the prompt there too: its own turn never
starts (decision 71). An editor that goes away is different: nothing is aborted or abandoned,
the turn goes on in robotad and an unanswered approval stays parked there.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Iterator
from typing import Any

import msgspec
import trio

from protocol.errors import RpcError, StaleResponse, TurnAborted
from protocol.events import ApprovalRequested, ErrorObject, TurnFinished, TurnStarted
from protocol.jsonrpc import ConnectionLost, MalformedResponse
from protocol.methods import HistoryResult, PendingResult
from protocol.peer import JsonRpcPeer
from protocol.shapes import ApprovalRequest
from robotactl.acp.attachment import Attachment, TurnEvents
from robotactl.acp.permissions import Answer, always_rule, answer_of, request_params
from robotactl.acp.schema import RequestPermissionResult, StopReason
from robotactl.acp.tool_view import describe_call

__all__ = ["PromptDriver"]

logger = logging.getLogger("robotactl.acp")


class _AnsweredElsewhere(Exception):
    """The execution moved on while the editor was being asked."""


@contextlib.contextmanager
def _unwrapped(kind: type[Exception]) -> Iterator[None]:
    """Let an exception of `kind` that a nursery wrapped in a group leave as itself (when
    it is all the group holds), so the caller's ``except kind`` sees it."""
    try:
        yield
    except BaseExceptionGroup as group:
        matched, rest = group.split(kind)
        if matched is None or rest is not None:
            raise
        first = matched.exceptions[0]
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        raise first from None


class _EditorGone(Exception):
    """The editor went away while it was being asked: the approval stays parked."""


class PromptDriver:
    """One prompt of the editor in `attachment`'s session."""

    def __init__(
        self, attachment: Attachment, robotad: JsonRpcPeer, editor: JsonRpcPeer, *, arrival: int = 0
    ) -> None:
        #: Where the prompt came in the editor connection's order (`CallContext.arrival`).
        self.arrival = arrival
        self._attachment = attachment
        self._robotad = robotad
        self._editor = editor
        self._cancelled = trio.Event()
        #: An abort robotad refused because the turn had not started yet: asked again at
        #: the turn's first event (a cancel right after the prompt must still stop it).
        self._abort_pending = False
        self._session_id = attachment.session_id
        #: The turn this prompt runs (set once it starts).
        self.turn_id: str | None = None

    async def cancel(self) -> None:
        """The editor cancelled: stop the turn (it ends the prompt ``cancelled``)."""
        if self._cancelled.is_set():
            return
        self._cancelled.set()
        await self._abort()

    async def _abort(self) -> None:
        result = await self._robotad.request("session/abort", {"sessionId": self._session_id})
        self._abort_pending = not (isinstance(result, dict) and result.get("aborted"))

    async def run(self, text: str) -> StopReason:
        """Run the turn for `text` and return why it stopped (once robotad has answered every
        request of it, so the session takes the next prompt at once). An approval left
        parked in the session (its editor went away, or it was asked elsewhere) is settled
        with this editor first: asked again, then resumed or, when cancelled, abandoned."""
        try:
            if not await self._settle_parked():
                return "cancelled"
        except _EditorGone:
            return "cancelled"
        turn_id = self.turn_id = f"turn-{uuid.uuid4().hex}"
        self._attachment.translator.own_turns.add(turn_id)
        with self._attachment.watch_turn(turn_id) as events:
            run = {"sessionId": self._session_id, "prompt": text, "turnId": turn_id}
            async with trio.open_nursery() as requests:
                requests.start_soon(self._request, events, "session/run", run)
                return await self._follow(events, requests)

    async def _request(self, events: TurnEvents, method: str, params: dict[str, Any]) -> None:
        """Start or continue the turn; its progress arrives as events. An abort, or an
        answer robotad no longer wants (someone answered first), is not an error here; any
        other error ends the prompt with it."""
        try:
            await self._robotad.request(method, params)
        except (StaleResponse, TurnAborted) as exc:
            logger.info("session %s: %s: %s", self._session_id, method, exc.message)
        except RpcError as exc:
            events.fail(exc)

    async def _follow(self, events: TurnEvents, requests: trio.Nursery) -> StopReason:
        try:
            return await self._follow_events(events, requests)
        except _EditorGone:
            return "cancelled"  # nobody to tell; the approval stays parked in robotad

    async def _follow_events(self, events: TurnEvents, requests: trio.Nursery) -> StopReason:
        waiting: ApprovalRequested | None = None
        while True:
            event = await events.receive()
            if isinstance(event, TurnStarted):
                if self._abort_pending:
                    await self._abort()  # the cancel came before the turn: it has started now
                continue
            if isinstance(event, ApprovalRequested):
                waiting = event
            elif isinstance(event, TurnFinished):
                if event.status == "completed":
                    return _completed_reason(event)
                if event.status == "aborted":
                    return "cancelled"
                if event.status == "failed":
                    raise _error_of(event)
                if waiting is None:  # not expected: robotad reports the requests first
                    waiting = await self._pending(event)
                    if waiting is None:
                        continue
                if self._cancelled.is_set():
                    return await self._abandon(waiting.execution_id)
                try:
                    answers = await self._ask(waiting, events)
                except _AnsweredElsewhere:
                    continue
                if answers is None:
                    return await self._abandon(waiting.execution_id)
                await self._remember(answers)
                requests.start_soon(
                    self._request, events, "session/resume", _resume(waiting, answers)
                )
                waiting = None

    async def _ask(
        self, waiting: ApprovalRequested, events: TurnEvents
    ) -> list[tuple[ApprovalRequest, Answer]] | None:
        """The editor's answer to each request, None if it cancelled. Raises
        `_AnsweredElsewhere` when robotad reports another answer (or the turn moving on)
        first."""
        outcome: list[tuple[ApprovalRequest, Answer]] | _AnsweredElsewhere | None = (
            _AnsweredElsewhere()
        )
        with _unwrapped(_EditorGone):
            async with trio.open_nursery() as nursery:

                async def ask_each() -> None:
                    nonlocal outcome
                    answers: list[tuple[ApprovalRequest, Answer]] = []
                    for request in waiting.requests:
                        answer = await self._ask_one(request)
                        if answer is None:
                            outcome = None
                            break
                        answers.append((request, answer))
                    else:
                        outcome = answers
                    nursery.cancel_scope.cancel()

                async def until_cancelled() -> None:
                    nonlocal outcome
                    await self._cancelled.wait()
                    outcome = None
                    nursery.cancel_scope.cancel()

                nursery.start_soon(ask_each)
                nursery.start_soon(until_cancelled)
                # Any event now means the execution moved on without this editor (answered
                # elsewhere, or abandoned): stop asking; the follower reads the event again.
                events.push_back(await events.receive())
                nursery.cancel_scope.cancel()
        if isinstance(outcome, _AnsweredElsewhere):
            raise outcome
        return outcome

    async def _ask_one(self, request: ApprovalRequest) -> Answer | None:
        translator = self._attachment.translator
        call_id = translator.call_id_for(request)
        view = translator.view_of(call_id) or describe_call(request.tool, request.arguments)
        rule = always_rule(request, self._attachment.cwd)
        params = request_params(self._session_id, call_id, view, request, rule)
        try:
            result = await self._editor.request(
                "session/request_permission", params, result_type=RequestPermissionResult
            )
        except ConnectionLost:
            raise _EditorGone from None
        except (RpcError, MalformedResponse) as exc:
            # An editor that cannot answer has not said yes: as a cancelled question.
            logger.warning("session %s: the editor's permission answer: %s", self._session_id, exc)
            return None
        return answer_of(result, rule)

    async def _settle_parked(self) -> bool:
        """Settle an execution parked in the session before a new turn (see `run`): False
        when the editor cancelled — while asked, or while the execution it approved ran —
        (the prompt then ends ``cancelled`` and its own turn never starts: decision 71)."""
        while True:
            result = await self._robotad.request(
                "session/pending", {"sessionId": self._session_id}, result_type=PendingResult
            )
            pending = result.pending
            if pending is None:  # a cancel while a resumed execution ran cancels this prompt
                return not self._cancelled.is_set()
            if pending.uncertain or self._cancelled.is_set():
                # outcome unknown: never run again, closed as failed; or cancelled meanwhile
                await self._abandon(pending.execution_id)
                continue
            answers: list[tuple[ApprovalRequest, Answer]] = []
            for request in pending.requests:
                answer = await self._ask_one(request)
                if answer is None or self._cancelled.is_set():
                    await self._abandon(pending.execution_id)
                    return not self._cancelled.is_set() and answer is not None
                answers.append((request, answer))
            await self._remember(answers)
            waiting = ApprovalRequested(
                self._session_id, 0, "", pending.execution_id, pending.requests
            )
            with contextlib.suppress(StaleResponse, TurnAborted):
                await self._robotad.request("session/resume", _resume(waiting, answers))

    async def _remember(self, answers: list[tuple[ApprovalRequest, Answer]]) -> None:
        for _request, answer in answers:
            if answer.rule is not None:
                rule = {"sessionId": self._session_id, "rule": answer.rule, "kind": "allow"}
                await self._robotad.request("session/addRule", {**rule, "scope": "session"})

    async def _pending(self, finished: TurnFinished) -> ApprovalRequested | None:
        """The parked execution of the turn `finished` reported waiting, from robotad (None
        when it was answered meanwhile)."""
        result = await self._robotad.request(
            "session/pending", {"sessionId": self._session_id}, result_type=PendingResult
        )
        if result.pending is None:
            return None
        return ApprovalRequested(
            self._session_id,
            finished.seq,
            finished.turn_id,
            result.pending.execution_id,
            result.pending.requests,
        )

    async def _abandon(self, execution_id: str) -> StopReason:
        """Give the parked execution up; the calls it left open are closed as failed in the
        editor too, each with the result robotad wrote for it in history (it tells no event
        of them): ``not run: …``, or ``outcome unknown: …`` for a call that was running when
        robotad stopped."""
        params = {"sessionId": self._session_id, "executionId": execution_id}
        before = (await self._history({"limit": 0})).total
        with contextlib.suppress(StaleResponse):  # answered or abandoned elsewhere first
            await self._robotad.request("session/abandon", params)
        closed = (await self._history({"offset": before})).messages
        translator = self._attachment.translator
        await self._attachment.show(translator.close_abandoned(closed, "the approval was given up"))
        return "cancelled"

    async def _history(self, window: dict[str, int]) -> HistoryResult:
        params = {"sessionId": self._session_id, **window}
        return await self._robotad.request("session/history", params, result_type=HistoryResult)


def _resume(
    waiting: ApprovalRequested, answers: list[tuple[ApprovalRequest, Answer]]
) -> dict[str, Any]:
    """The ``session/resume`` params answering `waiting` with `answers`."""
    responses = [
        {
            "requestId": request.request_id,
            "responseId": f"acp-{uuid.uuid4().hex}",
            "approved": answer.approved,
        }
        for request, answer in answers
    ]
    return {
        "sessionId": waiting.session_id,
        "executionId": waiting.execution_id,
        "responses": responses,
    }


def _completed_reason(event: TurnFinished) -> StopReason:
    """``max_turn_requests`` for a turn robotad stopped at its ``maxRounds``."""
    stop: Any = getattr(event, "stop_reason", "end")
    return "max_turn_requests" if stop == "maxRounds" else "end_turn"


def _error_of(event: TurnFinished) -> RpcError:
    """The error a failed turn reported, as the error robotad's requester got."""
    if isinstance(event.error, ErrorObject):
        return RpcError.from_wire(msgspec.to_builtins(event.error))
    return RpcError("the turn failed")
