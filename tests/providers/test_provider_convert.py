"""History → vendor messages, and tool-argument text → ToolCall (sans-I/O)."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.shapes import Message, ToolCall
from robotad.agent.provider import NamedTool
from robotad.providers.convert import (
    anthropic_messages,
    anthropic_tool_choice,
    openai_messages,
    openai_tool_choice,
    reported_usage,
    tool_call,
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=4)


def test_openai_history_conversion() -> None:
    good = ToolCall("c1", "Read", {"path": "a"})
    bad = ToolCall("c2", "Bash", {}, raw_arguments='{"command": ')
    interrupted = Message.assistant("I was say", interrupted=True)
    history = [
        Message.system("sys"),
        Message.user("u1"),
        Message.assistant(None, [good, bad]),
        Message.tool("c1", "Read", "file text", ok=True),
        Message.tool("c2", "Bash", "invalid arguments", ok=False),
        Message.assistant("done"),
        interrupted,
    ]
    assert openai_messages(history) == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "u1"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "Read", "arguments": '{"path":"a"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "Bash", "arguments": '{"command": '},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "file text"},
        {"role": "tool", "tool_call_id": "c2", "content": "invalid arguments"},
        {"role": "assistant", "content": "done"},
        {"role": "assistant", "content": "I was say"},
    ]


def test_openai_tool_choice() -> None:
    assert openai_tool_choice("auto") == "auto"
    assert openai_tool_choice("none") == "none"
    assert openai_tool_choice("required") == "required"
    assert openai_tool_choice(NamedTool("Grep")) == {
        "type": "function",
        "function": {"name": "Grep"},
    }


def test_anthropic_history_conversion() -> None:
    call = ToolCall("t1", "Read", {"path": "a"})
    system, turns = anthropic_messages(
        [
            Message.system("one"),
            Message.user("first"),
            Message.user("second"),
            Message.assistant("", [call]),
            Message.tool("t1", "Read", "text", ok=True),
            Message.user(""),
            Message.assistant("half", interrupted=True),
            Message.system(""),
            Message.system("two"),
        ]
    )
    assert system == "one\n\ntwo"
    assert turns == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}],
        },
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"path": "a"}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "text"}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "half"}]},
    ]


def test_anthropic_tool_choice() -> None:
    assert anthropic_tool_choice("auto") == {"type": "auto"}
    assert anthropic_tool_choice("none") == {"type": "none"}
    assert anthropic_tool_choice("required") == {"type": "any"}
    assert anthropic_tool_choice(NamedTool("Grep")) == {"type": "tool", "name": "Grep"}


def _message(kind: str, text: str, index: int) -> Message:
    if kind == "system":
        return Message.system(text)
    if kind == "user":
        return Message.user(text)
    if kind == "assistant":
        calls = [ToolCall(f"t{index}", "Read", {})] if index % 2 else []
        return Message.assistant(text, calls)
    return Message.tool(f"t{index}", "Read", text, ok=bool(index % 3))


histories = st.lists(
    st.tuples(st.sampled_from(["system", "user", "assistant", "tool"]), st.text(max_size=4)),
    max_size=12,
).map(lambda items: [_message(kind, text, i) for i, (kind, text) in enumerate(items)])


@settings(max_examples=200, deadline=None)
@given(history=histories)
def test_anthropic_turns_alternate_and_keep_every_block(history: list[Message]) -> None:
    system, turns = anthropic_messages(history)
    roles = [turn["role"] for turn in turns]
    assert all(a != b for a, b in itertools.pairwise(roles))
    blocks: list[dict[str, Any]] = [block for turn in turns for block in turn["content"]]
    assert all(turn["content"] for turn in turns)
    assert all(block["text"] for block in blocks if block["type"] == "text")
    results = [block["tool_use_id"] for block in blocks if block["type"] == "tool_result"]
    assert results == [m.tool_call_id for m in history if m.role == "tool"]
    uses = [block["id"] for block in blocks if block["type"] == "tool_use"]
    assert uses == [call.id for m in history for call in m.calls]
    assert system == "\n\n".join(
        m.content or "" for m in history if m.role == "system" and m.content
    )


@settings(max_examples=200, deadline=None)
@given(arguments=json_objects, indent=st.sampled_from([None, 2]))
def test_object_arguments_parse(arguments: dict[str, Any], indent: int | None) -> None:
    text = json.dumps(arguments, indent=indent)
    assert tool_call("c", "T", text) == ToolCall("c", "T", arguments)


@settings(max_examples=200, deadline=None)
@given(text=st.text())
def test_any_argument_text_gives_a_call(text: str) -> None:
    call = tool_call("c", "T", text)
    if isinstance(call.raw_arguments, str):
        assert call.raw_arguments == text
        assert call.arguments == {}
    else:
        assert isinstance(call.arguments, dict)
        assert call.arguments == ({} if not text.strip() else json.loads(text))


def test_argument_text_edge_cases() -> None:
    assert tool_call("c", "T", "") == ToolCall("c", "T", {})
    assert tool_call("c", "T", "  \n") == ToolCall("c", "T", {})
    assert tool_call("c", "T", "null") == ToolCall("c", "T", {}, raw_arguments="null")
    assert tool_call("c", "T", '"x"') == ToolCall("c", "T", {}, raw_arguments='"x"')
    assert tool_call("c", "T", "NaN") == ToolCall("c", "T", {}, raw_arguments="NaN")
    assert tool_call("c", "T", '{"a": 1} x') == ToolCall("c", "T", {}, raw_arguments='{"a": 1} x')


def test_a_reported_count_past_what_json_holds_is_no_usage() -> None:
    """A server's usage of 10**400 tokens was taken as it came, and the session's context
    figures (``session/get``, ``session/context``) would then overflow a float and answer
    -32603, as an imported usage of it did. A count past 2**53 - 1 is no usage, like a
    negative one."""
    assert reported_usage("openai", 10**400, 1) is None
    assert reported_usage("openai", 1, 1, 2**53) is None
    usage = reported_usage("openai", 2**53 - 2, 1)
    assert usage is not None
    assert usage.used == 2**53 - 1
