"""Compaction: the one conversation rendering, the summarisation request, and the compactor.

`render_conversation` is the single way a conversation is handed to a model as text (G-187):
one line per message, a fixed label saying who wrote it, and the content JSON-encoded on that
same line, so content holding newlines or text like ``assistant: …`` cannot pose as another
message. Tool calls and tool results are kept (G-185); a user message a peer session sent is
labelled as that peer's (G-186); a previous summary is labelled as one. Line breaks that JSON
leaves raw (U+2028, U+2029, U+0085) are escaped too, so every line splitter agrees.

`Compactor.compact` summarises a history without touching it: system messages are neither
summarised nor counted (G-174, G-183), the request is text-only (no tools, tool choice
``none``, purpose ``compaction``; G-172, G-173) and carries the caller's instructions (G-176),
an empty or whitespace summary is `CompactionInvalid` (G-177), as is a reply that is no whole
summary (`not_a_summary`: one that calls tools, or that the provider cut off at its output
limit or stopped by a filter; architecture decision 63), and the result holds the new
history — the system messages in their order, then the summary (G-175) — for the Session to
journal and apply. The summary is a ``user`` message whose ``metadata.compaction`` records the
trigger, so a later compaction summarises it again with the rest instead of keeping every old
summary forever. A cancelled or failed call changes nothing; the trigger is carried unchanged
(G-055).

The request fits the model's context window (`prompt_budget`): a history is compacted because
it grew near the window, and one turn's tool results can take it past; a summary request that
does not fit fails every time, and the session could then never run again. So when the
rendered conversation is over the budget, each message longer than a share of it keeps its
head and tail around a note of what was left out, and if that is not enough the oldest
messages are left out (an earlier summary last), with a line saying how many. Every tool call
and result that fits is kept (G-185); what does not fit could never have been read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final, Literal

import msgspec
from msgspec import Struct

from protocol.shapes import Message
from robotad.agent.model_text import encodable_reply
from robotad.agent.provider import (
    ModelReply,
    ModelRequest,
    Provider,
    ProviderError,
    StreamObserver,
)

__all__ = [
    "DEFAULT_SUMMARY_TEMPLATE",
    "CompactionError",
    "CompactionInvalid",
    "CompactionNoOp",
    "CompactionResult",
    "Compactor",
    "Trigger",
    "compacted_history",
    "is_summary",
    "not_a_summary",
    "prompt_budget",
    "render_conversation",
    "render_message",
    "summary_request",
]

Trigger = Literal["manual", "auto"]

#: The summariser's prompt. ``{instructions}`` and ``{conversation}`` are filled in one pass (a
#: line holding only ``{instructions}`` is dropped when there are none); a replacement template
#: replaces all of this text (G-218).
DEFAULT_SUMMARY_TEMPLATE: Final = """\
Summarise the conversation below so that it can be continued from the summary alone.

Keep:
- what was asked for, and every constraint or preference stated;
- the decisions made and the reasons given for them;
- the current state of the work and what remains to be done;
- names, identifiers, locations and values that later steps will need;
- the actions taken and their results, failures included, where they still matter.

Write plain, factual prose or lists. Add nothing the conversation does not contain.

{instructions}

The conversation follows, one message per line: who wrote it, then the message content as a \
JSON string.

