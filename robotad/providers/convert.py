"""History → vendor request shapes, and vendor replies' parts → ours: tool-argument text →
`ToolCall`, reported token counts → `Usage` (sans-I/O).

Both vendors get exactly the history the loop hands over, nothing added:

- **OpenAI Chat Completions**: one message per history entry, in order. An assistant entry
  carries its tool calls as function calls whose argument text is the model's own (the
  verbatim `raw_arguments` when it was not valid JSON); a tool entry carries its
  `tool_call_id`. An interrupted assistant entry is sent as the content it got to.
- **Anthropic Messages**: every system entry, wherever it stands, joins the top-level
  ``system`` text (blank-line separated). Tool results become ``tool_result`` blocks of a user
  turn (``is_error`` for a failed result), tool calls ``tool_use`` blocks of the assistant
  turn. Empty text is left out (the API refuses empty text blocks; an empty tool result is a
  ``tool_result`` without ``content``) and consecutive turns of the same role are merged,
  which the API requires.

The one change either makes: a tool-call id the vendor would refuse (Anthropic: a character
outside ``[A-Za-z0-9_-]``; OpenAI: more than 40 characters; either: none), and a call's id an
earlier call of the history already used (an imported history of a server that numbers each
reply's calls ``call_0``…), is sent as its `robotad.providers.sent_ids` replacement, on the
call and on every result of its own round answering it alike.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import msgspec

from protocol.shapes import Message, ToolCall, Usage
from robotad.agent.provider import NamedTool, ToolChoice, ToolSchema
from robotad.providers.sent_ids import ANTHROPIC_CALL_IDS, OPENAI_CALL_IDS, sent_call_ids

__all__ = [
    "anthropic_messages",
    "anthropic_tool_choice",
    "anthropic_tools",
    "openai_messages",
    "openai_tool_choice",
    "openai_tools",
    "reported_usage",
    "summed_counts",
    "text_of",
    "tool_call",
]

log = logging.getLogger("robotad.providers")


def text_of(value: object) -> str | None:
    """A reply's string member as text: the SDKs build their stream events without checking
    types, so a server's number (or object) where a string belongs (a call's id, a stop
    reason) comes as it is — as its JSON text it cannot enter history, events or the log as
    a non-string. None stays None."""
    if value is None or isinstance(value, str):
        return value
    return msgspec.json.encode(value).decode()


def tool_call(call_id: str, name: str, argument_text: str) -> ToolCall:
    """A `ToolCall` from the model's argument text. Blank text means no arguments; text that
    is not a JSON object is kept verbatim in `raw_arguments`, with ``arguments = {}``."""
    if not argument_text.strip():
        return ToolCall(call_id, name, {})
    try:
        value = msgspec.json.decode(argument_text)
    except msgspec.DecodeError:
        value = None
    if isinstance(value, dict):
        return ToolCall(call_id, name, value)
    return ToolCall(call_id, name, {}, raw_arguments=argument_text)


def reported_usage(
    vendor: str, input_tokens: object, output_tokens: object, total_tokens: object = None
) -> Usage | None:
    """The `Usage` a vendor's reply reported, or None — with a warning in robotad's log —
    when a count is negative, past `protocol.shapes.MAX_SAFE_INTEGER` or no whole number
    (a string, ``NaN``, ``1e400``), which no call can have (the context figures then rest on
    the estimate instead of a nonsense figure). A whole number sent as a float (``12.0``)
    counts as that number."""
    counts: dict[str, Any] = {
        "inputTokens": _whole(input_tokens),
        "outputTokens": _whole(output_tokens),
    }
    if total_tokens is not None:
        counts["totalTokens"] = _whole(total_tokens)
    try:
        return msgspec.convert(counts, Usage)
    except msgspec.ValidationError:
        # A count that is no number is named by its type: the server's text stays out of the log.
        shown = {
            name: value if isinstance(value, int) else type(value).__name__
            for name, value in counts.items()
        }
        log.warning(
            "%s reported a token count no call can have (negative, past 2**53 - 1, or not a "
            "whole number) %s; usage ignored",
            vendor,
            shown,
        )
        return None


def summed_counts(counts: Iterable[object]) -> object:
    """The sum of token counts when each is a whole number, else the first that is not (for
    `reported_usage` to refuse)."""
    total = 0
    for count in counts:
        value = _whole(count)
        if isinstance(value, bool) or not isinstance(value, int):
            return value
        total += value
    return total


def _whole(count: object) -> object:
    """`count`, an integral finite float made an int; anything else as it is."""
    if isinstance(count, float) and count.is_integer():
        return int(count)
    return count


def _argument_text(call: ToolCall) -> str:
    if isinstance(call.raw_arguments, str):
        return call.raw_arguments
    return msgspec.json.encode(call.arguments).decode()


# -- OpenAI Chat Completions -----------------------------------------------------------------


def openai_messages(history: list[Message]) -> list[dict[str, Any]]:
    """The ``messages`` of a Chat Completions request."""
    sent_ids = sent_call_ids(history, OPENAI_CALL_IDS)
    out: list[dict[str, Any]] = []
    for message, ids in zip(history, sent_ids, strict=True):
        content = message.content or ""
        if message.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": content}
            if message.calls:
                entry["tool_calls"] = [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": _argument_text(call)},
                    }
                    for call, call_id in zip(message.calls, ids, strict=True)
                ]
                if not content:
                    entry["content"] = None
            out.append(entry)
        elif message.role == "tool":
            out.append({"role": "tool", "tool_call_id": ids[0], "content": content})
        else:
            out.append({"role": message.role, "content": content})
    return out


def openai_tools(tools: list[ToolSchema]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.input_schema,
            },
        }
        for tool in tools
    ]


def openai_tool_choice(choice: ToolChoice) -> str | dict[str, Any]:
    if isinstance(choice, NamedTool):
        return {"type": "function", "function": {"name": choice.name}}
    return choice


# -- Anthropic Messages ------------------------------------------------------------------


def anthropic_messages(history: list[Message]) -> tuple[str, list[dict[str, Any]]]:
    """The ``system`` text and the ``messages`` of a Messages request."""
    sent_ids = sent_call_ids(history, ANTHROPIC_CALL_IDS)
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message, ids in zip(history, sent_ids, strict=True):
        if message.role == "system":
            if message.content:
                system.append(message.content)
            continue
        role, blocks = _anthropic_blocks(message, ids)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return "\n\n".join(system), turns


def _anthropic_blocks(message: Message, ids: tuple[str, ...]) -> tuple[str, list[dict[str, Any]]]:
    """The role and content blocks of one non-system message, its calls or its result sent
    under `ids` (`sent_call_ids`)."""
    text = message.content or ""
    if message.role == "tool":
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": ids[0]}
        if text:
            result["content"] = text
        if not message.ok:
            result["is_error"] = True
        return "user", [result]
    blocks: list[dict[str, Any]] = []
    if text:
        blocks.append({"type": "text", "text": text})
    if message.role == "assistant":
        blocks += [
            {"type": "tool_use", "id": call_id, "name": call.name, "input": call.arguments}
            for call, call_id in zip(message.calls, ids, strict=True)
        ]
        return "assistant", blocks
    return "user", blocks


def anthropic_tools(tools: list[ToolSchema]) -> list[dict[str, Any]]:
    return [
        {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}
        for tool in tools
    ]


def anthropic_tool_choice(choice: ToolChoice) -> dict[str, Any]:
    if isinstance(choice, NamedTool):
        return {"type": "tool", "name": choice.name}
    return {"type": {"auto": "auto", "none": "none", "required": "any"}[choice]}
