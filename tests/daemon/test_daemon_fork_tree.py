"""`fork_history` over the checkpoint tree: the prefix is the ancestry of the fork point, every
tool call in a fork stays paired, and a history whose ids cannot be checkpoints is refused."""

from __future__ import annotations

from collections import Counter

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import RecordCorrupt, SessionNotFound
from protocol.shapes import Message, ToolCall
from robotad.daemon.fork import NOT_CARRIED_OVER, fork_history, history_tree

#: A turn: the size of each tool round, whether a final reply ends it.
Turn = tuple[list[int], bool]


def build(turns: list[Turn], parked: int) -> list[Message]:
    """A well-formed history: each turn a user message, rounds of calls each followed by all
    their results (in reverse call order, as concurrent tools may settle), maybe a final
    reply; then, when `parked` > 0, a round of that many calls with no results (a parked
    execution's open round)."""
    history: list[Message] = []
    serial = 0

    def round_of(size: int) -> list[ToolCall]:
        nonlocal serial
        serial += size
        return [ToolCall(f"c{serial - k}", "Read", {"file_path": "/x"}) for k in range(size)]

    for number, (rounds, final) in enumerate(turns):
        history.append(Message.user(f"prompt {number}"))
        for size in rounds:
            calls = round_of(size)
            history.append(Message.assistant(None, calls))
            history += [Message.tool(c.id, c.name, "ok", ok=True) for c in reversed(calls)]
        if final:
            history.append(Message.assistant(f"reply {number}"))
    if parked:
        history += [Message.user("parked"), Message.assistant(None, round_of(parked))]
    return history


def encoded(messages: list[Message]) -> list[bytes]:
    return [msgspec.json.encode(m) for m in messages]


def assert_every_call_paired(messages: list[Message]) -> None:
    """Each tool call id has exactly one tool result after its request, and no result lacks
    a call."""
    requested: dict[str, int] = {}
    for index, message in enumerate(messages):
        for call in message.calls:
            requested[call.id] = index
    results = [(i, m.tool_call_id) for i, m in enumerate(messages) if m.role == "tool"]
    counts = Counter(call_id for _, call_id in results)
    assert set(counts) == set(requested)
    assert all(count == 1 for count in counts.values())
    assert all(index > requested[str(call_id)] for index, call_id in results)


turns_strategy = st.lists(
    st.tuples(st.lists(st.integers(1, 3), max_size=2), st.booleans()), min_size=1, max_size=4
)


@settings(max_examples=150, deadline=None)
@given(turns=turns_strategy, parked=st.integers(0, 2), data=st.data())
def test_a_fork_is_the_ancestry_of_its_point_with_every_call_paired(
    turns: list[Turn], parked: int, data: st.DataObject
) -> None:
    """For any well-formed history (a parked open round included) and any fork point: the
    fork starts with exactly the source's messages up to and including that point, in the
    tree's ancestry order; whatever it adds is a failed not-carried-over result; every call
    in it is paired once; the source is not modified."""
    history = build(turns, parked)
    before = encoded(history)
    index = data.draw(st.integers(0, len(history) - 1), label="fork point")
    at = history[index].id
    forked = fork_history("s", history, at, 0)
    taken = forked.messages[: index + 1]
    assert [m.id for m in taken] == history_tree("s", history).ancestry(at)
    assert encoded(taken) == before[: index + 1]
    assert forked.message_id == at
    for extra in forked.messages[index + 1 :]:
        assert (extra.role, extra.content, extra.ok) == ("tool", NOT_CARRIED_OVER, False)
    assert_every_call_paired(forked.messages)
    assert encoded(history) == before


@settings(max_examples=50, deadline=None)
@given(turns=turns_strategy, parked=st.integers(0, 2))
def test_the_default_fork_is_the_whole_active_path(turns: list[Turn], parked: int) -> None:
    """No fork point: the fork is taken at the active checkpoint, the last message."""
    history = build(turns, parked)
    whole = fork_history("s", history, None, 9)
    at_last = fork_history("s", history, history[-1].id, 9)
    assert whole.message_id == history[-1].id
    assert [m.id for m in whole.messages[: len(history)]] == [m.id for m in history]
    assert encoded(whole.messages[: len(history)]) == encoded(at_last.messages[: len(history)])
    assert whole.turn_count == at_last.turn_count
    if not parked:
        assert whole.turn_count == 9, "a whole history without an open round keeps the count"
    assert_every_call_paired(whole.messages)


def test_the_history_is_one_branch_ending_at_the_last_message() -> None:
    history = build([([2], True), ([], True)], 0)
    tree = history_tree("s", history)
    ids = [m.id for m in history]
    assert tree.path() == ids
    assert tree.active == ids[-1]
    assert list(tree) == ids
    assert [tree.parent(i) for i in ids] == [None, *ids[:-1]]


def test_an_unknown_fork_point_is_session_not_found_naming_it() -> None:
    with pytest.raises(SessionNotFound) as missing:
        fork_history("s", build([([], True)], 0), "m-nope", 0)
    assert missing.value.data == {"sessionId": "s", "messageId": "m-nope"}


def test_a_repeated_message_id_is_a_located_refusal() -> None:
    """A hand-edited record may repeat an id; such an id names no single fork point."""
    history = build([([1], True)], 0)
    history[3] = msgspec.structs.replace(history[3], id=history[1].id)
    for at in (None, history[0].id):
        with pytest.raises(RecordCorrupt) as refused:
            fork_history("s", history, at, 0)
        (issue,) = refused.value.data["issues"]  # type: ignore[index]
        assert issue["path"] == "$.record.messages[3].id"
        assert "$.record.messages[1]" in issue["message"]


def test_an_empty_message_id_is_a_located_refusal() -> None:
    history = build([([], True)], 0)
    history[1] = msgspec.structs.replace(history[1], id="")
    with pytest.raises(RecordCorrupt) as refused:
        history_tree("s", history)
    assert refused.value.data["issues"][0]["path"] == "$.record.messages[1].id"  # type: ignore[index]
