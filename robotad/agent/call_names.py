"""Tool-call names a history can carry: a call without a name is a malformed reply.

A model's reply may hold a tool call whose name is empty (a server that never streamed it, a
``tool_use`` block without one) or only whitespace. Committed, such a call could never run,
and the history then claims it: every later request sends it back, and the providers refuse
it (OpenAI's function names match ``^[a-zA-Z0-9_-]+$``; Anthropic's ``tool_use.name`` must
have a character), so every later turn of the session failed. The agent loop therefore takes
such a reply as a failed model call, as it takes a reply of another shape: `nameless_call`
says why, the turn fails with that reason and nothing of the reply enters history.

A name that holds anything but whitespace is the model's choice of a tool, known or not: an
unknown one is answered with a failed tool result (G-204), which tells the model what exists.
"""

from __future__ import annotations

from collections.abc import Sequence

from protocol.shapes import ToolCall

__all__ = ["nameless_call"]


#: Characters of a call's id or name quoted in the reason (a reply may hold megabytes of them).
_QUOTED = 40


def nameless_call(calls: Sequence[ToolCall]) -> str | None:
    """Why the reply holding `calls` cannot enter history — its first call whose name is
    empty or only whitespace, named by its place and id — or None when every call has a
    name."""
    for number, call in enumerate(calls, start=1):
        if call.name.strip():
            continue
        what = (
            "an empty name"
            if not call.name
            else f"a name of only whitespace ({_quoted(call.name)})"
        )
        return (
            f"the model called a tool with {what} (tool call {number} of {len(calls)}, "
            f"id {_quoted(call.id)}); a call without a name can never run, and sent back it "
            "would fail every later turn, so nothing of the reply was kept: send the prompt again"
        )
    return None


def _quoted(text: str) -> str:
    """`text` as a Python literal, cut at `_QUOTED` characters (saying so)."""
    if len(text) <= _QUOTED:
        return repr(text)
    return f"{text[:_QUOTED]!r}… ({len(text)} characters)"
