"""A history's tool-call ids as each vendor is sent them (sans-I/O): only ids the vendor
accepts, a call and its results alike, no two ids as one, an accepted id unchanged.

Anthropic refuses an id outside ``^[a-zA-Z0-9_-]+$`` and OpenAI one over 40 characters; the
id being in the history, every later request of the session failed the same way. The history
is never changed: each request is sent a replacement of the refused id instead."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from msgspec import UNSET

from protocol.shapes import Message, ToolCall
from robotad.providers.convert import anthropic_messages, openai_messages
from robotad.providers.sent_ids import (
    ANTHROPIC_CALL_IDS,
    OPENAI_CALL_IDS,
    CallIdRule,
    sent_call_ids,
)


def anthropic_ok(call_id: str) -> bool:
    """The API's own pattern, ``^[a-zA-Z0-9_-]+$`` (a regex ``$`` would let a final newline
    through; the API's does not)."""
    return re.fullmatch(r"[a-zA-Z0-9_-]+", call_id) is not None


def openai_ok(call_id: str) -> bool:
    return 1 <= len(call_id) <= 40


def anthropic_ids(history: list[Message]) -> tuple[list[str], list[str]]:
    """The ``tool_use`` ids and the ``tool_result`` ids of the Messages request, in order."""
    _, turns = anthropic_messages(history)
    blocks = [block for turn in turns for block in turn["content"]]
    uses = [block["id"] for block in blocks if block["type"] == "tool_use"]
    results = [block["tool_use_id"] for block in blocks if block["type"] == "tool_result"]
    return uses, results


def openai_ids(history: list[Message]) -> tuple[list[str], list[str]]:
    """The ``tool_calls`` ids and the ``tool_call_id`` of the Chat Completions request."""
    messages = openai_messages(history)
    calls = [call["id"] for m in messages for call in m.get("tool_calls", [])]
    results = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    return calls, results


Vendor = tuple[Callable[[list[Message]], tuple[list[str], list[str]]], Callable[[str], bool]]
VENDORS: dict[str, Vendor] = {
    "anthropic": (anthropic_ids, anthropic_ok),
    "openai": (openai_ids, openai_ok),
}


def history_of(rounds: Sequence[Sequence[str]]) -> list[Message]:
    """A conversation whose assistant messages call with each round's ids, each call answered
    by a tool message right after."""
    history = [Message.system("sys")]
    for number, ids in enumerate(rounds):
        history.append(Message.user(f"prompt {number}"))
        calls = [ToolCall(call_id, "Read", {"n": n}) for n, call_id in enumerate(ids)]
        history.append(Message.assistant(f"round {number}", calls))
        history += [Message.tool(call_id, "Read", "text", ok=True) for call_id in ids]
    history.append(Message.user("last"))
    return history


def sent_pairs(history: list[Message], kind: str) -> dict[str, str]:
    """Each id of `history` with the one id sent for it, checking every id sent is accepted
    and that every place an id stands in is sent the same id."""
    extract, accepted = VENDORS[kind]
    uses, results = extract(history)
    originals = [call.id for m in history for call in m.calls]
    originals += [m.tool_call_id for m in history if m.role == "tool"]
    pairs: dict[str, str] = {}
    for original, sent in zip(originals, uses + results, strict=True):
        assert isinstance(original, str)
        assert accepted(sent), (kind, original, sent)
        assert pairs.setdefault(original, sent) == sent, f"{original!r} sent two ways"
    return pairs


any_id = st.one_of(
    st.text(max_size=60),
    st.from_regex(r"[A-Za-z0-9_-]{1,60}", fullmatch=True),
    st.sampled_from(["", "a.b", "a_b", "functions.Bash:0", "call 1", "x" * 40, "x" * 41, "é"]),
)
rounds = st.lists(st.lists(any_id, max_size=4), max_size=5)


