"""The agent loop: provider rounds and tool rounds until the model stops asking for tools.

`run_turn` is a policy-free engine the Session composes. It owns no history, no permissions,
no hooks, no persistence: it reads the history it is given and commits every new message through
the injected async `commit` (the Session journals, then appends). Per round:

1. build the request — the history, with the turn's ephemeral `system_context` inserted as a
   system message right after the leading system message(s) (never committed: G-048, G-049);
2. ``await callbacks.on_request(request)`` (the Session's estimate and PreModelCall);
3. one provider call, streamed: each text delta goes to ``callbacks.on_text`` and refreshes the
   idle deadline, as does any other streamed activity (G-039…G-041);
4. commit the reply as one assistant message, usage in its metadata, each tool-call id the
   history already holds replaced by a fresh one (`distinct_call_ids`); then
   ``await callbacks.on_reply(reply)`` (exact usage, PostModelCall);
5. no tool calls: the turn is completed. Otherwise run the calls (`ToolRound`): admitted by the
   gate in call order, at most five bodies at once, results committed in call order.

Continuation: when the history's last assistant message has calls without results (an open
round, e.g. a parked approval), those calls run first, then rounds continue as above. The
history must otherwise already end with the turn's input (the Session commits the user message).

`tool_choice`: the per-turn value applies to the first provider call of this run; later rounds
use ``"auto"`` (a ``"required"`` or named choice on every round would never let the model stop),
except ``"none"``, which holds for every round of the run (G-057).

Ends of a turn:

- `CompletedTurn` — a reply without tool calls (``stop_reason`` "end"), or the round limit
  reached: `round_cap` provider calls were made by the turn (a continuation counts the rounds
  its turn made before it, the assistant replies since the last user message), every call of
  the last round is answered, and the next provider call is not made (``stop_reason``
  "maxRounds", ``response`` the last reply's text). `None`, the default, means no limit
  (G-044). `ParkedTurn` — the gate parked a call (the round stays open, see
  `robotad.agent.tool_round`).
- `ModelCallFailed` — the provider raised `ProviderError` (its reason), raised anything else,
  sent nothing for `idle_timeout` seconds, or replied with a tool call without a name (a
  malformed reply, `robotad.agent.call_names`: nothing of it is committed). Everything
  committed before stays (G-207); text streamed by the failed call is not committed.
  Retrying is the provider's business.
- `TurnAbortedError` — `abort` was signalled. Once everything started has settled, the loop
  commits, outside the cancelled scope: the partial reply of a call cut off mid-stream, as an
  assistant message with state ``"interrupted"`` (when any text had streamed, G-191); or the
  round's results, with interrupted failures for calls that produced none. Cancellation of an
  enclosing scope other than `abort` is not an abort: it propagates and nothing more is
  committed. The turn settles its signal (`AbortSignal.settle`) the moment its outcome is
  decided — a reply without tool calls arrived, the round limit was reached, a round parked,
  or a failure is on its way out — so an abort from then on is not taken (the caller's
  closing hooks are all it cuts short); an abort taken just before still wins.
- anything `commit`, the gate or a callback raises propagates as it is — a commit failure is a
  persistence failure even while aborting (each commit runs shielded: it completes or fails, it
  is never cut off by cancellation).

Its size is one concept: the round loop with its commit, park and abort paths, which must be
read together.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import msgspec
import trio

from protocol.shapes import Message, StopReason, ToolCall, utc_now
from robotad.agent.abort import AbortSignal
from robotad.agent.call_ids import distinct_call_ids
from robotad.agent.call_names import nameless_call
from robotad.agent.gate import ToolGate
from robotad.agent.model_text import encodable_reply
from robotad.agent.observations import EventBus, ObservedOutcome, ProviderRoundObserved
from robotad.agent.provider import (
    ModelReply,
    ModelRequest,
    Provider,
    ProviderError,
    ToolChoice,
    idle_timeout_reason,
    located_reason,
)
from robotad.agent.stream_tap import StreamTap
from robotad.agent.tool import Tool, ToolContext
from robotad.agent.tool_round import ParkedCall, ToolRound

__all__ = [
    "CompletedTurn",
    "ModelCallFailed",
    "ParkedCall",
    "ParkedTurn",
    "TurnAbortedError",
    "TurnCallbacks",
    "TurnOptions",
    "TurnOutcome",
    "open_calls",
    "run_turn",
]

logger = logging.getLogger("robotad.agent.loop")

Commit = Callable[[Message], Awaitable[None]]


class ModelCallFailed(Exception):
    """A model call failed; `reason` is safe to show and log (it never holds a key).
    `refused` is the reply when one arrived whole but could not be taken in (a tool call
    without a name, `call_names`): what came back, for the session log; None otherwise."""

    def __init__(
        self, reason: str, provider_name: str, *, refused: ModelReply | None = None
    ) -> None:
        super().__init__(f"provider {provider_name} failed: {reason}")
        self.reason = reason
        self.provider_name = provider_name
        self.refused = refused


class TurnAbortedError(Exception):
    """The turn was aborted and has fully stopped. `open_calls` are the calls it left without
    results: the parked and not-started calls of a round that had parked (their approval may
    still be resumed); empty otherwise."""

    def __init__(self, open_calls: tuple[ToolCall, ...] = ()) -> None:
        super().__init__("turn aborted")
        self.open_calls = open_calls


@dataclass(frozen=True)
class CompletedTurn:
    """The turn ended: the model answered without tool calls (`stop_reason` "end"), or the
    round limit stopped it ("maxRounds"). `response` is the last reply's text; `rounds` the
    provider calls of this run."""

    response: str
    rounds: int
    stop_reason: StopReason = "end"

    @property
    def kind(self) -> str:
        return "completed"


@dataclass(frozen=True)
class ParkedTurn:
    """A call waits for a person: `parked` (its request saved by the gate) and `unstarted`,
    the later calls of that round. Their results are missing from history until a
    continuation runs them."""

    parked: tuple[ParkedCall, ...]
    unstarted: tuple[ToolCall, ...]
    rounds: int

    @property
    def kind(self) -> str:
        return "parked"


TurnOutcome = CompletedTurn | ParkedTurn


@dataclass(frozen=True)
class TurnCallbacks:
    """The Session's view into a turn; every member optional.

    `on_text` is synchronous and must not block (an exception from it is logged and ignored,
    so a broken sink cannot cut a stream). `on_request` and `on_reply` are awaited; whatever
    they raise ends the turn (that is how a context check stops it)."""

    on_text: Callable[[str], None] | None = None
    on_request: Callable[[ModelRequest], Awaitable[None]] | None = None
    on_reply: Callable[[ModelReply], Awaitable[None]] | None = None


@dataclass(frozen=True, kw_only=True)
class TurnOptions:
    """How one turn asks the model. `system_context` is an extra system message placed
    after the leading ones for this turn only; `idle_timeout` is in seconds (None: no idle
    limit); `round_cap` bounds the turn's model rounds, earlier ones of a continued turn
    included (None: no limit)."""

    tool_choice: ToolChoice = "auto"
    system_context: str | None = None
    effort: str | None = None
    idle_timeout: float | None = None
    round_cap: int | None = None


#: Every option at its default.
DEFAULT_TURN_OPTIONS = TurnOptions()


def rounds_since_prompt(history: Sequence[Message]) -> int:
    """The assistant replies after the last user message: the rounds its turn has made."""
    count = 0
    for message in reversed(history):
        if message.role == "user":
            break
        if message.role == "assistant":
            count += 1
    return count


def open_calls(history: Sequence[Message]) -> list[ToolCall]:
    """The calls of the last assistant message that have no result after it (in call order)."""
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if message.role != "assistant":
            continue
        answered = {m.tool_call_id for m in history[index + 1 :] if m.role == "tool"}
        return [call for call in message.calls if call.id not in answered]
    return []


async def run_turn(
    *,
    provider: Provider,
    tools: Mapping[str, Tool],
    history: Sequence[Message],
    commit: Commit,
    gate: ToolGate,
    ctx: ToolContext,
    options: TurnOptions = DEFAULT_TURN_OPTIONS,
    callbacks: TurnCallbacks | None = None,
    bus: EventBus | None = None,
    abort: AbortSignal | None = None,
) -> TurnOutcome:
    """Run one turn (or the continuation of a parked one) to its end; see the module doc.

    `history` is read, never mutated; `commit` gets each new message in history order."""
    turn = _Turn(
        provider=provider,
        tools=tools,
        history=history,
        commit=commit,
        gate=gate,
        ctx=ctx,
        options=options,
        callbacks=callbacks or TurnCallbacks(),
        bus=bus,
        abort=abort,
    )
    return await turn.run()


class _Turn:
    """The state of one `run_turn` call."""

    def __init__(
        self,
        *,
        provider: Provider,
        tools: Mapping[str, Tool],
        history: Sequence[Message],
        commit: Commit,
        gate: ToolGate,
        ctx: ToolContext,
        options: TurnOptions,
        callbacks: TurnCallbacks,
        bus: EventBus | None,
        abort: AbortSignal | None,
    ) -> None:
        self._provider = provider
        self._tools = tools
        self._schemas = [tool.schema for tool in tools.values()]
        self._history = list(history)
        self._commit_to_session = commit
        self._gate = gate
        self._ctx = ctx
        self._options = options
        context = options.system_context
        self._context = Message.system(context) if context else None
        self._callbacks = callbacks
        self._bus = bus
        self._abort = abort
        self._rounds = 0
        #: Rounds the turn made before this run (a continuation's), counted against the cap.
        self._earlier_rounds = 0
        self._last_text = ""
        #: Text streamed by the provider call in flight; None between calls.
        self._partial: list[str] | None = None
        #: The tool round in flight; None between rounds.
        self._tool_round: ToolRound | None = None

    async def run(self) -> TurnOutcome:
        outcome: TurnOutcome | None = None
        try:
            with self._abort_scope():
                outcome = await self._rounds_until_done()
        except Exception:
            # A failure decides the turn's outcome; an abort taken first stays second to it
            # (a journal failure while aborting is a persistence failure, G-194).
            if self._abort is not None:
                self._abort.settle()
            raise
        if outcome is not None:
            return outcome
        # Only the abort scope can swallow what ended the block early.
        raise TurnAbortedError(await self._close_after_abort())

    @contextmanager
    def _abort_scope(self) -> Iterator[None]:
        if self._abort is None:
            yield
        else:
            with self._abort.scope():
                yield

    async def _rounds_until_done(self) -> TurnOutcome:
        carried = open_calls(self._history)
        if carried:
            self._earlier_rounds = rounds_since_prompt(self._history)
            replied = next(m for m in reversed(self._history) if m.role == "assistant")
            self._last_text = replied.content or ""
            parked = await self._run_tools(self._tool_round_of(carried, round_number=0))
            if parked is not None:
                return parked
        while True:
            await trio.lowlevel.checkpoint_if_cancelled()  # an abort stops before the next call
            if self._round_limit_reached():
                await self._settle()
                return CompletedTurn(self._last_text, self._rounds, "maxRounds")
            self._rounds += 1
            request = self._request()
            if self._callbacks.on_request is not None:
                await self._callbacks.on_request(request)
            reply = await self._call_provider(request)
            final = not reply.tool_calls
            if final:  # the turn ends with this reply, unless an abort came first
                await self._settle(reply.text)
            else:
                calls = distinct_call_ids(reply.tool_calls, self._history)
                reply = msgspec.structs.replace(reply, tool_calls=calls)
            content = reply.text if reply.text or final else None
            self._last_text = reply.text
            tool_round = None
            with trio.CancelScope(shield=final):  # settled: a later abort takes nothing back
                await self._commit(Message.assistant(content, reply.tool_calls, usage=reply.usage))
                # The round exists from the moment its calls are in history, so an abort from
                # here on closes them.
                if not final:
                    tool_round = self._tool_round_of(reply.tool_calls, round_number=self._rounds)
                if self._callbacks.on_reply is not None:
                    await self._callbacks.on_reply(reply)
            if tool_round is None:
                return CompletedTurn(reply.text, self._rounds)
            parked = await self._run_tools(tool_round)
            if parked is not None:
                return parked

    def _round_limit_reached(self) -> bool:
        """Whether the turn has made as many provider calls as its limit allows."""
        cap = self._options.round_cap
        return cap is not None and self._earlier_rounds + self._rounds >= cap

    # -- provider call ----------------------------------------------------------------------

    def _request(self) -> ModelRequest:
        messages = list(self._history)
        if self._context is not None:
            leading = 0
            while leading < len(messages) and messages[leading].role == "system":
                leading += 1
            messages.insert(leading, self._context)
        first = self._rounds == 1
        choice = (
            self._options.tool_choice if first or self._options.tool_choice == "none" else "auto"
        )
        return ModelRequest(
            messages, self._schemas, tool_choice=choice, effort=self._options.effort
        )

    async def _call_provider(self, request: ModelRequest) -> ModelReply:
        self._partial = []
        try:
            with trio.CancelScope() as idle:
                tap = StreamTap(
                    idle,
                    self._options.idle_timeout,
                    partial=self._partial,
                    sink=self._callbacks.on_text,
                )
                reply = await self._provider.complete(request, tap)
        except ProviderError as exc:
            await self._unless_aborted()
            self._partial = None
            self._observe_round("failed")
            raise ModelCallFailed(exc.reason, self._provider.name) from exc
        except Exception as exc:
            await self._unless_aborted()
            self._partial = None
            self._observe_round("failed")
            logger.warning("provider %s raised %s", self._provider.name, type(exc).__name__)
            cause = f"unexpected {type(exc).__name__} from the provider"
            reason = located_reason(self._provider, cause)
            raise ModelCallFailed(reason, self._provider.name) from None
        except BaseException:
            self._observe_round("cancelled")
            raise
        if idle.cancelled_caught:
            # Only the deadline got here: when the abort scope is cancelled as well, trio hands
            # the Cancelled to that outer scope instead, so an abort always wins.
            self._partial = None
            self._observe_round("failed")
            reason = idle_timeout_reason(
                self._provider, self._options.idle_timeout, replying=tap.replying
            )
            raise ModelCallFailed(reason, self._provider.name)
        reply = encodable_reply(reply)
        problem = nameless_call(reply.tool_calls)
        if problem is not None:
            # A malformed reply, failed as the provider's failures are (an abort taken first
            # still wins); committed, it would fail every later request (`call_names`).
            await self._unless_aborted()
            self._partial = None
            self._observe_round("failed")
            reason = located_reason(self._provider, problem)
            raise ModelCallFailed(reason, self._provider.name, refused=reply)
        self._partial = None
        self._observe_round("ok")
        return reply

    async def _unless_aborted(self) -> None:
        """A provider that turned the abort's cancellation into an error still ends in the
        abort, keeping its partial text: re-raise the pending Cancelled."""
        if self._abort is not None and self._abort.aborted:
            self._observe_round("cancelled")
            await trio.lowlevel.checkpoint()

    def _observe_round(self, outcome: ObservedOutcome) -> None:
        if self._bus is not None:
            self._bus.publish(ProviderRoundObserved(utc_now(), self._rounds, outcome))

    # -- tools ------------------------------------------------------------------------------

    def _tool_round_of(self, calls: Sequence[ToolCall], *, round_number: int) -> ToolRound:
        self._tool_round = ToolRound(
            calls,
            round_number=round_number,
            tools=self._tools,
            gate=self._gate,
            ctx=self._ctx,
            commit=self._commit,
            bus=self._bus,
        )
        return self._tool_round

    async def _run_tools(self, tool_round: ToolRound) -> ParkedTurn | None:
        await tool_round.run()
        if tool_round.park is not None:
            await self._settle()  # the turn parks, unless an abort came first (it closes it)
        self._tool_round = None
        if tool_round.park is None:
            return None
        return ParkedTurn((tool_round.park,), tool_round.held, self._rounds)

    async def _settle(self, text: str = "") -> None:
        """The turn's outcome is decided here (see `AbortSignal.settle`): an abort from now
        on is not taken. One taken first, while this task waited to run after the provider's
        last checkpoint, still wins: the reply's `text` is then kept as interrupted text, as
        a reply cut off mid-stream is (G-191), and the round, if any, is closed."""
        if self._abort is None or self._abort.settle():
            return
        self._partial = [text] if text else None
        await trio.lowlevel.checkpoint()  # the abort cancelled this turn's scope: raises

    # -- history ----------------------------------------------------------------------------

    async def _commit(self, message: Message) -> None:
        """Commit one message; shielded so it completes or fails, and is never cut off."""
        with trio.CancelScope(shield=True):
            await self._commit_to_session(message)
        self._history.append(message)

    async def _close_after_abort(self) -> tuple[ToolCall, ...]:
        if self._partial:
            partial, self._partial = "".join(self._partial), None
            await self._commit(Message.assistant(partial, interrupted=True))
        if self._tool_round is not None:
            tool_round, self._tool_round = self._tool_round, None
            return await tool_round.close_after_abort()
        return ()
