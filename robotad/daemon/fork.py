"""``session/fork``'s history rule, as plain functions over messages.

The source's history is read as a `CheckpointTree`: every message is a checkpoint whose parent
is the message before it, so the history is one branch and a fork point names a node of it.
A fork's history is the ancestry of ``atMessageId`` in that tree — root up to and including it
— or the whole active path when no message is named. An id the tree does not hold is
`SessionNotFound` with ``data.messageId``. A history whose ids cannot all be checkpoints (an
empty or a repeated id, which only a hand-edited record can hold) has no
well-defined fork point and is refused as `RecordCorrupt`, located at the offending message;
an import holding one is refused before anything is written (`import_rules`).

A fork never needs the source's own `forkedFrom` chain: a fork's record already holds copies of
its source's messages, ids included, so the ancestry of any of its messages is in its own
history.

A parked execution is never carried into a fork: if the cut leaves an assistant message whose
tool calls have no result inside the cut — the open round of a waiting execution, or a round
cut between a call and its result — each such call is **closed as failed** in the fork, with
a tool message appended after the cut saying it was not carried over. So the fork keeps every
message of the source up to the cut (a person forking "at" a tool request sees that request),
and its history never holds an open round, which its next run would otherwise try to continue
without any approval record behind it. The source keeps its pending execution. A call the
source lists as ``uncertain`` — robotad stopped while it ran — closes in the fork as it would
in the source, with a result starting ``outcome unknown:`` (PROTOCOL.md §10.2), never one a
model could read as "it did not run" (architecture decision 64).

The fork's ``turnCount`` is the source's when the fork takes the whole history; for a cut, the
number of turns the cut holds that reached a final reply (a user message later followed, before
the next user message, by a complete assistant message without tool calls).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import msgspec
from msgspec import UNSET

from protocol.errors import Issue, RecordCorrupt, SessionNotFound
from protocol.shapes import Message
from robotad.session.checkpoints import CheckpointTree, UnknownCheckpoint
from robotad.session.recovery.recoverable import uncertain_result_text
from robotad.storage.spill import references_in
from robotad.storage.store import record_file

__all__ = [
    "NOT_CARRIED_OVER",
    "UNCERTAIN_NOT_CARRIED_OVER",
    "ForkedHistory",
    "completed_turns",
    "fork_history",
    "history_tree",
    "message_id_issues",
]

#: The content of a result that closes a call the fork did not carry over.
NOT_CARRIED_OVER = "not carried over: the fork was taken before this call had a result"
#: What follows `uncertain_result_text` in the result closing a call of unknown outcome.
UNCERTAIN_NOT_CARRIED_OVER = " The fork was taken before this call had a result."


@dataclass(frozen=True, slots=True)
class ForkedHistory:
    """The fork's messages, the id of the source message it was taken at ("" for an empty
    history) and its completed-turn count."""

    messages: list[Message]
    message_id: str
    turn_count: int

    @property
    def references(self) -> list[str]:
        """The stored tool results (``tool-result:`` references) its messages name: a tool
        message's, and any other's — a compaction's summary, a reply — that quotes one."""
        return [
            reference
            for message in self.messages
            if message.content
            for reference in references_in(message.content)
        ]


def message_id_issues(history: Sequence[Message], root: str) -> list[Issue]:
    """The one rule a history's ids keep so that each message is a fork point: every id a
    non-empty string no earlier message used. An issue for each message that breaks it,
    located at ``<root>.messages[i].id`` (`root` names the record: ``$.record``,
    ``$.artifact.record``)."""
    issues: list[Issue] = []
    first_use: dict[str, int] = {}
    for index, message in enumerate(history):
        used = first_use.setdefault(message.id, index)
        if not message.id:
            reason = "is empty, so it names no fork point"
        elif used != index:
            reason = (
                f"repeats the id {message.id!r} of {root}.messages[{used}], so it names no "
                "single fork point"
            )
        else:
            continue
        issues.append({"path": f"{root}.messages[{index}].id", "message": reason})
    return issues


def history_tree(session_id: str, history: Sequence[Message]) -> CheckpointTree:
    """`history` as a checkpoint tree: one branch, each message after the one before it, the
    last one active.

    Raises `RecordCorrupt` naming ``$.record.messages[i].id`` for every message whose id
    cannot be a checkpoint (`message_id_issues`).
    """
    issues = message_id_issues(history, "$.record")
    if issues:
        raise RecordCorrupt(session_id, issues, path=record_file(session_id))
    tree = CheckpointTree()
    parent: str | None = None
    for message in history:
        tree.add(message.id, parent)
        parent = message.id
    return tree


def fork_history(
    session_id: str,
    history: Sequence[Message],
    at_message_id: str | None,
    source_turn_count: int,
    uncertain: Collection[str] = (),
) -> ForkedHistory:
    """The history of a fork of `session_id` taken at `at_message_id` (None: all of it).
    `uncertain`: the ids of the calls the source's pending execution lists as uncertain.

    Raises `SessionNotFound` with ``data.messageId`` when no message has that id, and
    `RecordCorrupt` when the history is no checkpoint chain (see `history_tree`). The source
    messages are never modified: the fork gets copies.
    """
    tree = history_tree(session_id, history)
    if at_message_id is None:
        taken = tree.path()
    else:
        try:
            taken = tree.ancestry(at_message_id)
        except UnknownCheckpoint:
            raise _unknown_message(session_id, at_message_id) from None
    by_id = {message.id: message for message in history}
    messages = [_copy(by_id[message_id]) for message_id in taken]
    closing = _unanswered_calls(messages)
    messages.extend(
        Message.tool(call_id, name, _closing_text(name, call_id in uncertain), ok=False)
        for call_id, name in closing
    )
    whole = len(taken) == len(tree)
    turns = source_turn_count if whole and not closing else completed_turns(messages)
    return ForkedHistory(messages, taken[-1] if taken else "", turns)


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


def _closing_text(tool: str, uncertain: bool) -> str:
    """The result closing a call the fork did not carry over (module doc)."""
    if uncertain:
        return uncertain_result_text(tool) + UNCERTAIN_NOT_CARRIED_OVER
    return NOT_CARRIED_OVER


def _unknown_message(session_id: str, message_id: str) -> SessionNotFound:
    error = SessionNotFound(session_id, messageId=message_id)
    error.message = f"session {session_id} has no message {message_id}"
    error.args = (error.message,)
    return error


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
