"""The status line under the prompt.

``SESSION · MODEL · MODE · sandbox S · 41% of 32.8k · 1 approval waiting · thinking 3s``:
the session id, the model, the permission mode, the sandbox (when the daemon reports one),
the context used, the requests waiting for a person, and — while a turn runs — its elapsed
time. When the line is wider than the terminal, the least useful parts go first, one at a
time (the sandbox, then the context, then the model), then the session id is cut to its
first characters, then the mode: a 40-column terminal still shows the session, the mode and
the turn. What the session's record says (its model, which an imported artifact names) is
made visible.
"""

from __future__ import annotations

from robotactl.chat.state import ChatState
from robotactl.formatting import format_tokens
from robotactl.terminal_text import visible

__all__ = ["SHORT_ID", "status_line"]

#: Characters of the session id kept when the line is too narrow for all of it.
SHORT_ID = 8


def status_line(state: ChatState, width: int) -> str:
    """The status line for `state`, at most `width` characters."""
    info = state.info
    if info is None:
        return "connecting…"[:width]
    context = info.context
    parts: list[tuple[int, str]] = [  # (priority: lower is dropped last, text)
        (0, visible(info.session_id)),
        (3, visible(info.model)),
        (1, visible(info.permission_mode)),
        (4, f"{context.used_percentage:.0f}% of {format_tokens(context.max_tokens)}"),
    ]
    sandbox = getattr(info, "sandbox", None)
    if isinstance(sandbox, str):
        parts.append((5, f"sandbox {visible(sandbox)}"))
    if state.pending:
        count = len(state.pending)
        parts.append((0, f"{count} approval{'s' if count > 1 else ''} waiting"))
    if state.running:
        verb = "aborting" if state.abort_asked else "thinking"
        parts.append((0, f"{verb} {state.elapsed():.0f}s"))
    for keep in (4, 3, 2, 1, 0):
        line = " · ".join(text for _, text in parts)
        if len(line) <= width:
            return line
        if keep == 1 and len(info.session_id) > SHORT_ID:
            parts[0] = (0, visible(info.session_id)[:SHORT_ID] + "…")
            line = " · ".join(text for _, text in parts)
            if len(line) <= width:
                return line
        parts = [(priority, text) for priority, text in parts if priority <= keep]
    return " · ".join(text for _, text in parts)[:width]
