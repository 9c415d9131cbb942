"""An ACP prompt (a list of content blocks) as the one text robotad's ``session/run`` takes.

Text blocks are joined as they are. A ``resource_link`` becomes a mention of its URI — a
local file's path, percent-decoded, set apart by spaces — which robotad's tools read when the
model asks. An embedded ``resource`` with text becomes a fenced
context block naming its URI, so the model sees what the editor attached; one with a binary
blob is mentioned like a link. Images and audio are refused (the agent advertises neither),
as is any block of an unknown type: -32602 with the block's path, never a silent drop.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from protocol.errors import InvalidParams
from robotactl.acp.schema import ContentBlock

__all__ = ["prompt_text"]


def prompt_text(blocks: Sequence[ContentBlock]) -> str:
    """The prompt text of `blocks`; `InvalidParams` listing every block it cannot take."""
    parts: list[str | _Mention] = []
    issues: list[dict[str, Any]] = []
    for index, block in enumerate(blocks):
        path = f"$.prompt[{index}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "resource_link" and isinstance(block.get("uri"), str):
            parts.append(_Mention(_local(block["uri"])))
        elif kind == "resource" and isinstance(resource := block.get("resource"), dict):
            uri = resource.get("uri") if isinstance(resource.get("uri"), str) else "attachment"
            text = resource.get("text")
            if isinstance(text, str):
                parts.append(f'\n<context uri="{uri}">\n{text}\n</context>\n')
            else:
                parts.append(_Mention(_local(str(uri))))
        else:
            what = f"{kind!r} content" if isinstance(kind, str) else "a malformed content block"
            issues.append({"path": path, "message": f"robotactl acp does not accept {what}"})
    if issues:
        raise InvalidParams(issues)
    text = _joined(parts)
    if not text.strip():
        raise InvalidParams([{"path": "$.prompt", "message": "the prompt has no text"}])
    return text


class _Mention(str):
    """``@`` and a file: set apart from the text around it by `_joined`."""


def _joined(parts: Sequence[str]) -> str:
    """`parts` joined, with a space between a mention and text it would touch (an editor
    sends ``explain`` ``@a.txt`` ``this`` as blocks that hold no space)."""
    text = ""
    after_mention = False
    for part in parts:
        mention = isinstance(part, _Mention)
        piece = f"@{part}" if mention else part
        touching = bool(text and piece) and not text[-1].isspace() and not piece[0].isspace()
        if touching and (mention or after_mention):
            text += " "
        text += piece
        after_mention = mention
    return text


def _local(uri: str) -> str:
    """A ``file:`` URI as its local path, percent-decoded (``my%20file.txt`` is
    ``my file.txt``; ``file://localhost/…`` is local too); any other URI unchanged."""
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(uri)
    if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return uri
    return unquote(parts.path)
