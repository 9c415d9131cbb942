"""An ACP prompt (a list of content blocks) as the one text robotad's ``session/run`` takes.

Text blocks are joined as they are (but for the spelling of a tag, below). A
``resource_link`` becomes a mention of its URI — a local file's path, percent-decoded, set
apart by spaces — which robotad's tools read when the model asks. What a ``file:`` URI says
besides its path follows the path in parentheses (decision 80): the lines an editor selected
(Zed's ``#L10:20``; ``#L10-20``, ``#L10-L20``, ``#L10``) as ``(lines 10-20)``, 1-based and
inclusive as Read numbers them (its ``offset`` 10, ``limit`` 11), Zed's ``?column=`` and
``?symbol=`` as ``column 5`` and ``symbol "name"``; any other fragment or query as it is,
``fragment "…"``, ``query "…"``. An embedded ``resource`` with text becomes a context block
naming its URI (fragment and all), so the model sees what the editor attached; when that URI
says more than a path (Zed's selection ``file:///w/a.py#L10:20``, whose text is those lines)
the mention of it heads the block, ``@/w/a.py (lines 10-20):`` (decision 83). One with a
binary blob is mentioned like a link; one with neither (ACP requires a ``text`` or a
``blob``, a string) is refused at its path. Images and audio are refused (the agent
advertises neither), as is any block of an unknown type: -32602 with the block's path, never
a silent drop.

What others wrote never passes for the framing (decision 74). The only ``context`` tags in
the prompt are the ones written here, one pair for each attachment: a tag anywhere in the
text — an attachment's, or a text block's — is spelled with a backslash after its ``<``
(``<\\/context>``; one that has backslashes there gets one more, so the spelling reads back
exactly); an attachment's URI is an XML attribute value (``&quot;``, ``&lt;``, ``&#xA;``…);
a mention that holds a space, a quote, an angle bracket or a control character is a
JSON-quoted string (``@"/w/my file.txt"``), and a name, fragment or query in a mention's
parentheses always is. A prompt robotad would not take in one message is refused at its
largest block.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import Any, Final

from protocol.errors import InvalidParams
from protocol.framing import DEFAULT_MAX_FRAME_BYTES
from robotactl.acp.schema import ContentBlock

__all__ = ["LARGEST_PROMPT", "prompt_text"]

#: The longest prompt sent on (bytes, JSON-escaped): robotad's default message limit less
#: room for the request around it.
LARGEST_PROMPT: Final = DEFAULT_MAX_FRAME_BYTES - 2**20

#: The ``<`` of a ``context`` tag, opening or closing, in any case, with any backslashes and
#: spaces a reader might look past (``<\\ /Context>``): a name that goes on (``<contexts>``,
#: ``<context.Provider>``) is another tag. Possessive, so a long run of spaces costs one pass.
_TAG: Final = re.compile(r"<(?=\\*+\s*+(?:/\s*+)?context(?![\w.:-]))", re.IGNORECASE)

#: What ends an attribute value or reads as a line or a control: written as a reference.
_ATTRIBUTE_UNSAFE: Final = re.compile(r'[&"<>\x00-\x1f\x7f-\x9f\u2028\u2029]')
_ATTRIBUTE_NAMED: Final = {"&": "&amp;", '"': "&quot;", "<": "&lt;", ">": "&gt;"}

#: What a bare ``@path`` cannot hold and still read as one path that ends where it ends.
_MENTION_UNSAFE: Final = re.compile(r'[\s"<>\x00-\x1f\x7f-\x9f]')
#: What JSON lets through raw that must not stand raw in a quoted mention.
_QUOTED_UNSAFE: Final = re.compile(r"[<>\x7f-\x9f\u2028\u2029]")

#: Lines of a file in a ``file:`` URI's fragment, 1-based and inclusive: Zed's ``L10:20``
#: (its selections and symbols), ``L10-20`` and ``L10-L20`` (GitHub's), one line ``L10``.
_LINES: Final = re.compile(r"L([0-9]{1,9})(?:[-:]L?([0-9]{1,9}))?")
#: A column as Zed gives one (``?column=5``, 1-based).
_COLUMN: Final = re.compile(r"[1-9][0-9]{0,8}")


def prompt_text(blocks: Sequence[ContentBlock], *, largest: int = LARGEST_PROMPT) -> str:
    """The prompt text of `blocks`; `InvalidParams` listing every block it cannot take, or
    naming the largest block when the prompt is over `largest` bytes JSON-escaped."""
    parts: list[str] = []
    issues: list[dict[str, Any]] = []
    for index, block in enumerate(blocks):
        part = _part(block, f"$.prompt[{index}]")
        if isinstance(part, dict):
            issues.append(part)
        else:
            parts.append(part)
    if issues:
        raise InvalidParams(issues)
    text = _joined(parts)
    if not text.strip():
        raise InvalidParams([{"path": "$.prompt", "message": "the prompt has no text"}])
    if _encoded_size(text) > largest:
        raise InvalidParams([_too_large(parts, largest)])
    return text


def _neutralised(text: str) -> str:
    """`text` with a backslash after the ``<`` of every ``context`` tag in it: no tag of it
    opens or closes a context block. One more backslash where there are some already
    (``<\\/context>`` → ``<\\\\/context>``), so removing one from each gives `text` back."""
    return _TAG.sub("<\\\\", text)


class _Text(str):
    """A text block's text: neutralised together with the text blocks beside it."""


