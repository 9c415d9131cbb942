"""The status line under the prompt.

``SESSION · MODEL · MODE · sandbox S · 41% of 32.8k · 1 approval waiting · thinking 3s``:
the session id, the model, the permission mode, the sandbox (when the daemon reports one),
the context used, the requests waiting for a person, and — while a turn runs — its elapsed
time. Parts are dropped from the right-hand side of the least useful first until the line
fits the terminal (a 40-column terminal still shows the session, the mode and the turn).
"""

from __future__ import annotations

from robotactl.chat.state import ChatState
from robotactl.formatting import format_tokens

__all__ = ["status_line"]


def status_line(state: ChatState, width: int) -> str:
    """The status line for `state`, at most `width` characters."""
    info = state.info
    if info is None:
        return "connecting…"[:width]
    context = info.context
    parts: list[tuple[int, str]] = [  # (priority: lower is dropped last, text)
        (0, info.session_id),
        (3, info.model),
        (1, info.permission_mode),
        (4, f"{context.used_percentage:.0f}% of {format_tokens(context.max_tokens)}"),
    ]
    sandbox = getattr(info, "sandbox", None)
    if isinstance(sandbox, str):
        parts.append((5, f"sandbox {sandbox}"))
    if state.pending:
        count = len(state.pending)
        parts.append((0, f"{count} approval{'s' if count > 1 else ''} waiting"))
    if state.running:
        verb = "aborting" if state.abort_asked else "thinking"
        parts.append((0, f"{verb} {state.elapsed():.0f}s"))
    while True:
        line = " · ".join(text for _, text in parts)
        if len(line) <= width or len(parts) == 1:
            return line[:width]
        least = max(range(len(parts)), key=lambda i: (parts[i][0], i))
        if parts[least][0] == 0:
            return line[:width]
        del parts[least]
