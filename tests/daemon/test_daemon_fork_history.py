"""`fork_history`: the cut, the closing of calls a fork does not carry, the turn count."""

from __future__ import annotations

import msgspec
import pytest

from protocol.errors import SessionNotFound
from protocol.shapes import Message, ToolCall
from robotad.daemon.fork import (
    NOT_CARRIED_OVER,
    UNCERTAIN_NOT_CARRIED_OVER,
    completed_turns,
    fork_history,
)
from robotad.session.recovery.recoverable import uncertain_result_text


def call(call_id: str, name: str = "Read") -> ToolCall:
    return ToolCall(call_id, name, {"file_path": "/x"})


def conversation() -> list[Message]:
    """user, assistant(2 calls), tool, tool, assistant(final), user, assistant(final)."""
    return [
        Message.user("first"),
        Message.assistant(None, [call("c1"), call("c2", "Glob")]),
        Message.tool("c1", "Read", "one", ok=True),
        Message.tool("c2", "Glob", "two", ok=True),
        Message.assistant("done"),
        Message.user("second"),
        Message.assistant("again"),
    ]


def test_default_is_the_whole_history_with_the_source_turn_count() -> None:
    history = conversation()
    forked = fork_history("s", history, None, 7)
    assert forked.messages == history
    assert forked.message_id == history[-1].id
    assert forked.turn_count == 7


def test_a_cut_includes_the_named_message_and_counts_its_completed_turns() -> None:
    history = conversation()
    forked = fork_history("s", history, history[4].id, 2)
    assert forked.messages == history[:5]
    assert forked.message_id == history[4].id
    assert forked.turn_count == 1


def test_a_cut_inside_a_round_closes_each_unanswered_call_as_failed() -> None:
    history = conversation()
    forked = fork_history("s", history, history[2].id, 2)
    assert forked.messages[:3] == history[:3]
    closing = forked.messages[3:]
    assert [(m.role, m.tool_call_id, m.name) for m in closing] == [("tool", "c2", "Glob")]
    assert closing[0].content == NOT_CARRIED_OVER
    assert closing[0].ok is False
    assert forked.turn_count == 0


def test_an_open_round_at_the_end_is_never_carried_over() -> None:
    """A parked execution's open round (calls without results) is closed in the fork."""
    history = [*conversation()[:2]]
    forked = fork_history("s", history, None, 0)
    assert [m.tool_call_id for m in forked.messages[2:]] == ["c1", "c2"]
    assert all(not m.ok for m in forked.messages[2:])


def test_a_call_of_unknown_outcome_closes_saying_so() -> None:
    """Decision 64: a call the source lists as uncertain (robotad stopped while it ran) closes
    in the fork with a result starting "outcome unknown:", as it would in the source; the
    other calls of the round close as not carried over."""
    history = [
        Message.user("go"),
        Message.assistant(None, [call("c1", "Bash"), call("c2", "Glob")]),
    ]
    forked = fork_history("s", history, None, 0, uncertain=["c1"])
    cut, other = forked.messages[2:]
    assert (cut.tool_call_id, cut.ok) == ("c1", False)
    assert cut.content == uncertain_result_text("Bash") + UNCERTAIN_NOT_CARRIED_OVER
    assert str(cut.content).startswith("outcome unknown: Bash was running")
    assert (other.tool_call_id, other.content) == ("c2", NOT_CARRIED_OVER)


def test_the_source_messages_are_never_shared() -> None:
    history = conversation()
    forked = fork_history("s", history, None, 2)
    forked.messages[0].content = "changed"
    assert history[0].content == "first"
    assert msgspec.json.encode(forked.messages[1]) == msgspec.json.encode(history[1])


def test_an_unknown_message_is_session_not_found_naming_it() -> None:
    with pytest.raises(SessionNotFound) as missing:
        fork_history("s", conversation(), "m-nope", 0)
    assert missing.value.data == {"sessionId": "s", "messageId": "m-nope"}
    assert "m-nope" in missing.value.message


def test_an_empty_history_forks_empty() -> None:
    forked = fork_history("s", [], None, 0)
    assert (forked.messages, forked.message_id, forked.turn_count) == ([], "", 0)


def test_completed_turns_counts_final_replies_only() -> None:
    interrupted = Message.assistant("partial", interrupted=True)
    assert completed_turns([Message.user("a"), interrupted]) == 0
    assert completed_turns(conversation()) == 2
