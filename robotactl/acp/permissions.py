"""robotad's approval requests as ACP permission requests, and the editor's answer back.

Each request is offered as ``allow_once``, ``allow_always`` and ``reject_once``. "Always"
remembers the call the way robotad's own consent does (G-113): an allow rule projected from
the call's argument — that exact path, the URL's domain, the command's family — never the
bare tool name, added to the session only (``session/addRule`` scope ``session``). When
nothing can be projected (a tool without a permission argument), "always" is not offered.

The projection is robotad's own function (`robotad.session.permissions.consent`), imported on
the first request that needs it: one place decides what "always" means, for every client.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Final

from robotactl.acp.schema import (
    PermissionOption,
    PermissionToolCall,
    RequestPermissionParams,
    RequestPermissionResult,
)
from robotactl.acp.tool_view import ToolView

if TYPE_CHECKING:
    from protocol.shapes import ApprovalRequest

__all__ = ["ALLOW_ALWAYS", "ALLOW_ONCE", "REJECT_ONCE", "Answer", "always_rule", "answer_of"]

ALLOW_ONCE: Final = "allow_once"
ALLOW_ALWAYS: Final = "allow_always"
REJECT_ONCE: Final = "reject_once"


@dataclass(frozen=True, slots=True)
class Answer:
    """A person's decision on one request; `rule` is the allow rule to add first."""

    approved: bool
    rule: str | None = None


def always_rule(request: ApprovalRequest, cwd: str) -> str | None:
    """The session allow rule "allow always" adds for `request`, or None when none fits."""
    from robotad.session.permissions.consent import consent_pattern

    profile = _profiles().get(request.tool)
    return consent_pattern(request.tool, request.arguments, profile, cwd)


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


@cache
def _profiles() -> Mapping[str, Any]:
    """Built-in tool name → its permission profile (robotad's own table)."""
    from robotad.tools import builtin_tools

    return {tool.name: tool.profile for tool in builtin_tools()}
