"""HTML to readable plain text, for WebFetch. A pure function over a string.

What survives: the title (first line), text in reading order, block elements as separate
paragraphs, ``<br>`` as a line break, headings prefixed with ``#`` marks, list items with
``- ``, table cells separated by `` | `` with one row per line, ``<pre>`` text verbatim, links
as ``[text](absolute URL)`` and images as ``[image: alt]``. What is dropped: script, style,
noscript, template, svg, iframe, the rest of the head, comments and markup. Whitespace outside
``<pre>`` collapses the way a browser collapses it. Never raises for malformed markup.

Python's parser takes time quadratic in some malformed pages (``<a b='`` repeated: minutes for
300 KB), so the conversion calls its `check` between the parser's steps; whatever that raises
(`trio.from_thread.check_cancelled` in a worker thread: the call was cancelled) stops it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from html.parser import HTMLParser
from urllib.parse import urljoin

__all__ = ["html_to_text"]

# The head holds no visible text but the title (handled apart), so it needs no dropping, and
# pages that omit </head> lose nothing.
_DROPPED = frozenset({"script", "style", "noscript", "template", "svg", "iframe"})
_BLOCKS = frozenset(
    {
        "address", "article", "aside", "blockquote", "body", "dd", "details", "dialog", "div",
        "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "header", "hr",
        "html", "main", "nav", "ol", "p", "section", "summary", "table", "tbody", "thead",
        "tfoot", "ul",
    }
)  # fmt: skip
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_BREAK = "\x00br\x00"  # a forced line break, kept apart from collapsible whitespace
_PARAGRAPH = "\x00p\x00"
_VERBATIM = "\x01"  # starts a <pre> line: keep its whitespace
_SPACE = re.compile(r"[ \t\r\n\f\v]+")


def html_to_text(
    html: str, base_url: str | None = None, *, check: Callable[[], object] | None = None
) -> str:
    """The readable text of `html`; relative links are resolved against `base_url`. `check`
    is called between the parser's steps (see the module doc)."""
    extractor = _TextExtractor(base_url, check or _go_on)
    extractor.feed(html)
    extractor.close()
    return extractor.text()


def _go_on() -> None:
    """The `check` of a conversion nobody stops."""


class _TextExtractor(HTMLParser):
    def __init__(self, base_url: str | None, check: Callable[[], object]) -> None:
        super().__init__(convert_charrefs=True)
        self._base_url = base_url
        self._check = check
        self._pieces: list[str] = []
        self._dropping: list[str] = []  # open dropped elements, innermost last
        self._dropped_open: dict[str, int] = {}  # how many of each name `_dropping` holds
        self._pre_depth = 0
        self._row_started = False
        self._title: list[str] | None = None
        self._title_text = ""
        self._links: list[tuple[int, str | None]] = []  # (piece index at <a>, href)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._check()
        if tag == "title" and not self._title_text:
            self._title = []
            return
        if self._dropping or tag in _DROPPED:
            if tag in _DROPPED:
                self._dropping.append(tag)
                self._dropped_open[tag] = self._dropped_open.get(tag, 0) + 1
            return
        attributes = dict(attrs)
        if tag in _BLOCKS or tag in _HEADINGS or tag == "pre":
            self._pieces.append(_PARAGRAPH)
        if tag in _HEADINGS:
            self._pieces.append("#" * _HEADINGS[tag] + " ")
        elif tag == "pre":
            self._pre_depth += 1
            self._pieces.append(_VERBATIM)
        elif tag == "br":
            self._pieces.append(_BREAK + (_VERBATIM if self._pre_depth else ""))
        elif tag == "li":
            self._pieces.append(_BREAK + "- ")
        elif tag == "tr":
            self._pieces.append(_BREAK)
            self._row_started = False
        elif tag in ("td", "th"):
            self._pieces.append(" | " if self._row_started else " ")
            self._row_started = True
        elif tag == "img" and attributes.get("alt"):
            self._pieces.append(f" [image: {attributes['alt']}] ")
        elif tag == "a":
            if self._links:
                # Links do not nest: a new one closes the open one, as a browser does (and
                # each end tag's work stays its own link's, not every open link's).
                self.handle_endtag("a")
            self._links.append((len(self._pieces), self._resolve(attributes.get("href"))))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        # <br/>, <img/>: a start with no content; never open a dropped element.
        if tag not in _DROPPED:
            self.handle_starttag(tag, attrs)
            if tag == "a":
                self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        self._check()
        if tag == "title" and self._title is not None:
            self._title_text = _SPACE.sub(" ", "".join(self._title)).strip()
            self._title = None
            return
        if self._dropping:
            if self._dropped_open.get(tag):  # counted: a scan of a deep stack per end tag
                while (closed := self._dropping.pop()) != tag:  # was quadratic in the page
                    self._dropped_open[closed] -= 1
                self._dropped_open[tag] -= 1
            return
        if tag in _BLOCKS or tag in _HEADINGS:
            self._pieces.append(_PARAGRAPH)
        elif tag == "pre":
            self._pre_depth = max(0, self._pre_depth - 1)
            self._pieces.append(_PARAGRAPH)
        elif tag == "a" and self._links:
            start, href = self._links.pop()
            inner = "".join(self._pieces[start:])
            label = _SPACE.sub(" ", inner.replace(_BREAK, " ").replace(_VERBATIM, "")).strip()
            if href and label and label != href and _PARAGRAPH not in inner:
                self._pieces.insert(start, "[")
                self._pieces.append(f"]({href})")

    def handle_data(self, data: str) -> None:
        self._check()
        if self._title is not None:
            self._title.append(data)
        elif not self._dropping:
            self._pieces.append(data.replace("\n", _BREAK + _VERBATIM) if self._pre_depth else data)

    # Markup that shows nothing: each is still one of the parser's steps.
    def handle_comment(self, data: str) -> None:
        self._check()

    def handle_decl(self, decl: str) -> None:
        self._check()

    def handle_pi(self, data: str) -> None:
        self._check()

    def unknown_decl(self, data: str) -> None:
        self._check()

    def parse_marked_section(self, i: int, report: bool = True) -> int:
        # Python 3.11's parser asserts on a marked section it does not know (``<![C …``, as
        # any page may hold): skip it to its ``>`` as markup, as later Pythons do.
        try:
            return int(super().parse_marked_section(i, report))
        except AssertionError:
            end = self.rawdata.find(">", i + 3)
            return -1 if end < 0 else end + 1

    def _resolve(self, href: str | None) -> str | None:
        if not href or href.startswith("#"):
            return None
        resolved = urljoin(self._base_url, href) if self._base_url else href
        return resolved if resolved.startswith(("http://", "https://", "mailto:")) else None

    def text(self) -> str:
        raw = "".join(self._pieces)
        paragraphs = []
        for paragraph in raw.split(_PARAGRAPH):
            self._check()
            lines = [_render_line(line) for line in paragraph.split(_BREAK)]
            block = "\n".join(line for line in lines if line is not None).strip("\n")
            if block.strip():
                paragraphs.append(block)
        body = "\n\n".join(paragraphs)
        if self._title_text and not body.startswith(self._title_text):
            return f"{self._title_text}\n\n{body}" if body else self._title_text
        return body


def _render_line(line: str) -> str | None:
    """A <pre> line keeps its whitespace (blank ones too); any other line collapses, and
    disappears when nothing is left."""
    if line.startswith(_VERBATIM):
        return line.replace(_VERBATIM, "").rstrip()
    collapsed = _SPACE.sub(" ", line.replace(_VERBATIM, "")).strip()
    return collapsed or None
