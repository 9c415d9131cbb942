"""Session ids as one safe path segment (PROTOCOL.md §3): the pattern and what a bad one lacks.

Shared by the daemon (which refuses a bad id before any path is built) and the client (which
refuses it as a usage error before asking): one rule, one wording.
"""

from __future__ import annotations

import re
from typing import Any, Final

__all__ = ["SESSION_ID_PATTERN", "is_safe_session_id", "session_id_problem"]

#: A letter or digit, then at most 127 letters, digits, dots, underscores or hyphens.
SESSION_ID_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def is_safe_session_id(value: Any) -> bool:
    """Whether `value` is a string usable as a single path segment for a session."""
    return (
        isinstance(value, str)
        and _SAFE.fullmatch(value) is not None
        and value.strip(".") != ""  # never `.`/`..`-like (the first character already forbids it)
    )


def session_id_problem(value: Any) -> str | None:
    """What is wrong with `value` as a session id; None when it is a safe one. The message
    says what a safe id looks like and never repeats the value (it may be long or hold
    control characters)."""
    if is_safe_session_id(value):
        return None
    if not isinstance(value, str):
        return "expected a session id string"
    if value == "":
        return "session id is empty"
    if len(value) > 128:
        return "session id is longer than 128 characters"
    return (
        "session id must be one safe path segment: a letter or digit, then letters, digits, "
        "'.', '_' or '-'"
    )
