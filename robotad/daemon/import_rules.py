"""What a history given to ``session/import`` must hold beyond what the record decoder checks.

The decoder (the store's own, G-214) checks shapes only and reads no field for its meaning
(G-216). An imported history is input, though, and two conventions of it are refused here, each
issue located under the record's root (``$.artifact.record.messages[i]…``), before anything is
written:

- every message id names one fork point (`robotad.daemon.fork.message_id_issues`, the rule
  ``session/fork`` applies), so no import becomes a session that fork calls corrupt;
- a message's ``metadata.usage``, when present, is a `Usage` — token counts that are not
  negative — so the context figures never show a negative ``usedTokens``.

A stored session is not held to these: it loads as it is, a usage that is no `Usage` ignored.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocol.errors import InvalidParams, Issue
from protocol.shapes import Message, Usage
from protocol.validate import ValidationFailed, convert
from robotad.daemon.fork import message_id_issues

__all__ = ["require_importable", "usage_issues"]


def require_importable(history: Sequence[Message], root: str) -> None:
    """`InvalidParams` listing every issue of `history` (the record under `root`) that the
    module doc names; nothing when it has none."""
    issues = message_id_issues(history, root) + usage_issues(history, root)
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


def _position(path: str, root: str) -> int:
    """The message index a path under `root` names (for message order)."""
    rest = path.removeprefix(f"{root}.messages[")
    return int(rest.split("]", 1)[0])
