"""The offline `scripted` provider (PROTOCOL.md §7): replies read from a script, no network.

A script is a list of steps, consumed from the front:

- a turn step ``{text?, toolCalls?:[{name, arguments}], chunks?:1, delayMs?:0, error?, usage?}``
  answers one turn call (``request.purpose == "turn"``);
- a summary step ``{summary, delayMs?:0}`` answers one compaction call.

A turn call takes the first step that is not a summary step. Summary steps in front of it are
kept, in order, for later compaction calls. Its `text` is cut into `chunks` nearly equal pieces
(lengths differ by at most one; never more pieces than characters), each streamed after a pause
of `delayMs`, so the first piece too arrives `delayMs` after the call began; a step without text
pauses once. Then `error`, if set, fails the call with that reason (after any text streamed);
otherwise the reply carries the text, the tool calls (with fresh ids) and `usage`.

A compaction call takes the first step only when it is a summary step: after its `delayMs`, its
`summary` is the reply (``""`` is returned as is, an invalid summary). Otherwise the reply is a
deterministic summary built from the request's messages.

With no usable step left (or no script) a turn call replies ``echo: <last user message>``.

A step is consumed when the call that takes it starts, so an aborted call does not replay it.
`remaining_steps()` gives the unconsumed steps in wire form, and ``ScriptedProvider(steps)``
(or `decode_script`) takes them back, so the daemon can keep the cursor across restarts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any

import msgspec
import trio
from msgspec import Meta, Struct

from protocol.methods import Chunks, Count
from protocol.shapes import Message, ToolCall, Usage, new_id
from protocol.validate import Issue, ValidationFailed, convert, join_path
from robotad.agent.provider import (
    DEFAULT_IDLE_TIMEOUT,
    ModelReply,
    ModelRequest,
    ProviderError,
    StreamObserver,
)

__all__ = [
    "ScriptedProvider",
    "ScriptedToolCall",
    "Step",
    "SummaryStep",
    "TurnStep",
    "decode_script",
]

_SUMMARY_EXCERPT = 400


class ScriptedToolCall(Struct, frozen=True, forbid_unknown_fields=True):
    name: Annotated[str, Meta(min_length=1)]
    arguments: dict[str, Any] = msgspec.field(default_factory=dict)


class TurnStep(Struct, frozen=True, forbid_unknown_fields=True, rename="camel", omit_defaults=True):
    """Answers one turn call."""

    text: str = ""
    tool_calls: list[ScriptedToolCall] = msgspec.field(default_factory=list)
    chunks: Chunks = 1
    delay_ms: Count = 0
    error: Annotated[str, Meta(min_length=1)] | None = None
    usage: Usage | None = None


class SummaryStep(
    Struct, frozen=True, forbid_unknown_fields=True, rename="camel", omit_defaults=True
):
    """Answers one compaction call."""

    summary: str
    delay_ms: Count = 0


Step = TurnStep | SummaryStep


def decode_script(script: Any, *, path: str = "$") -> list[Step]:
    """Decode a wire script strictly. Raises `ValidationFailed` listing every problem of every
    step, located under `path` (e.g. ``$.script[2].chunks`` with ``path="$.script"``)."""
    if not isinstance(script, list):
        raise ValidationFailed([{"path": path, "message": "expected array of steps"}])
    steps: list[Step] = []
    issues: list[Issue] = []
    for index, raw in enumerate(script):
        where = join_path(path, index)
        if not isinstance(raw, dict):
            issues.append({"path": where, "message": "expected object"})
            continue
        kind: type[Step] = SummaryStep if "summary" in raw else TurnStep
        try:
            steps.append(convert(raw, kind))
        except ValidationFailed as exc:
            issues.extend(
                {"path": where + issue["path"].removeprefix("$"), "message": issue["message"]}
                for issue in exc.issues
            )
    if issues:
        raise ValidationFailed(issues)
    return steps


class ScriptedProvider:
    """A `Provider` answering from a script; see the module doc. Not for concurrent calls."""

    kind = "scripted"

    def __init__(
        self,
        steps: Iterable[Step] = (),
        *,
        name: str = "scripted",
        model: str = "scripted",
        context_window: int | None = None,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    ) -> None:
        self.name = name
        self.model = model
        self.context_window = context_window
        #: Seconds; for the agent loop's idle deadline (a ``delayMs`` step can exceed it).
        self.idle_timeout = idle_timeout
        self._steps: list[Step] = list(steps)

    def remaining_steps(self) -> list[dict[str, Any]]:
        """The steps not consumed yet, in wire form (what `decode_script` reads back)."""
        return [msgspec.to_builtins(step) for step in self._steps]

    async def complete(self, request: ModelRequest, observer: StreamObserver) -> ModelReply:
        if request.purpose == "compaction":
            return await self._summarise(request, observer)
        step = self._take_turn_step()
        if step is None:
            reply = f"echo: {_last_user_text(request.messages)}"
            await trio.lowlevel.checkpoint()
            observer.on_text(reply)
            return ModelReply(reply, [], stop_reason="end_turn")
        pieces = _split(step.text, step.chunks) or [""]
        for piece in pieces:
            await trio.sleep(step.delay_ms / 1000)
            if piece:
                observer.on_text(piece)
        if step.error is not None:
            raise ProviderError(step.error)
        calls = [
            ToolCall(new_id("call_"), call.name, dict(call.arguments)) for call in step.tool_calls
        ]
        if calls:
            observer.on_activity()
        return ModelReply(
            step.text,
            calls,
            usage=step.usage,
            stop_reason="tool_use" if calls else "end_turn",
        )

    async def aclose(self) -> None:
        """Nothing to release."""

    # -- internals --------------------------------------------------------------------------

    def _take_turn_step(self) -> TurnStep | None:
        for index, step in enumerate(self._steps):
            if isinstance(step, TurnStep):
                del self._steps[index]
                return step
        return None

    async def _summarise(self, request: ModelRequest, observer: StreamObserver) -> ModelReply:
        step = self._steps[0] if self._steps else None
        if isinstance(step, SummaryStep):
            del self._steps[0]
            await trio.sleep(step.delay_ms / 1000)
            summary = step.summary
        else:
            await trio.lowlevel.checkpoint()
            summary = _deterministic_summary(request.messages)
        if summary:
            observer.on_text(summary)
        return ModelReply(summary, [], stop_reason="end_turn")


def _split(text: str, chunks: int) -> list[str]:
    """`text` in min(chunks, len(text)) pieces whose lengths differ by at most one."""
    count = min(chunks, len(text))
    if count == 0:
        return []
    size, extra = divmod(len(text), count)
    pieces, start = [], 0
    for index in range(count):
        end = start + size + (1 if index < extra else 0)
        pieces.append(text[start:end])
        start = end
    return pieces


def _last_user_text(messages: list[Message]) -> str:
    for message in reversed(messages):
        if message.role == "user":
            return message.content or ""
    return ""


def _deterministic_summary(messages: list[Message]) -> str:
    """``Summary of N messages: …`` — the request's non-system messages, one short clause each,
    cut to a bounded excerpt. Same request, same summary; never empty."""
    conversation = [m for m in messages if m.role != "system"]
    clauses = []
    for message in conversation:
        text = " ".join((message.content or "").split())
        if message.calls:
            text = (
                (text + " " if text else "") + "calls " + ", ".join(c.name for c in message.calls)
            )
        clauses.append(f"{message.role}: {text}" if text else message.role)
    excerpt = "; ".join(clauses)
    if len(excerpt) > _SUMMARY_EXCERPT:
        excerpt = excerpt[: _SUMMARY_EXCERPT - 1] + "…"
    if not excerpt:
        return f"Summary of {len(conversation)} messages."
    return f"Summary of {len(conversation)} messages: {excerpt}"
