"""Session ids as one safe path segment (PROTOCOL.md §3), checked before any path is built.

A session id names a file (``sessions/<id>.json``), a log (``logs/<id>.jsonl``) and folders, so
an id that could climb out of its folder, hide as a dot-file, or contain a separator is refused
with -32602 (`InputRejected`) by the first code that would turn it into a path.
"""

from __future__ import annotations

import re
from typing import Any

from .refusal import InputRejected

__all__ = [
    "SESSION_ID_PATTERN",
    "is_safe_session_id",
    "session_id_problem",
    "validate_session_id",
]

#: A letter or digit, then at most 127 letters, digits, dots, underscores or hyphens.
SESSION_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def is_safe_session_id(value: Any) -> bool:
    """Whether `value` is a string usable as a single path segment for a session."""
    return (
        isinstance(value, str)
        and _SAFE.fullmatch(value) is not None
        and value.strip(".") != ""  # never `.`/`..`-like (the first character already forbids it)
    )


def validate_session_id(value: Any, *, path: str = "$.sessionId") -> str:
    """Return `value` when it is a safe session id, else raise `InputRejected` at `path`
    with `session_id_problem`'s message."""
    problem = session_id_problem(value)
    if problem is None:
        return str(value)
    raise InputRejected([{"path": path, "message": problem}])


def session_id_problem(value: Any) -> str | None:
    """What is wrong with `value` as a session id; None when it is a safe one. The message
    says what a safe id looks like and never repeats the value (it may be long or hold
    control characters)."""
    if is_safe_session_id(value):
        return None
    if not isinstance(value, str):
        message = "expected a session id string"
    elif value == "":
        message = "session id is empty"
    elif len(value) > 128:
        message = "session id is longer than 128 characters"
    else:
        message = (
            "session id must be one safe path segment: a letter or digit, then letters, "
            "digits, '.', '_' or '-'"
        )
    return message