class _Mention(str):
    """``@`` and a file or URI, as the prompt shows it: set apart from the text around it by
    `_joined`."""


class _Framed(str):
    """An attachment, framed whole: taken as it is."""


def _part(block: ContentBlock, path: str) -> str | dict[str, Any]:
    """`block` as a part of the prompt, or the issue refusing it."""
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "text" and isinstance(block.get("text"), str):
        return _Text(block["text"])
    if kind == "resource_link" and isinstance(block.get("uri"), str):
        return _Mention(_mention(block["uri"]))
    if kind == "resource" and isinstance(resource := block.get("resource"), dict):
        return _attachment(resource, f"{path}.resource")
    what = f"{kind!r} content" if isinstance(kind, str) else "a malformed content block"
    return {"path": path, "message": f"robotactl acp does not accept {what}"}


def _attachment(resource: dict[str, Any], path: str) -> str | dict[str, Any]:
    """An embedded `resource` as a part of the prompt: its text framed, under the mention of
    what the URI says besides the path (the lines it is) when it says any; a blob mentioned;
    or the issue refusing it (ACP's ``TextResourceContents`` or ``BlobResourceContents``:
    a string ``uri`` and a string ``text`` or ``blob``)."""
    uri = resource.get("uri")
    if not isinstance(uri, str):
        return {"path": f"{path}.uri", "message": "an attachment needs its uri"}
    text = resource.get("text")
    if isinstance(text, str):
        target, said = _located(uri)
        label = f"@{target} ({', '.join(said)}):\n" if said else ""
        body = _neutralised(text)
        return _Framed(f'\n{label}<context uri="{_attribute(uri)}">\n{body}\n</context>\n')
    if isinstance(resource.get("blob"), str):
        return _Mention(_mention(uri))
    for member, kind in (("text", "a string"), ("blob", "a base64 string")):
        if member in resource:
            message = f"an attachment's {member} must be {kind}"
            return {"path": f"{path}.{member}", "message": message}
    return {
        "path": path,
        "message": "an attachment needs its text or its blob; a resource_link mentions "
        "a file without its content",
    }


def _joined(parts: Sequence[str]) -> str:
    """`parts` joined, with a space between a mention and text it would touch (an editor
    sends ``explain`` ``@a.txt`` ``this`` as blocks that hold no space). Text blocks next to
    each other are neutralised as one text: ``</con`` ``text>`` make a tag together."""
    merged: list[str] = []
    for is_text, run in itertools.groupby(parts, key=lambda part: isinstance(part, _Text)):
        group = list(run)
        merged.extend([_Text("".join(group))] if is_text else group)
    pieces: list[str] = []
    last = ""  # the last character joined so far
    after_mention = False
    for part in merged:
        mention = isinstance(part, _Mention)
        piece = _neutralised(part) if isinstance(part, _Text) else part
        touching = bool(last and piece) and not last.isspace() and not piece[0].isspace()
        if touching and (mention or after_mention):
            pieces.append(" ")
        pieces.append(piece)
        last = piece[-1:] or last
        after_mention = mention
    return "".join(pieces)


def _mention(uri: str) -> str:
    """The mention of `uri`: ``@`` and its target, then what its URI says besides the path,
    in parentheses (``@/w/a.py (lines 10-20)``)."""
    target, said = _located(uri)
    return f"@{target} ({', '.join(said)})" if said else f"@{target}"


