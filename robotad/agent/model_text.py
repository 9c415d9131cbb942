"""What a model sends, made encodable where it enters the agent.

JSON may escape half of a surrogate pair on its own (``"\\udcff"``), and the SDKs' parsers
take it as it is: a reply's text, a tool call's arguments or the provider's native payload
then hold a lone surrogate, which UTF-8 cannot encode — not in an event, a session log line,
the record, nor the next request to the model. The turn failed -32603 at the first encoding
(the context estimate), the reply lost. `encodable_text` and `encodable_reply` put U+FFFD in
place of each lone surrogate (text from a model has no bytes behind it to write out, unlike a
tool result's file name: `tool_round`); anything else is returned unchanged, and a reply with
nothing to change is returned as it is.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from protocol.shapes import ToolCall
from robotad.agent.provider import ModelReply

__all__ = ["LONE_SURROGATE", "encodable_reply", "encodable_text", "encodable_tree"]

#: Any surrogate code point: in a Python str, always one UTF-8 cannot encode (a pair is one
#: character there). Tool results use it too (`tool_round`).
LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_probe = msgspec.json.Encoder()


def encodable_text(text: str) -> str:
    """`text` with U+FFFD for each lone surrogate."""
    if LONE_SURROGATE.search(text) is None:
        return text
    return LONE_SURROGATE.sub("\ufffd", text)


def encodable_reply(reply: ModelReply) -> ModelReply:
    """`reply` with U+FFFD for each lone surrogate in its text, tool calls (ids, names,
    arguments, argument text), stop reason and native payload; `reply` itself when it holds
    none (one encoding tells)."""
    try:
        _probe.encode(reply)
    except UnicodeEncodeError:
        pass
    else:
        return reply
    calls = [
        ToolCall(
            encodable_text(call.id),
            encodable_text(call.name),
            encodable_tree(call.arguments),
            call.raw_arguments
            if isinstance(call.raw_arguments, msgspec.UnsetType)
            else encodable_text(call.raw_arguments),
        )
        for call in reply.tool_calls
    ]
    return ModelReply(
        encodable_text(reply.text),
        calls,
        reply.usage,
        None if reply.stop_reason is None else encodable_text(reply.stop_reason),
        None if reply.raw is None else encodable_tree(reply.raw),
    )


def encodable_tree(value: Any) -> Any:
    """A JSON-like tree (what an SDK parsed) with U+FFFD for each lone surrogate in its
    strings and keys; a new tree of plain dicts and lists."""
    if isinstance(value, str):
        return encodable_text(value)
    if isinstance(value, dict):
        return {encodable_tree(key): encodable_tree(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [encodable_tree(item) for item in value]
    return value
