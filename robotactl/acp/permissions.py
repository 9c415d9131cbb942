"""robotad's approval requests as ACP permission requests, and the editor's answer back.

Each request is offered as ``allow_once``, ``allow_always`` and ``reject_once``. "Always"
adds a session allow rule for that exact call (``session/addRule`` scope ``session``) before
approving it, written in PROTOCOL.md §4's pattern language from the call's permission
argument, never the bare tool name (G-113): the path for Read, Write and Edit (``file_path``)
and Glob and Grep (``path``, the session's cwd when absent), the exact command for Bash (a
pattern matching only itself: the person saw this command, not its family), the host for
WebFetch (``WebFetch(domain:host)``, §10.7). A tool without such an argument (an MCP tool)
gets no "always" option.

A title is one line cut at `TITLE_CHARS`, so a request whose permission argument the title
does not show whole and as it is (a long or multi-line command, a run of spaces, a character
shown as ``<U+200B>``) carries it in full first in its content, shown exactly in a code block:
``echo …`` cut at the 120th character hid a second line ``rm -rf ~``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from robotactl.acp.schema import (
    ContentItem,
    PermissionOption,
    PermissionToolCall,
    RequestPermissionParams,
    RequestPermissionResult,
    TextBlock,
    ToolCallContent,
)
from robotactl.acp.tool_view import ToolView
from robotactl.exact_rules import ARGUMENT_KEYS, exact_call_rule
from robotactl.terminal_text import visible_exactly

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
def always_rule(request: ApprovalRequest, cwd: str) -> str | None:
    """The session allow rule "allow always" adds for `request` — one that covers exactly
    this call — or None when the tool has no permission argument to write it from."""
    return exact_call_rule(request.tool, request.arguments, cwd)


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
        content=[*_argument_in_full(request, view.title), *view.diff],
    )
    return RequestPermissionParams(session_id, tool_call, options)


def _argument_in_full(request: ApprovalRequest, title: str) -> list[ToolCallContent]:
    """The request's permission argument in full, shown exactly, as a code block — unless
    the title already shows it whole and as it is (module docstring)."""
    key = ARGUMENT_KEYS.get(request.tool)
    value = request.arguments.get(key) if key is not None else None
    if not isinstance(value, str) or not value:
        return []
    shown = visible_exactly(value)
    if shown == value and " ".join(value.split()) == value and title.endswith(value):
        return []
    fence = "`" * max(3, _longest_run(shown, "`") + 1)
    return [ContentItem(TextBlock(f"{key}:\n{fence}\n{shown}\n{fence}"))]


def _longest_run(text: str, character: str) -> int:
    longest = run = 0
    for each in text:
        run = run + 1 if each == character else 0
        longest = max(longest, run)
    return longest


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
