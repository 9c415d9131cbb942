"""`model_text`: a lone surrogate a model's reply carries becomes U+FFFD wherever it stands
(text, a tool call's id, name, arguments, keys and argument text, the stop reason, the
native payload); a reply with none is returned as it is."""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.shapes import ToolCall, Usage
from robotad.agent.model_text import encodable_reply, encodable_text
from robotad.agent.provider import ModelReply


def test_every_place_a_lone_surrogate_can_stand_gets_a_replacement() -> None:
    call = ToolCall("c\ud800", "n\udfff", {"k\udc80": ["v\udcff", {"x": "\ud83d"}], "n": 1})
    raw_call = ToolCall("c2", "n2", {}, raw_arguments='{"a": "\udcff')
    reply = ModelReply("a\udcffb", [call, raw_call], Usage(1, 2), "end\udcff", {"t": ["\udcff", 3]})
    fixed = encodable_reply(reply)
    assert fixed.text == "a\ufffdb"
    assert fixed.tool_calls[0] == ToolCall(
        "c\ufffd", "n\ufffd", {"k\ufffd": ["v\ufffd", {"x": "\ufffd"}], "n": 1}
    )
    assert fixed.tool_calls[1].raw_arguments == '{"a": "\ufffd'
    assert fixed.usage == Usage(1, 2)
    assert fixed.stop_reason == "end\ufffd"
    assert fixed.raw == {"t": ["\ufffd", 3]}
    msgspec.json.encode(fixed)  # UTF-8 holds all of it now


def test_a_reply_with_nothing_to_change_is_the_same_reply() -> None:
    reply = ModelReply("café 😀 \ufffd", [ToolCall("c", "n", {"a": "é"})], raw={"x": "y"})
    assert encodable_reply(reply) is reply
    assert encodable_text("😀") == "😀"


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(blacklist_categories=())))
def test_any_text_comes_back_encodable_and_otherwise_unchanged(text: str) -> None:
    fixed = encodable_text(text)
    fixed.encode("utf-8")
    assert len(fixed) == len(text)
    assert all(a == b or 0xD800 <= ord(a) <= 0xDFFF for a, b in zip(text, fixed, strict=True))
