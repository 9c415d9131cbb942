"""A history's tool-call ids as each vendor is sent them (sans-I/O): only ids the vendor
accepts, a call and its results alike, no two ids as one, an accepted id unchanged.

Anthropic refuses an id outside ``^[a-zA-Z0-9_-]+$`` and OpenAI one over 40 characters; the
id being in the history, every later request of the session failed the same way. The history
is never changed: each request is sent a replacement of the refused id instead."""

from __future__ import annotations

import itertools
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


def sent_calls(history: list[Message], kind: str) -> list[str]:
    """The id each call of a `history_of` history is sent under, in order, checking every id
    sent is accepted and each result is sent under its own call's (a round's results follow
    its calls in their order, so the results' ids are the calls' ids in order)."""
    extract, accepted = VENDORS[kind]
    uses, results = extract(history)
    assert all(accepted(sent) for sent in uses + results), (kind, uses, results)
    assert results == uses, "a result is sent under another call's id"
    return uses


def sent_pairs(history: list[Message], kind: str) -> dict[str, str]:
    """Each id of a `history_of` history that no two calls share, with the id sent for it."""
    originals = [call.id for m in history for call in m.calls]
    return {
        original: sent
        for original, sent in zip(originals, sent_calls(history, kind), strict=True)
        if originals.count(original) == 1
    }


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
    sent = sent_calls(history, kind)
    _, accepted = VENDORS[kind]
    originals = [call_id for round_ids in ids for call_id in round_ids]
    # An id the vendor takes goes as it is on its first call (the prompt cache sees the same
    # bytes); a history whose every id is taken and used once is sent as it is.
    for n, (original, sent_id) in enumerate(zip(originals, sent, strict=True)):
        if accepted(original) and original not in originals[:n]:
            assert sent_id == original
    # No two calls are sent under one id (the results of each went with their own).
    assert len(set(sent)) == len(sent)


@pytest.mark.parametrize("kind", sorted(VENDORS))
@settings(max_examples=200, deadline=None)
@given(ids=rounds, more=rounds)
def test_a_longer_history_sends_its_earlier_ids_as_before(
    kind: str, ids: list[list[str]], more: list[list[str]]
) -> None:
    """Deterministic per call: the next turn's request repeats the previous one's ids, and a
    history converted again is sent the same."""
    before = sent_calls(history_of(ids), kind)
    assert sent_calls(history_of(ids), kind) == before
    after = sent_calls(history_of(ids + more), kind)
    assert after[: len(before)] == before


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
    held = [(), (), ("call_1", "toolu_2"), ("call_1",), ("toolu_2",), (), ("c" * 40,), ("c" * 40,)]
    assert sent_call_ids(history, ANTHROPIC_CALL_IDS) == [*held, ()]
    assert sent_call_ids(history, OPENAI_CALL_IDS) == [*held, ()]
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


# -- an id repeated across rounds -------------------------------------------------------------
#
# An imported artifact (import refuses only a repeat of a call still without a result), or a
# session stored before robotad gave a repeated id a fresh one as the reply came, holds the
# ids of a server that numbers each reply's calls from zero in every round. Anthropic refuses a
# repeated ``tool_use`` id, so every request of such a session failed.


def rounds_sent(history: list[Message]) -> list[tuple[list[str], list[str]]]:
    """Each assistant turn of the Messages request with tool calls: its ``tool_use`` ids and
    the ``tool_result`` ids of the user turn right after it (where Anthropic looks for them)."""
    _, turns = anthropic_messages(history)
    found = []
    for turn, answer in itertools.pairwise(turns):
        uses = [b["id"] for b in turn["content"] if b["type"] == "tool_use"]
        if turn["role"] == "assistant" and uses:
            results = [b["tool_use_id"] for b in answer["content"] if b["type"] == "tool_result"]
            found.append((uses, results))
    return found


@pytest.mark.parametrize("kind", sorted(VENDORS))
@pytest.mark.parametrize("count", [2, 3])
def test_an_id_each_round_reuses_is_sent_apart_from_the_second_round_on(
    kind: str, count: int
) -> None:
    history = history_of([["call_0"]] * count)
    sent = sent_calls(history, kind)  # each round's results under its own call's id
    rule = ANTHROPIC_CALL_IDS if kind == "anthropic" else OPENAI_CALL_IDS
    assert sent == ["call_0"] + [rule.replacement("call_0", repeat=n) for n in range(1, count)]
    assert len(set(sent)) == count
    assert all(re.fullmatch(r"call_0_[0-9a-f]{16}", sent_id) for sent_id in sent[1:])


