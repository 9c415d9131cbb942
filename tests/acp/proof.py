"""The proof that an editor received every update robotactl acp wrote.

The SDKs check each ``session/update`` against the ACP schema and drop (or strip) what fails,
silently. Each editor driver keeps both sides: the params read raw off the agent's stdout, and
the params its SDK handed to the client. They must be the same list — same length, same
order, same content once a member explicitly ``null`` is read as absent (the Python SDK's
models do not tell the two apart).
"""

from __future__ import annotations

from typing import Any

from tests.acp.editors import Editor

__all__ = ["assert_editor_received_everything", "without_nulls"]


def without_nulls(value: Any) -> Any:
    """`value` with every object member whose value is null removed, recursively."""
    if isinstance(value, dict):
        return {key: without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [without_nulls(item) for item in value]
    return value


async def assert_editor_received_everything(editor: Editor) -> list[Any]:
    """Every update the agent sent reached the client unchanged; returns them."""
    sent, received = await editor.audit()
    assert sent, "the agent sent no session/update at all"
    assert [without_nulls(item) for item in received] == [without_nulls(item) for item in sent]
    return sent
