"""What a history given to ``session/import`` must hold beyond what the record decoder checks.

The decoder (the store's own, G-214) checks shapes only and reads no field for its meaning
(G-216). An imported history is input, though, and two conventions of it are refused here, each
issue located under the record's root (``$.artifact.record.messages[i]…``), before anything is
written:

- every message id names one fork point (`robotad.daemon.fork.message_id_issues`, the rule
  ``session/fork`` applies), so no import becomes a session that fork calls corrupt;
- a message's ``metadata.usage``, when present, is a `Usage` — token counts that are not
  negative — so the context figures never show a negative ``usedTokens``;
- every tool message answers a call an earlier assistant message made and no tool message
  answered yet: a result of no call, one before its call or a second one for a call is a
  history every provider refuses, so each later turn of the session would fail. (A call
  without its result is fine: the next prompt closes it, `close_unheld_round`.)
- no call takes the id of a call still without a result (two calls of one reply under one
  id, say): a result could not tell them apart, and the next prompt, closing both, gave the
  id two results — a history this very rule refuses, so the session could not be exported
  and imported again (architecture decision 25: a call id names one call).

A stored session is not held to these: it loads as it is, a usage that is no `Usage` ignored.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocol.errors import InvalidParams, Issue
from protocol.shapes import Message, Usage
from protocol.validate import ValidationFailed, convert
from robotad.daemon.fork import message_id_issues

__all__ = ["require_importable", "tool_result_issues", "usage_issues"]


def require_importable(history: Sequence[Message], root: str) -> None:
    """`InvalidParams` listing every issue of `history` (the record under `root`) that the
    module doc names; nothing when it has none."""
    issues = message_id_issues(history, root) + usage_issues(history, root)
    issues += tool_result_issues(history, root)
    if issues:
        issues.sort(key=lambda issue: _position(issue["path"], root))
        raise InvalidParams(issues)


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
    """An issue for each tool message that answers no open call (see the module doc),
    located at its ``toolCallId``."""
    issues: list[Issue] = []
    open_calls: set[str] = set()
    answered: set[str] = set()
    for index, message in enumerate(history):
        if message.role == "assistant" and message.tool_calls:
            for position, call in enumerate(message.tool_calls):
                if call.id in open_calls:
                    issues.append(_repeated_call(root, index, position, call.id))
                open_calls.add(call.id)
                answered.discard(call.id)
        if message.role != "tool":
            continue
        call_id = message.tool_call_id if isinstance(message.tool_call_id, str) else None
        if call_id is not None and call_id in open_calls:
            open_calls.discard(call_id)
            answered.add(call_id)
            continue
        if call_id is None:
            reason = "is missing: a tool message answers one call of an earlier assistant message"
        elif call_id in answered:
            reason = f"answers the call {call_id!r} a second time"
        else:
            reason = f"answers no call of an earlier assistant message (no call {call_id!r})"
        issues.append({"path": f"{root}.messages[{index}].toolCallId", "message": reason})
    return issues


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
