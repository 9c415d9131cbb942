"""What a record given to ``session/import`` must hold beyond what the record decoder checks.

The decoder (the store's own, G-214) checks shapes only and reads no field for its meaning
(G-216). An imported record is input, though, and these conventions of it are refused here, each
issue located under the record's root (``$.artifact.record.id``,
``$.artifact.record.messages[i]…``), before anything is written:

- every session id it names is a safe one (PROTOCOL §3, G-156: `session_id_problem`, the rule
  and wording of every other id robotad takes): its own ``id`` (when ``sessionId`` does not
  replace it; the decoder's pattern lets ``"abc\n"`` through, as a regex ``$`` matches before
  a final newline) and ``forkedFrom.sessionId``, which names a session as any id does
  (``session/list`` shows it, clients open it), so it is held to the rule before any code
  could build a path or a terminal line from it;
- every message id names one fork point (`robotad.daemon.fork.message_id_issues`, the rule
  ``session/fork`` applies), so no import becomes a session that fork calls corrupt;
- a message's ``metadata.usage``, when present, is a `Usage` — token counts from 0 to
  2**53 - 1 — so the context figures never show a negative ``usedTokens`` nor overflow a
  float;
- only an assistant message makes tool calls and only a tool message answers one: a
  ``toolCalls`` on any other message is a call no model made and nothing ran, which no
  provider is sent yet ``robotactl show`` and a compaction's summary request present as made,
  and a ``toolCallId`` on any other message answers nothing;
- the results of an assistant message's calls come right after it, one for each call, with
  only other results between, as the runtime writes them; only the last assistant message's
  calls may still wait for theirs (the next prompt closes them, `close_unheld_round`). A
  result of no call, one before its call, a second one, one after another message, or a call
  another message follows before its result is a history every provider refuses (OpenAI
  takes a call's results only right after it and wants every one before the next message;
  Anthropic a ``tool_use``'s ``tool_result`` in the very next user turn), so each later turn
  of the session would fail;
- every call names its tool: a name that is empty or only whitespace is one no provider takes
  back (OpenAI's names match ``^[a-zA-Z0-9_-]+$``, Anthropic's need a character), so every
  later turn would fail — a live session never commits one (architecture decision 51), and
  an import is held to the same;
- no call takes the id of a call still without a result (two calls of one reply under one
  id, say): a result could not tell them apart, and the next prompt, closing both, gave the
  id two results — a history this very rule refuses, so the session could not be exported
  and imported again (architecture decision 25: a call id names one call).

A stored session is not held to these: it loads as it is, a usage that is no `Usage` ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from msgspec import UNSET

from protocol.errors import InvalidParams, Issue
from protocol.session_ids import session_id_problem
from protocol.shapes import Message, ToolCall, Usage
from protocol.validate import ValidationFailed, convert
from robotad.daemon.fork import message_id_issues
from robotad.storage.record import SessionRecord

__all__ = [
    "call_name_issues",
    "history_issues",
    "require_importable",
    "role_issues",
    "session_id_issues",
    "tool_result_issues",
    "usage_issues",
]


def require_importable(record: SessionRecord, root: str) -> None:
    """`InvalidParams` listing every issue of `record` (the record under `root`) that the
    module doc names, in the record's order; nothing when it has none."""
    issues = session_id_issues(record.id, f"{root}.id")
    issues += history_issues(record.messages, root)
    if record.forked_from is not UNSET:
        where = f"{root}.forkedFrom.sessionId"
        issues += session_id_issues(record.forked_from.session_id, where)
    if issues:
        raise InvalidParams(issues)


def session_id_issues(value: str, path: str) -> list[Issue]:
    """The issue at `path` of a `value` that is no safe session id, in `session_id_problem`'s
    words (which never repeat the value); none for a safe one."""
    problem = session_id_problem(value)
    return [] if problem is None else [{"path": path, "message": problem}]


def history_issues(history: Sequence[Message], root: str) -> list[Issue]:
    """Every issue of `history` (the messages of the record under `root`) that the module
    doc names, in message order."""
    issues = message_id_issues(history, root) + usage_issues(history, root)
    issues += role_issues(history, root) + call_name_issues(history, root)
    issues += tool_result_issues(history, root)
    issues.sort(key=lambda issue: _position(issue["path"], root))
    return issues


def role_issues(history: Sequence[Message], root: str) -> list[Issue]:
    """An issue for each ``toolCalls`` holding calls on a message that is not an assistant
    message, and each ``toolCallId`` on one that is not a tool message."""
    issues: list[Issue] = []
    for index, message in enumerate(history):
        where = f"{root}.messages[{index}]"
        if message.role != "assistant" and message.calls:
            issues.append(
                {
                    "path": f"{where}.toolCalls",
                    "message": "only an assistant message makes tool calls (this one's "
                    f"role is {message.role!r})",
                }
            )
        if message.role != "tool" and isinstance(message.tool_call_id, str):
            issues.append(
                {
                    "path": f"{where}.toolCallId",
                    "message": "only a tool message answers a call (this one's role is "
                    f"{message.role!r})",
                }
            )
    return issues


