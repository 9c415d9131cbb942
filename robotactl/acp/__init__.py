"""``robotactl acp``: an Agent Client Protocol v1 agent on stdio that forwards to robotad
(PROTOCOL.md §10.6).

The package reads like the path a message takes: `stdio` (the editor's pipe), `schema` (ACP
shapes), `agent` (the editor's methods, forwarded), `attachment` (one session's events as
updates), `translate` and `tool_view` (events and history → updates, sans-I/O), `prompt` (one
turn, approvals included), `permissions` (approvals ↔ permission requests), `modes`,
`prompt_text`, `defaults`, and `serve` (the main loop). Nothing here is imported until the
command runs.
"""

from __future__ import annotations
