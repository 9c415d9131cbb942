"""Tool-call ids unique in a conversation: a repeated id gets a fresh one when it arrives.

Providers pass the server's tool-call ids through, and a server may repeat one — within one
reply, or in a later round (some number each reply's calls ``call_0``, ``call_1``…). Everything
after the reply pairs by id: a tool result with its call (in history and in what a provider is
sent back), an approval request with its call, a journal's effect records with theirs. Two
calls under one id would let one call's result, approval or recorded effect stand for the
other's.

`distinct_call_ids` therefore gives each call whose id the history already holds (on a call or
a result), or an earlier call of the same reply holds, a fresh id before the reply is
committed. The assistant message that enters history carries the new id, so its results and
every later request to the provider carry it too; the provider's own id stays only in the
reply's native payload, in the session log.

An id that is no repeat stays as the server made it, whatever its form: one another vendor
would refuse (``functions.Bash:0`` for Anthropic) is replaced only in the requests sent to
that vendor (`robotad.providers.sent_ids`), never in history. A history robotad did not make
this way (an imported artifact, a session stored before this was done) may still repeat an id
across rounds; those requests send it apart too (`sent_ids`, architecture decision 59).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from protocol.shapes import Message, ToolCall, new_id

__all__ = ["distinct_call_ids"]


def distinct_call_ids(calls: Sequence[ToolCall], history: Sequence[Message]) -> list[ToolCall]:
    """`calls` in order, each whose id `history` or an earlier call of `calls` already uses
    given a fresh ``call_…`` id (letters, digits and ``_``, as every provider accepts);
    the others unchanged."""
    taken = {call.id for message in history for call in message.calls}
    taken.update(
        message.tool_call_id
        for message in history
        if message.role == "tool" and isinstance(message.tool_call_id, str)
    )
    distinct: list[ToolCall] = []
    for call in calls:
        if call.id in taken:
            call = msgspec.structs.replace(call, id=new_id("call_"))
        taken.add(call.id)
        distinct.append(call)
    return distinct