def call_name_issues(history: Sequence[Message], root: str) -> list[Issue]:
    """An issue for each tool call whose name is empty or only whitespace (see the module
    doc), located at its ``name``."""
    issues: list[Issue] = []
    for index, message in enumerate(history):
        for position, call in enumerate(message.calls):
            if call.name.strip():
                continue
            what = "is empty" if not call.name else "is only whitespace"
            issues.append(
                {
                    "path": f"{root}.messages[{index}].toolCalls[{position}].name",
                    "message": f"{what}: a call names the tool it calls, and no provider takes "
                    "one without a name back, so every later turn would fail",
                }
            )
    return issues


def usage_issues(history: Sequence[Message], root: str) -> list[Issue]:
    """An issue for each problem of a ``metadata.usage`` that is no `Usage`."""
    issues: list[Issue] = []
    for index, message in enumerate(history):
        metadata = message.metadata
        if not isinstance(metadata, dict) or "usage" not in metadata:
            continue
        try:
            convert(metadata["usage"], Usage)
        except ValidationFailed as exc:
            where = f"{root}.messages[{index}].metadata.usage"
            issues += [{"path": where + i["path"][1:], "message": i["message"]} for i in exc.issues]
    return issues


def tool_result_issues(history: Sequence[Message], root: str) -> list[Issue]:
    """An issue for each tool message that does not answer an open call of the assistant
    message its results follow (located at its ``toolCallId``), for each call another
    message comes before the result of (at the call's ``id``), and for each call that
    repeats the id of one still without a result; see the module doc."""
    rounds = _Rounds(root)
    for index, message in enumerate(history):
        if message.role == "tool":
            rounds.result(index, message)
        else:
            rounds.close(index)
            if message.role == "assistant" and message.calls:
                rounds.open(index, message.calls)
    return rounds.issues


@dataclass
class _Rounds:
    """The walk of `tool_result_issues`: the round in progress (the assistant message whose
    results may follow now) and every call made so far."""

    root: str
    issues: list[Issue] = field(default_factory=list)
    #: The calls of the round in progress that have no result yet, by id: their position.
    waiting: dict[str, int] = field(default_factory=dict)
    #: The message of the round in progress.
    current: int = -1
    #: Each call id made so far: the message that made it last.
    made: dict[str, int] = field(default_factory=dict)
    answered: set[str] = field(default_factory=set)

    def open(self, index: int, calls: Sequence[ToolCall]) -> None:
        """The assistant message at `index` makes `calls`: its results may follow."""
        self.current = index
        for position, call in enumerate(calls):
            if call.id in self.waiting:
                self.issues.append(_repeated_call(self.root, index, position, call.id))
            self.waiting[call.id] = position
            self.made[call.id] = index
            self.answered.discard(call.id)

    def close(self, index: int) -> None:
        """A message other than a result comes at `index`: the round in progress ends, and
        each of its calls still without a result never gets one in its place."""
        for position in self.waiting.values():
            self.issues.append(
                {
                    "path": f"{self.root}.messages[{self.current}].toolCalls[{position}].id",
                    "message": f"has no result before {self.root}.messages[{index}]: a call's "
                    "results come right after the assistant message that made it, and only "
                    "the last one's calls may still wait for theirs",
                }
            )
        self.waiting = {}

    def result(self, index: int, message: Message) -> None:
        """The tool message at `index` answers a call of the round in progress, or is out of
        place."""
        call_id = message.tool_call_id if isinstance(message.tool_call_id, str) else None
        if call_id is not None and call_id in self.waiting:
            del self.waiting[call_id]
            self.answered.add(call_id)
            return
        if call_id is None:
            reason = "is missing: a tool message answers one call of an earlier assistant message"
        elif call_id in self.answered:
            reason = f"answers the call {call_id!r} a second time"
        elif call_id in self.made:
            reason = (
                f"answers the call {call_id!r} of {self.root}.messages[{self.made[call_id]}] "
                "out of place: a call's results come right after the assistant message that "
                "made it, with only other results between"
            )
        else:
            reason = f"answers no call of an earlier assistant message (no call {call_id!r})"
        self.issues.append({"path": f"{self.root}.messages[{index}].toolCallId", "message": reason})


def _repeated_call(root: str, index: int, position: int, call_id: str) -> Issue:
    return {
        "path": f"{root}.messages[{index}].toolCalls[{position}].id",
        "message": f"repeats the id {call_id!r} of a call that has no result yet, so no "
        "result could tell the two apart",
    }


def _position(path: str, root: str) -> int:
    """The message index a path under `root` names (for message order)."""
    rest = path.removeprefix(f"{root}.messages[")
    return int(rest.split("]", 1)[0])
