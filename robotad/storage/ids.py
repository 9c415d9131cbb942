"""Session ids as one safe path segment (PROTOCOL.md §3), checked before any path is built.

A session id names a file (``sessions/<id>.json``), a log (``logs/<id>.jsonl``) and folders, so
an id that could climb out of its folder, hide as a dot-file, or contain a separator is refused
with -32602 (`InputRejected`) by the first code that would turn it into a path. The rule
itself is `protocol.session_ids`, which the client checks too.
"""

from __future__ import annotations

from typing import Any

from protocol.session_ids import SESSION_ID_PATTERN, is_safe_session_id, session_id_problem

from .refusal import InputRejected

__all__ = [
    "SESSION_ID_PATTERN",
    "is_safe_session_id",
    "session_id_problem",
    "validate_session_id",
]


def validate_session_id(value: Any, *, path: str = "$.sessionId") -> str:
    """Return `value` when it is a safe session id, else raise `InputRejected` at `path`
    with `session_id_problem`'s message."""
    problem = session_id_problem(value)
    if problem is None:
        return str(value)
    raise InputRejected([{"path": path, "message": problem}])
