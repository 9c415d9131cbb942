"""``session/fork``'s history rule, as a plain function over messages.

A fork's history is the source's up to and including ``atMessageId`` (default: all of it). A
parked execution is never carried into a fork: if the cut leaves an assistant message whose
tool calls have no result inside the cut — the open round of a waiting execution, or a round
cut between a call and its result — each such call is **closed as failed** in the fork, with
a tool message appended after the cut saying it was not carried over. So the fork keeps every
message of the source up to the cut (a person forking "at" a tool request sees that request),
and its history never holds an open round, which its next run would otherwise try to continue
without any approval record behind it.

The fork's ``turnCount`` is the source's when the fork takes the whole history; for a cut, the
number of turns the cut holds that reached a final reply (a user message later followed, before
the next user message, by a complete assistant message without tool calls).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import msgspec
from msgspec import UNSET

from protocol.errors import SessionNotFound
from protocol.shapes import Message

__all__ = ["NOT_CARRIED_OVER", "ForkedHistory", "fork_history"]

#: The content of a result that closes a call the fork did not carry over.
NOT_CARRIED_OVER = "not carried over: the fork was taken before this call had a result"


@dataclass(frozen=True, slots=True)
class ForkedHistory:
    """The fork's messages, the id of the source message it was taken at ("" for an empty
    history) and its completed-turn count."""

    messages: list[Message]
    message_id: str
    turn_count: int


def fork_history(
    session_id: str,
    history: Sequence[Message],
    at_message_id: str | None,
    source_turn_count: int,
) -> ForkedHistory:
    """The history of a fork of `session_id` taken at `at_message_id` (None: all of it).

    Raises `SessionNotFound` with ``data.messageId`` when no message has that id. The source
    messages are never modified: the fork gets copies.
    """
    if at_message_id is None:
        cut = list(history)
        at = cut[-1].id if cut else ""
        whole = True
    else:
        index = next((i for i, m in enumerate(history) if m.id == at_message_id), None)
        if index is None:
            error = SessionNotFound(session_id, messageId=at_message_id)
            error.message = f"session {session_id} has no message {at_message_id}"
            error.args = (error.message,)
            raise error
        cut = list(history[: index + 1])
        at = at_message_id
        whole = index == len(history) - 1
    messages = [_copy(message) for message in cut]
    closing = _unanswered_calls(messages)
    messages.extend(
        Message.tool(call_id, name, NOT_CARRIED_OVER, ok=False) for call_id, name in closing
    )
    turns = source_turn_count if whole and not closing else completed_turns(messages)
    return ForkedHistory(messages, at, turns)


def completed_turns(messages: Sequence[Message]) -> int:
    """How many user messages are followed, before the next one, by a final reply."""
    count = 0
    waiting = False
    for message in messages:
        if message.role == "user":
            waiting = True
        elif (
            waiting
            and message.role == "assistant"
            and message.state == "complete"
            and not message.calls
        ):
            count += 1
            waiting = False
    return count


def _unanswered_calls(messages: Sequence[Message]) -> list[tuple[str, str]]:
    """(call id, tool) of every tool call with no result message after it, in call order."""
    answered = {
        m.tool_call_id for m in messages if m.role == "tool" and m.tool_call_id is not UNSET
    }
    return [
        (call.id, call.name)
        for message in messages
        if message.role == "assistant"
        for call in message.calls
        if call.id not in answered
    ]


def _copy(message: Message) -> Message:
    """A deep copy, so the fork can never alias the source's mutable messages."""
    return msgspec.convert(msgspec.to_builtins(message), Message)