def _located(uri: str) -> tuple[str, list[str]]:
    """The target a mention of `uri` names, `_word`-spelled — a ``file:`` URI's local path,
    percent-decoded (``my%20file.txt`` is ``my file.txt``; ``file://localhost/…`` is local
    too), any other URI whole — and what a local file's URI says besides: its fragment's
    lines (``lines 10-20``), its query (``symbol "parse"``)."""
    from urllib.parse import unquote, urlsplit

    try:
        parts = urlsplit(uri)
    except ValueError:  # no URI a path can be taken from (``file://[x``): shown whole
        parts = None
    if parts is None or parts.scheme != "file" or parts.netloc not in ("", "localhost"):
        return _word(uri), []
    return _word(unquote(parts.path)), _where(parts.fragment) + _asked(parts.query)


def _where(fragment: str) -> list[str]:
    """What a ``file:`` URI's `fragment` says: the lines it names (``line 10``, ``lines
    10-20``), or the fragment itself, percent-decoded and quoted (``fragment "intro"``)."""
    from urllib.parse import unquote

    if not fragment:
        return []
    if (lines := _LINES.fullmatch(fragment)) is not None:
        first = int(lines.group(1))
        last = first if lines.group(2) is None else int(lines.group(2))
        if first == last >= 1:
            return [f"line {first}"]
        if 1 <= first < last:
            return [f"lines {first}-{last}"]
    return [f"fragment {_quoted(unquote(fragment))}"]


def _asked(query: str) -> list[str]:
    """What a ``file:`` URI's `query` says: Zed's ``column`` and ``symbol`` (``column 5``,
    ``symbol "parse"``), or, holding anything else, the query itself, percent-decoded and
    quoted (``query "v=2"``)."""
    from urllib.parse import parse_qsl, unquote

    if not query:
        return []
    pairs = parse_qsl(query, keep_blank_values=True)
    known = dict(pairs)
    if (
        pairs
        and len(known) == len(pairs)
        and known.keys() <= {"column", "symbol"}
        and _COLUMN.fullmatch(known.get("column", "1"))
    ):
        said = [f"column {int(known['column'])}"] if "column" in known else []
        return said + ([f"symbol {_quoted(known['symbol'])}"] if "symbol" in known else [])
    return [f"query {_quoted(unquote(query))}"]


def _word(target: str) -> str:
    """`target` bare when it reads as one word, else `_quoted` (``"/w/my file.txt"``)."""
    return _quoted(target) if _MENTION_UNSAFE.search(target) else target


def _quoted(text: str) -> str:
    """`text` JSON-quoted with ``<``, ``>``, DEL, C1 and the line separators escaped too
    (``"/w/a\\nb"``): it ends at its own quote, holds no tag and no line break."""
    import json

    quoted = json.dumps(text, ensure_ascii=False)
    return _QUOTED_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", quoted)


def _attribute(value: str) -> str:
    """`value` as a double-quoted XML attribute's text: nothing in it ends the attribute or
    the tag, or starts a line; an XML reader gets `value` back."""
    return _ATTRIBUTE_UNSAFE.sub(
        lambda m: _ATTRIBUTE_NAMED.get(m.group()) or f"&#x{ord(m.group()):X};", value
    )


def _encoded_size(text: str) -> int:
    """How many bytes `text` takes in robotad's request: JSON-escaped (a quote, a backslash or
    a newline takes two bytes, a control character six), not its UTF-8 length."""
    import msgspec

    try:
        return len(msgspec.json.encode(str(text)))
    except UnicodeEncodeError:  # a lone surrogate: at most six bytes a character, escaped
        return 6 * len(text)


def _too_large(parts: Sequence[str], largest: int) -> dict[str, Any]:
    """The issue of a prompt over `largest` bytes, at its largest block (the one to cut)."""
    sizes = [_encoded_size(part) for part in parts]
    index = max(range(len(parts)), key=sizes.__getitem__)
    what = {_Framed: "attachment", _Mention: "link"}.get(type(parts[index]), "text")
    return {
        "path": f"$.prompt[{index}]",
        "message": f"the prompt is over {largest / 2**20:g} MiB, more than robotad takes in one "
        f"message, {sizes[index] / 2**20:.1f} MiB of it in this {what}: attach less of it",
    }
