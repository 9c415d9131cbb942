"""Whether a streamed chunk or event has the shape an assembler reads (sans-I/O).

The SDKs build their stream objects without checking them (pydantic's ``construct``): data
that is JSON but not the documented shape — ``choices`` a string, a ``delta`` that is null
where an object belongs, a text piece that is a number, ``usage`` a number — comes through as
it is, and reading it failed the turn as "unexpected AttributeError from the provider", with
nothing saying what the server sent. `chat_chunk_problem` and `message_event_problem` check
exactly the members the assemblers read, and name the first one that is wrong
(``choices[0].delta is a string, not an object``); the assembler raises that as a failure that
is not retried (the same server would send the same again).

Token counts are not checked here: nonsense counts leave the reply without usage
(`robotad.providers.convert.reported_usage`), never failing a reply that arrived whole.
An Anthropic event of a type the API may add later is not checked either: the assembler
leaves it out, as Anthropic asks of clients.
"""

from __future__ import annotations

from pydantic import BaseModel

__all__ = ["KNOWN_MESSAGE_EVENTS", "chat_chunk_problem", "message_event_problem"]

#: The Messages stream's event types the assembler reads (``ping`` and ``error`` are the SDK's).
KNOWN_MESSAGE_EVENTS = frozenset(
    {
        "message_start",
        "message_delta",
        "message_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
    }
)

_DELTA_TEXTS = {
    "text_delta": "text",
    "input_json_delta": "partial_json",
    "thinking_delta": "thinking",
    "signature_delta": "signature",
}


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _not(where: str, value: object, expected: str) -> str:
    return f"{where} is {_kind(value)}, not {expected}"


def _object(value: object) -> bool:
    return isinstance(value, BaseModel)


def chat_chunk_problem(chunk: object) -> str | None:
    """What is wrong with a Chat Completions chunk, or None when the assembler can read it."""
    if not _object(chunk):
        return _not("the chunk", chunk, "an object")
    usage = getattr(chunk, "usage", None)
    if usage is not None and not _object(usage):
        return _not("usage", usage, "an object")
    choices = getattr(chunk, "choices", None)
    if choices is None:
        return None
    if not isinstance(choices, list):
        return _not("choices", choices, "a list")
    for number, choice in enumerate(choices):
        where = f"choices[{number}]"
        if not _object(choice):
            return _not(where, choice, "an object")
        delta = getattr(choice, "delta", None)
        if delta is not None:
            problem = _delta_problem(f"{where}.delta", delta)
            if problem is not None:
                return problem
    return None


def _delta_problem(where: str, delta: object) -> str | None:
    if not _object(delta):
        return _not(where, delta, "an object")
    for name in ("content", "refusal"):
        value = getattr(delta, name, None)
        if value is not None and not isinstance(value, str):
            return _not(f"{where}.{name}", value, "a string")
    calls = getattr(delta, "tool_calls", None)
    if calls is None:
        return None
    if not isinstance(calls, list):
        return _not(f"{where}.tool_calls", calls, "a list")
    for number, call in enumerate(calls):
        place = f"{where}.tool_calls[{number}]"
        if not _object(call):
            return _not(place, call, "an object")
        function = getattr(call, "function", None)
        if function is not None and not _object(function):
            return _not(f"{place}.function", function, "an object")
    return None


def message_event_problem(event: object) -> str | None:
    """What is wrong with a Messages stream event of a known type (`KNOWN_MESSAGE_EVENTS`),
    or None when the assembler can read it."""
    if not _object(event):
        return _not("the event", event, "an object")
    kind = getattr(event, "type", None)
    if kind not in KNOWN_MESSAGE_EVENTS:
        return None
    if kind in ("content_block_start", "content_block_delta"):
        index = getattr(event, "index", None)
        if isinstance(index, bool) or not isinstance(index, int):
            return _not(f"{kind}.index", index, "an integer")
    if kind == "message_start":
        message = getattr(event, "message", None)
        if not _object(message):
            return _not("message_start.message", message, "an object")
        return _usage_problem("message_start.message.usage", getattr(message, "usage", None))
    if kind == "message_delta":
        delta = getattr(event, "delta", None)
        if not _object(delta):
            return _not("message_delta.delta", delta, "an object")
        return _usage_problem("message_delta.usage", getattr(event, "usage", None))
    if kind == "content_block_start":
        block = getattr(event, "content_block", None)
        if not _object(block):
            return _not("content_block_start.content_block", block, "an object")
    if kind == "content_block_delta":
        delta = getattr(event, "delta", None)
        if delta is not None and not _object(delta):
            return _not("content_block_delta.delta", delta, "an object")
        member = _DELTA_TEXTS.get(str(getattr(delta, "type", "")))
        value = getattr(delta, member, "") if member else ""
        if not isinstance(value, str):
            return _not(f"content_block_delta.delta.{member}", value, "a string")
    return None


def _usage_problem(where: str, usage: object) -> str | None:
    if usage is None or _object(usage):
        return None
    return _not(where, usage, "an object")
