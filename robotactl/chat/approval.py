"""Answers to approval requests: once, always (an exact-call rule), or no.

`a` ("always") answers the request yes and first adds a session allow rule for that exact
call (``session/addRule {kind: "allow", scope: "session"}``), so an identical call later in
the session runs without asking. The rule is projected from the call's permission argument
(PROTOCOL.md §4): the path for Read/Write/Edit (``file_path``) and Glob/Grep (``path``, the
session's cwd when absent), the exact command for Bash (written as a pattern that matches
only itself, not a prefix family: the person saw this command, not others), and the host for
WebFetch (``WebFetch(domain:host)``, §10.7). A tool without a permission argument (an MCP
tool) has no exact rule: `exact_call_rule` returns None and the chat answers that request
once, saying so.

Pure functions; the controller sends the requests.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from robotactl.exact_rules import ARGUMENT_KEYS, escape_pattern_text, exact_call_rule

__all__ = ["ARGUMENT_KEYS", "Answer", "escape_pattern_text", "exact_call_rule", "response"]


#: How a person answered: y (once), a (always), n (no).
Answer = Literal["once", "always", "deny"]


#: Built-in tool → its permission argument (PROTOCOL.md §4).
def response(request_id: str, approved: bool) -> dict[str, Any]:
    """One ``session/resume`` response with a fresh ``responseId``."""
    return {"requestId": request_id, "responseId": uuid.uuid4().hex, "approved": approved}
