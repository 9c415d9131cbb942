"""An MCP ``CallToolResult`` as a robotad tool result (PROTOCOL.md §10.5).

- Text content blocks, joined by newlines, are what the model reads.
- Images, audio and resources are described — kind, MIME type, size, URI — and their data is
  stored in the spill store, the description naming its ``tool-result:`` reference (without a
  store, the data is dropped and the description says so). A resource link is described only.
- A result with no content but structured content shows that, as JSON.
- ``isError`` makes a failed result whose text starts by naming the server.

Data is stored off the event loop (`SpillStore.put`). A call cancelled while its result is
converted (an aborted turn) leaves nothing stored: what it stored already is discarded, since
no result will name it.

Nothing here imports the SDK: blocks are read by their ``type`` and attributes.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from robotad.agent.tool import ToolResult
from robotad.storage.spill import SpillError, SpillStore

__all__ = ["failed_result", "tool_result"]


async def tool_result(server: str, tool: str, result: Any, spill: SpillStore | None) -> ToolResult:
    """The robotad result of `server`'s answer to a call of `tool` (see the module doc)."""
    stored: list[str] = []
    try:
        parts = [await _render(block, spill, stored) for block in result.content]
    except BaseException:
        if spill is not None:
            for reference in stored:
                spill.discard(reference)
        raise
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(parts)
    metadata = {"mcpServer": server, "mcpTool": tool}
    if result.is_error:
        return ToolResult(False, f"MCP server {server}: {tool} failed: {text}", metadata)
    return ToolResult(True, text, metadata)


def failed_result(server: str, tool: str, reason: str) -> ToolResult:
    """A call that got no answer: the server named, and why."""
    return ToolResult(
        False, f"MCP server {server}: {reason}", {"mcpServer": server, "mcpTool": tool}
    )


async def _render(block: Any, spill: SpillStore | None, stored: list[str]) -> str:
    """One block's text; the references of data it stored are added to `stored`."""
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        described = _describe(kind, block.mime_type, None, _decoded_size(block.data))
        return await _stored(described, block.data, spill, stored, encoded=True)
    if kind == "resource":
        resource = block.resource
        mime = resource.mime_type
        if hasattr(resource, "text"):
            size = len(resource.text.encode())
            described = _describe("resource", mime, resource.uri, size)
            return await _stored(described, resource.text, spill, stored, encoded=False)
        blob = resource.blob
        described = _describe("resource", mime, resource.uri, _decoded_size(blob))
        return await _stored(described, blob, spill, stored, encoded=True)
    if kind == "resource_link":
        described = _describe("resource link", block.mime_type, block.uri, block.size)
        return described[:-1] + (f", {block.name}]" if block.name else "]")
    return f"[{kind or 'unknown'} content, not shown]"


async def _stored(
    described: str, data: str, spill: SpillStore | None, stored: list[str], *, encoded: bool
) -> str:
    """`described` saying where `data` was stored (its reference added to `stored`), or
    that it was not and why."""
    if spill is None:
        return described[:-1] + ", not stored]"
    try:
        reference = await spill.put(data)
    except SpillError as exc:
        return described[:-1] + f", not stored: {exc}]"
    stored.append(reference)
    encoding = ", base64" if encoded else ""
    return described[:-1] + f", stored{encoding} as {reference}]"


def _describe(kind: str, mime: str | None, uri: str | None, size: int | None) -> str:
    pieces = [kind]
    if mime:
        pieces.append(mime)
    if size is not None:
        pieces.append(f"{size} bytes")
    if uri:
        pieces.append(uri)
    return "[" + ", ".join(pieces) + "]"


def _decoded_size(data: str) -> int | None:
    try:
        return len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return None
