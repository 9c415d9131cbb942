"""html_to_text: the readable text of a page, for WebFetch."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from robotad.tools.html_text import html_to_text

PAGE = """<!doctype html>
<html><head><title>The  Title</title>
<style>body { color: red }</style><script>if (a < b) { alert("x") }</script>
<meta charset="utf-8"></head>
<body>
<nav><a href="/home">Home</a> <a href="#top">Top</a> <a href="javascript:void(0)">JS</a></nav>
<h1>Main   heading</h1>
<p>Some <b>bold</b> and
   <i>spread</i> text &amp; an entity&nbsp;here.</p>
<p>Line one<br>Line two</p>
<ul><li>first</li><li>second <a href="https://other.example/x">out</a></li></ul>
<pre>
def f():
    return 1

x = 2
</pre>
<table><tr><th>k</th><th>v</th></tr><tr><td>a</td><td>1</td></tr></table>
<img src="p.png" alt="a picture"><noscript>enable js</noscript>
<svg><text>vector text</text></svg>
<!-- a comment -->
</body></html>"""


def test_page_becomes_readable_text() -> None:
    text = html_to_text(PAGE, base_url="https://site.example/docs/page.html")
    assert text == "\n".join(
        [
            "The Title",
            "",
            "[Home](https://site.example/home) Top JS",
            "",
            "# Main heading",
            "",
            "Some bold and spread text & an entity\xa0here.",
            "",
            "Line one",
            "Line two",
            "",
            "- first",
            "- second [out](https://other.example/x)",
            "",
            "def f():",
            "    return 1",
            "",
            "x = 2",
            "",
            "k | v",
            "a | 1",
            "",
            "[image: a picture]",
        ]
    )


def test_dropped_elements_leave_nothing() -> None:
    text = html_to_text(PAGE)
    for hidden in ("color: red", "alert", "enable js", "vector text", "a comment"):
        assert hidden not in text


def test_page_without_head_end_tag_keeps_its_body() -> None:
    assert html_to_text("<html><head><title>T</title><body><p>body text") == "T\n\nbody text"


def test_link_around_blocks_is_not_bracketed() -> None:
    assert html_to_text('<a href="https://e.example/"><div>card</div></a>') == "card"


def test_a_link_opened_inside_another_closes_it_as_a_browser_does() -> None:
    # Links do not nest in HTML. Nested, every end tag rejoined all the text since the
    # outermost start: 240 KB of "<a href=/x>y" took the daemon's event loop a minute.
    page = '<p><a href="/1">one<a href="/2">two</a> after</a> tail</p>'
    assert html_to_text(page, base_url="https://e.example/") == (
        "[one](https://e.example/1)[two](https://e.example/2) after tail"
    )
    deep = '<a href="/x">y' * 2000 + "</a>" * 2000
    assert html_to_text(deep, base_url="https://e.example/") == "[y](https://e.example/x)" * 2000


def test_dropped_elements_nest_and_close_in_any_order() -> None:
    # Counted per name, not searched for in the stack of open ones at every end tag.
    assert html_to_text("<svg><svg></p>x</svg>y</svg>z") == "z"
    assert html_to_text("<svg><iframe>a</svg>b</iframe>c</svg>d") == "bcd"  # svg closed both
    assert html_to_text("<svg>" * 3000 + "</p>" * 3000 + "</svg>" * 3000 + "shown") == "shown"


def test_an_unknown_marked_section_is_markup_not_a_failure() -> None:
    """Python 3.11's parser asserted on ``<![C …`` (a marked section it does not know), and
    WebFetch answered "AssertionError" for the whole page; it is skipped as markup."""
    assert html_to_text("<p>one<![C x]>two</p> <![foo]>three") == "onetwo\n\nthree"
    assert html_to_text("a <![C unfinished") == "a <![C unfinished"


def test_plain_text_passes_through() -> None:
    assert html_to_text("just   words\n here") == "just words here"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("<>/&;=\"' abpre\nscript#x![]-?CD")), max_size=80))
def test_any_markup_converts_without_raising(markup: str) -> None:
    text = html_to_text(markup)
    assert "\x00" not in text
    assert "\x01" not in text