@pytest.mark.parametrize("kind", sorted(VENDORS))
@settings(max_examples=300, deadline=None)
@given(ids=rounds)
def test_every_id_sent_is_accepted_paired_and_distinct(kind: str, ids: list[list[str]]) -> None:
    history = history_of(ids)
    pairs = sent_pairs(history, kind)
    _, accepted = VENDORS[kind]
    # An id the vendor takes goes as it is (the prompt cache sees the same bytes).
    assert all(sent == original for original, sent in pairs.items() if accepted(original))
    # No two ids are sent as one: a result still answers its own call.
    assert len(set(pairs.values())) == len(pairs)


@pytest.mark.parametrize("kind", sorted(VENDORS))
@settings(max_examples=200, deadline=None)
@given(ids=rounds, more=rounds)
def test_a_longer_history_sends_its_earlier_ids_as_before(
    kind: str, ids: list[list[str]], more: list[list[str]]
) -> None:
    """Deterministic per id: the next turn's request repeats the previous one's ids."""
    before = sent_pairs(history_of(ids), kind)
    after = sent_pairs(history_of(ids + more), kind)
    assert {original: after[original] for original in before} == before


def test_ids_servers_make_are_sent_as_each_vendor_takes_them() -> None:
    vllm = "chatcmpl-tool-" + "0123456789abcdef" * 2  # 46 characters
    history = history_of([["functions.Bash:0", vllm, "call_ok", "toolu_01Abc-d_e"]])
    anthropic = sent_pairs(history, "anthropic")
    assert re.fullmatch(r"functions_Bash_0_[0-9a-f]{16}", anthropic["functions.Bash:0"])
    assert anthropic[vllm] == vllm
    openai = sent_pairs(history, "openai")
    assert openai["functions.Bash:0"] == "functions.Bash:0"
    assert re.fullmatch(r"chatcmpl-tool-012345678_[0-9a-f]{16}", openai[vllm])
    for pairs in (anthropic, openai):
        assert pairs["call_ok"] == "call_ok"
        assert pairs["toolu_01Abc-d_e"] == "toolu_01Abc-d_e"


def test_accepted_ids_leave_the_request_as_it_was() -> None:
    history = history_of([["call_1", "toolu_2"], ["c" * 40]])
    assert sent_call_ids(history, ANTHROPIC_CALL_IDS) == {}
    assert sent_call_ids(history, OPENAI_CALL_IDS) == {}
    _, turns = anthropic_messages(history)
    assert turns[1]["content"][1] == {
        "type": "tool_use",
        "id": "call_1",
        "name": "Read",
        "input": {"n": 0},
    }
    assert turns[2]["content"][0]["tool_use_id"] == "call_1"


@pytest.mark.parametrize(
    ("kind", "rule", "refused"),
    [("anthropic", ANTHROPIC_CALL_IDS, "a.b"), ("openai", OPENAI_CALL_IDS, "x" * 41)],
)
def test_an_id_made_to_look_like_a_replacement_takes_no_other_s_place(
    kind: str, rule: CallIdRule, refused: str
) -> None:
    """An id that is a refused id's replacement already (crafted, or a hash coincidence)
    stays as it is, and the refused id is given another."""
    lookalike = rule.replacement(refused)
    history = history_of([[refused], [lookalike]])
    pairs = sent_pairs(history, kind)
    assert pairs[lookalike] == lookalike
    assert pairs[refused] == rule.replacement(refused, 1) != lookalike


def test_an_empty_or_unanswered_id_is_sent_as_one_the_vendor_takes() -> None:
    history = history_of([[""]])
    orphan = Message.tool("x", "Read", "text", ok=True)
    orphan.tool_call_id = UNSET
    history.insert(-1, orphan)
    for kind in VENDORS:
        extract, accepted = VENDORS[kind]
        uses, results = extract(history)
        assert all(accepted(sent) for sent in uses + results)
        # A tool message that names no call is sent as answering "", as the call with id "".
        assert results == [uses[0], uses[0]]


@pytest.mark.parametrize("bound", [0, 17])
def test_a_bound_with_no_room_for_a_digest_is_refused(bound: int) -> None:
    with pytest.raises(ValueError, match="no room"):
        CallIdRule(word_characters=False, max_length=bound)