{conversation}
"""

_PLACEHOLDER = re.compile(r"\{(conversation|instructions)\}")
_EMPTY_INSTRUCTIONS_LINE = re.compile(r"(?m)^[ \t]*\{instructions\}[ \t]*\n?")
_RAW_BREAKS = {"\u2028": "\\u2028", "\u2029": "\\u2029", "\u0085": "\\u0085"}
_encoder = msgspec.json.Encoder()


def _json(value: object) -> str:
    text = _encoder.encode(value).decode("utf-8")
    for raw, escaped in _RAW_BREAKS.items():
        text = text.replace(raw, escaped)
    return text


def is_summary(message: Message) -> bool:
    """Whether `message` is a compaction summary."""
    return isinstance(message.metadata, dict) and isinstance(
        message.metadata.get("compaction"), dict
    )


def render_message(message: Message) -> str:
    """One message as one line: ``label: content-as-JSON`` (plus its tool calls)."""
    if message.role == "user":
        peer = message.peer
        if is_summary(message):
            label = "summary of the earlier conversation"
        elif peer is not None:
            label = f"user of peer session {_json(peer)}"
        else:
            label = "user"
    elif message.role == "tool":
        name = message.name if isinstance(message.name, str) else None
        call_id = message.tool_call_id if isinstance(message.tool_call_id, str) else None
        verdict = "result" if message.ok else "failed result"
        label = f"tool {_json(name)} {verdict} for call {_json(call_id)}"
    else:
        label = message.role
    if message.state == "interrupted":
        label += " (interrupted)"
    line = f"{label}: {_json(message.content)}"
    if message.calls:
        calls = []
        for call in message.calls:
            entry: dict[str, object] = {"id": call.id, "name": call.name}
            entry["arguments"] = call.arguments
            if isinstance(call.raw_arguments, str):
                entry["rawArguments"] = call.raw_arguments
            calls.append(entry)
        line += f" tool calls: {_json(calls)}"
    return line


def render_conversation(messages: Sequence[Message]) -> str:
    """Every message of `messages`, in order, one line each (no trailing newline)."""
    return "\n".join(render_message(message) for message in messages)


#: Characters a token is taken to hold when fitting a request to a window (code and JSON run
#: near 3; prose nearer 4), and the share of the window a summary request may fill (the rest is
#: the summary's).
_CHARS_PER_TOKEN: Final = 3
_PROMPT_SHARE: Final = 0.75
#: A message is cut to at most this share of the budget before any is left out whole.
_MESSAGE_SHARE: Final = 8
#: Characters kept free for the line saying how many messages were left out.
_NOTE_ROOM: Final = 100


def prompt_budget(context_window: int) -> int:
    """The most characters a summary request for a `context_window`-token model may hold."""
    return int(context_window * _CHARS_PER_TOKEN * _PROMPT_SHARE)


def summary_request(
    history: Sequence[Message],
    *,
    instructions: str | None = None,
    template: str = DEFAULT_SUMMARY_TEMPLATE,
    max_chars: int | None = None,
) -> ModelRequest | None:
    """The text-only summarisation request for `history`'s non-system messages, or None when
    there are none (nothing to summarise); with `max_chars`, fitted to it (module doc)."""
    body = [message for message in history if message.role != "system"]
    if not body:
        return None
    extra = (instructions or "").strip()
    room = None if max_chars is None else max_chars - len(template) - len(extra)
    conversation = _fitted(body, room) if room is not None else render_conversation(body)
    if not extra:
        template = _EMPTY_INSTRUCTIONS_LINE.sub("", template)
    values = {"conversation": conversation, "instructions": extra}
    prompt = _PLACEHOLDER.sub(lambda match: values[match.group(1)], template)
    if "{conversation}" not in template:
        prompt = f"{prompt.rstrip()}\n\n{conversation}"
    if extra and "{instructions}" not in template:
        prompt = f"{prompt.rstrip()}\n\n{extra}"
    return ModelRequest(
        messages=[Message.user(prompt)], tools=[], tool_choice="none", purpose="compaction"
    )


def _fitted(body: list[Message], room: int) -> str:
    """`body` rendered in at most `room` characters, as far as the newest message allows."""
    lines = [render_message(message) for message in body]
    if sum(len(line) + 1 for line in lines) <= room:
        return "\n".join(lines)
    longest = max(room // _MESSAGE_SHARE, 1_000)
    lines = [
        render_message(_clipped(message, longest)) if len(line) > longest else line
        for message, line in zip(body, lines, strict=True)
    ]
    used = sum(len(line) + 1 for line in lines)
    room -= _NOTE_ROOM  # for the line that says how many were left out
    # Leave out the oldest first, an earlier summary last, never the newest message.
    order = sorted(range(len(lines) - 1), key=lambda index: (is_summary(body[index]), index))
    left_out: set[int] = set()
    for index in order:
        if used <= room:
            break
        left_out.add(index)
        used -= len(lines[index]) + 1
    shown = [line for index, line in enumerate(lines) if index not in left_out]
    if left_out:
        note = f"({len(left_out)} earlier messages left out: they did not fit the model's context)"
        shown.insert(0, note)
    return "\n".join(shown)


def _clipped(message: Message, longest: int) -> Message:
    """`message` with its content's middle left out so that it renders in about `longest`."""
    content = message.content or ""
    keep = max(longest // 2 - 100, 100)
    if len(content) <= 2 * keep:
        return message
    cut = len(content) - 2 * keep
    middle = f"\n[… {cut:,} characters left out …]\n"
    return msgspec.structs.replace(message, content=content[:keep] + middle + content[-keep:])


#: Stop reasons of a reply the provider ended before the model did: at the reply's token
#: budget (Anthropic ``max_tokens``, OpenAI-compatible ``length``) or the model's window
#: (Anthropic ``model_context_window_exceeded``)…
_CUT_OFF: Final = frozenset({"max_tokens", "length", "model_context_window_exceeded"})
#: … or by a filter of its own (OpenAI ``content_filter``, Anthropic ``refusal``).
_STOPPED: Final = frozenset({"content_filter", "refusal"})


def not_a_summary(reply: ModelReply) -> str | None:
    """Why `reply` is no whole summary, or None. A summary replaces the history for good, so
    a reply that calls tools (its text is what the model said before acting, not a summary)
    or that ended before the model did (its text stops mid-way, and the history's latest
    state, which a summary keeps last, is what is lost) is refused rather than applied. Only
    the reasons named here are judged: servers name a normal end in their own words."""
    if reply.tool_calls:
        count = len(reply.tool_calls)
        calls = "a tool" if count == 1 else f"{count} tools"
        return f"the model called {calls} instead of writing a summary"
    reason = reply.stop_reason
    if reason in _CUT_OFF:
        return (
            f"the summary was cut off at the model's output limit (stop reason {reason!r}): "
            "raise the provider's max_tokens, or ask for a shorter summary"
        )
    if reason in _STOPPED:
        return f"the provider stopped the summary before its end (stop reason {reason!r})"
    return None


def compacted_history(history: Sequence[Message], summary: str, trigger: Trigger) -> list[Message]:
    """`history`'s system messages, in order, then `summary` as a marked user message."""
    kept = [message for message in history if message.role == "system"]
    summarised = len(history) - len(kept)
    message = Message.user(summary.strip())
    message.metadata = {"compaction": {"trigger": trigger, "messages": summarised}}
    return [*kept, message]


class CompactionError(Exception):
    """Compaction failed; the Session reports it as CompactionFailed with `trigger`."""

    def __init__(self, trigger: Trigger, reason: str) -> None:
        super().__init__(reason)
        self.trigger: Trigger = trigger
        self.reason = reason


class CompactionInvalid(CompactionError):
    """The provider's summary was empty or whitespace only (G-177)."""


class CompactionNoOp(Struct, frozen=True):
    """Nothing to summarise: no hook, log entry or event follows (G-183, G-184)."""

    trigger: Trigger


class CompactionResult(Struct, frozen=True):
    """A summary ready to apply: `history` replaces the old one once the Session has
    journalled `reply`. `summarized` counts the messages the summary replaces."""

    trigger: Trigger
    summary: str
    history: list[Message]
    summarized: int
    request: ModelRequest
    reply: ModelReply


class _Quiet:
    def on_text(self, delta: str) -> None:
        del delta

    def on_activity(self, chars: int = 0) -> None:
        del chars


class Compactor:
    """Summarises histories with `provider` using `template` (default: domain-neutral)."""

    def __init__(
        self,
        provider: Provider,
        template: str = DEFAULT_SUMMARY_TEMPLATE,
        *,
        max_chars: int | None = None,
    ) -> None:
        self.provider = provider
        self.template = template
        #: The most characters a request may hold (`prompt_budget`); None: unbounded.
        self.max_chars = max_chars

    async def compact(
        self,
        history: Sequence[Message],
        *,
        trigger: Trigger,
        instructions: str | None = None,
        observer: StreamObserver | None = None,
    ) -> CompactionResult | CompactionNoOp:
        """Summarise `history` (never modified). Raises `CompactionInvalid` for an empty
        summary and `CompactionError` for a provider failure; cancellation propagates and
        leaves nothing changed. `observer` sees the streamed summary, e.g.
        to refresh an idle deadline."""
        request = summary_request(
            history, instructions=instructions, template=self.template, max_chars=self.max_chars
        )
        if request is None:
            return CompactionNoOp(trigger)
        try:
            reply = await self.provider.complete(request, observer or _Quiet())
        except ProviderError as exc:
            raise CompactionError(trigger, f"provider failed: {exc.reason}") from exc
        reply = encodable_reply(reply)
        problem = not_a_summary(reply)
        if problem is not None:
            raise CompactionInvalid(trigger, problem)
        if not reply.text.strip():
            raise CompactionInvalid(trigger, "the provider returned an empty summary")
        new_history = compacted_history(history, reply.text, trigger)
        summarized = len(history) - (len(new_history) - 1)
        return CompactionResult(
            trigger, reply.text.strip(), new_history, summarized, request, reply
        )
