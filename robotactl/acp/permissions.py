"""robotad's approval requests as ACP permission requests, and the editor's answer back.

Each request is offered as ``allow_once``, ``allow_always`` and ``reject_once``. "Always"
adds a session allow rule for that exact call (``session/addRule`` scope ``session``) before
approving it, written in PROTOCOL.md §4's pattern language from the call's permission
argument, never the bare tool name (G-113): the path for Read, Write and Edit (``file_path``)
and Glob and Grep (``path``, the session's cwd when absent), the exact command for Bash (a
pattern matching only itself: the person saw this command, not its family), the host for
WebFetch (``WebFetch(domain:host)``, §10.7). A tool without such an argument (an MCP tool)
gets no "always" option.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from robotactl.acp.schema import (
    PermissionOption,
    PermissionToolCall,
    RequestPermissionParams,
    RequestPermissionResult,
)
from robotactl.acp.tool_view import ToolView

if TYPE_CHECKING:
    from protocol.shapes import ApprovalRequest

__all__ = [
    "ALLOW_ALWAYS",
    "ALLOW_ONCE",
    "ARGUMENT_KEYS",
    "REJECT_ONCE",
    "Answer",
    "always_rule",
    "answer_of",
    "request_params",
]

ALLOW_ONCE: Final = "allow_once"
ALLOW_ALWAYS: Final = "allow_always"
REJECT_ONCE: Final = "reject_once"


@dataclass(frozen=True, slots=True)
class Answer:
    """A person's decision on one request; `rule` is the allow rule to add first."""

    approved: bool
    rule: str | None = None


#: Built-in tool → its permission argument (PROTOCOL.md §4).
ARGUMENT_KEYS: Final[dict[str, str]] = {
    "Read": "file_path",
    "Write": "file_path",
    "Edit": "file_path",
    "Bash": "command",
    "Glob": "path",
    "Grep": "path",
    "WebFetch": "url",
}
_PATH_KEYS: Final = frozenset({"file_path", "path"})


def always_rule(request: ApprovalRequest, cwd: str) -> str | None:
    """The session allow rule "allow always" adds for `request` — one that covers exactly
    this call — or None when the tool has no permission argument to write it from."""
    key = ARGUMENT_KEYS.get(request.tool)
    if key is None:
        return None
    value = request.arguments.get(key)
    if value is None and key in _PATH_KEYS:
        value = cwd
    if not isinstance(value, str) or not value.strip():
        return None
    if key == "url":
        host = _url_host(value)
        return f"{request.tool}(domain:{host})" if host else None
    return f"{request.tool}({_exactly(value)})"


def request_params(
    session_id: str, call_id: str, view: ToolView, request: ApprovalRequest, rule: str | None
) -> RequestPermissionParams:
    """The ``session/request_permission`` params for `request`, shown as call `call_id`."""
    options = [PermissionOption(ALLOW_ONCE, "Allow", "allow_once")]
    if rule is not None:
        options.append(PermissionOption(ALLOW_ALWAYS, f"Always allow {rule}", "allow_always"))
    options.append(PermissionOption(REJECT_ONCE, "Reject", "reject_once"))
    tool_call = PermissionToolCall(
        call_id,
        view.title,
        view.kind,
        "pending",
        raw_input=dict(request.arguments),
        locations=list(view.locations),
        content=list(view.diff),
    )
    return RequestPermissionParams(session_id, tool_call, options)


def answer_of(result: RequestPermissionResult, rule: str | None) -> Answer | None:
    """The decision the editor's `result` means; None when it cancelled the question.

    An option id that was not offered counts as a rejection: the safe reading of an answer
    that names no offered choice.
    """
    outcome = result.outcome
    if outcome.outcome != "selected":
        return None
    if outcome.option_id == ALLOW_ONCE:
        return Answer(True)
    if outcome.option_id == ALLOW_ALWAYS and rule is not None:
        return Answer(True, rule)
    return Answer(False)


def _exactly(text: str) -> str:
    """`text` as a pattern argument matching only itself: ``*``, ``(``, ``)`` and ``\\``
    escaped, and a leading ``domain:`` escaped so it is not read as the domain form."""
    escaped = "".join("\\" + ch if ch in "*()\\" else ch for ch in text)
    return escaped.replace("domain:", "domain\\:", 1) if text.startswith("domain:") else escaped


def _url_host(url: str) -> str | None:
    """The lowercased host of an absolute URL without a trailing dot (an IPv6 one in
    brackets); None when it has none."""
    try:
        host = urlsplit(url.strip()).hostname
    except ValueError:
        return None
    if not host:
        return None
    host = host.rstrip(".")
    return f"[{host}]" if ":" in host else host