def test_each_round_s_results_go_with_its_own_calls() -> None:
    """The second round's results answer the second round's calls, in the very next user
    turn, never the first round's; the first round is sent as it was."""
    history = history_of([["call_0", "call_1"], ["call_0", "call_1"], ["call_1"]])
    first, second, third = rounds_sent(history)
    assert first == (["call_0", "call_1"], ["call_0", "call_1"])
    assert second[0] == second[1]
    assert third[0] == third[1]
    assert len({*first[0], *second[0], *third[0]}) == 5
    # The Chat Completions request pairs them the same way.
    messages = openai_messages(history)
    for n, message in enumerate(messages):
        calls = [call["id"] for call in message.get("tool_calls", [])]
        answers = [m["tool_call_id"] for m in messages[n + 1 : n + 1 + len(calls)]]
        assert answers == calls


def test_results_out_of_call_order_go_with_the_calls_in_turn() -> None:
    """Within a round, the k-th result under an id answers the k-th call under it: a round
    calling ``a``, ``b``, ``a`` answered ``b``, ``a``, ``a`` sends ``b``'s with ``b``, and the
    two ``a`` results with the first and the second ``a`` call."""
    calls = [ToolCall(call_id, "Read", {"n": n}) for n, call_id in enumerate("aba")]
    history = [
        Message.user("go"),
        Message.assistant("", calls),
        *(Message.tool(call_id, "Read", "text", ok=True) for call_id in "baa"),
        Message.user("next"),
    ]
    ((uses, results),) = rounds_sent(history)
    assert uses[0] == "a" != uses[2]
    assert uses[1] == "b"
    assert results == [uses[1], uses[0], uses[2]]


@pytest.mark.parametrize("kind", sorted(VENDORS))
def test_an_id_repeated_within_one_round_is_sent_apart(kind: str) -> None:
    """Two calls of one reply under one id (a stored session from before robotad gave the
    second a fresh id; import refuses it) are sent under two, each with its result."""
    sent = sent_calls(history_of([["call_0", "call_0", "call_1"]]), kind)
    assert sent[0] == "call_0"
    assert sent[2] == "call_1"
    assert len(set(sent)) == 3


def test_a_refused_id_repeated_across_rounds_gets_two_replacements() -> None:
    rule = ANTHROPIC_CALL_IDS
    sent = sent_calls(history_of([["functions.Bash:0"], ["functions.Bash:0"]]), "anthropic")
    assert sent == [
        rule.replacement("functions.Bash:0"),
        rule.replacement("functions.Bash:0", repeat=1),
    ]
    assert sent[0] != sent[1]


@pytest.mark.parametrize(
    ("kind", "rule"), [("anthropic", ANTHROPIC_CALL_IDS), ("openai", OPENAI_CALL_IDS)]
)
def test_a_repeat_s_replacement_taken_by_another_id_is_drawn_again(
    kind: str, rule: CallIdRule
) -> None:
    """An id of the history that is already what a repeat would be sent as (crafted, or a
    hash coincidence) goes as it is, and the repeat gets another replacement."""
    lookalike = rule.replacement("call_0", repeat=1)
    sent = sent_calls(history_of([["call_0"], ["call_0"], [lookalike]]), kind)
    assert sent == ["call_0", rule.replacement("call_0", 1, 1), lookalike]
    assert len(set(sent)) == 3


def test_a_result_outside_its_round_answers_the_last_call_under_its_id() -> None:
    """A result that follows no round making its id (a stored history out of order, which
    the vendor refuses anyway) is sent under the id of the last call made under it."""
    history = history_of([["call_0"], ["call_0"]])
    history.append(Message.tool("call_0", "Read", "late", ok=True))
    ids = sent_call_ids(history, ANTHROPIC_CALL_IDS)
    assert ids[-1] == ids[-4] == (ANTHROPIC_CALL_IDS.replacement("call_0", repeat=1),)


def test_the_history_keeps_its_repeated_ids() -> None:
    history = history_of([["call_0"], ["call_0"]])
    before = [(m.role, m.tool_call_id, [c.id for c in m.calls]) for m in history]
    anthropic_messages(history)
    openai_messages(history)
    assert [(m.role, m.tool_call_id, [c.id for c in m.calls]) for m in history] == before
