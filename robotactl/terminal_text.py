"""Text from a model or from other people's data, made safe to print on a terminal.

A terminal obeys what it is sent. An escape sequence in a model's reply (a fetched page can
ask for one) sets the clipboard (OSC 52) or the window title, moves the cursor or clears the
screen; a lone carriage return or a backspace lets what follows overwrite what was shown; a
bidirectional control makes a command read in another order than the one that runs ("Trojan
Source"). `visible` shows each such character instead of sending it: a C0 control or DEL in
caret notation (``^[`` for ESC, ``^M`` for a lone carriage return, ``^?`` for DEL), a C1
control (U+0080–U+009F; U+009B is a CSI to some terminals) or a bidi control (U+061C,
U+200E–U+200F, U+202A–U+202E, U+2066–U+2069) as ``<U+202E>``. Newline and tab pass, and CRLF
becomes a newline. `VisibleStream` does the same for text that arrives in pieces (a reply's
deltas): a carriage return that ends a piece waits for the next one, which says whether it
was half of a CRLF.

A tool call's arguments are what a person approves, so they are shown exactly
(`visible_exactly`): besides the controls, every character that draws nothing or passes for a
plain space is shown as ``<U+200B>`` — zero-width spaces and joiners, the soft hyphen, word
joiners and invisible operators, variation selectors, tag characters, fillers, no-break and
other non-ASCII spaces. ``curl exa<U+200B>mple.com`` names another host than the one it looked
like, and ``rm a<U+00A0>b`` removes one file, not two. Prose (a reply) keeps them: an emoji's
joiners and a text's no-break spaces are part of how it reads.

robotactl applies these where such text enters its output, before it styles that text, so its
own colour codes are the only escape sequences it writes. Imports nothing but `re`, which the
quick ``status`` path (`robotactl.entry`) already has.
"""

from __future__ import annotations

import re

__all__ = ["VisibleStream", "hidden_code_point", "json_safe", "visible", "visible_exactly"]

#: Unicode's Bidi_Control characters: the marks, embeddings, overrides and isolates.
_BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
#: What `visible` shows each character it replaces as (and CRLF as a newline).
_SHOWN = {chr(code): f"^{chr(code + 64)}" for code in range(0x20)}
_SHOWN["\x7f"] = "^?"
_SHOWN.update({chr(code): f"<U+{code:04X}>" for code in (*range(0x80, 0xA0), *_BIDI)})
_SHOWN["\r\n"] = "\n"
#: CRLF, or one character to replace: C0 but newline and tab, DEL, C1, a bidi control.
_UNSAFE = re.compile(
    r"\r\n|[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


def visible(text: str) -> str:
    """`text` with every terminal control shown, not sent (see the module docstring): ESC is
    ``^[``, a lone CR ``^M``, U+009B ``<U+009B>``, U+202E ``<U+202E>``; CRLF is a newline.
    Printable text, newlines and tabs come back unchanged; so does text already made visible."""
    return _UNSAFE.sub(_show, text)


def _show(match: re.Match[str]) -> str:
    return _SHOWN[match[0]]


#: What `visible_exactly` shows besides: Unicode's format characters (Cf) but the bidi
#: controls `visible` shows already, the line and paragraph separators, every space but
#: U+0020, and what draws nothing though Unicode calls it a letter or a mark (the combining
#: grapheme joiner, Khmer's inherent vowels, Mongolian and other variation selectors, the
#: Hangul fillers). Written out, not derived from `unicodedata` at import (robotactl's quick
#: path imports this module); a test holds it against the `unicodedata` of the Python running.
_INVISIBLE = re.compile(
    "[\u00a0\u00ad\u034f\u0600-\u0605\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160"
    "\u1680\u17b4\u17b5\u180b-\u180f\u2000-\u200d\u2028\u2029\u202f\u205f-\u2064"
    "\u206a-\u206f\u3000\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb\U000110bd"
    "\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f\U000e0100-\U000e01ef]"
)


def visible_exactly(text: str) -> str:
    """`visible`, and every character that draws nothing or passes for a plain space shown
    as ``<U+200B>`` too (see the module docstring): for what a person decides on, a tool
    call's arguments."""
    return _INVISIBLE.sub(_code_point, visible(text))


def _code_point(match: re.Match[str]) -> str:
    return f"<U+{ord(match[0]):04X}>"


#: One bidi control, or one character `visible_exactly` shows because it draws nothing.
_BIDI_OR_INVISIBLE = re.compile(
    "[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]|" + _INVISIBLE.pattern
)


def hidden_code_point(character: str) -> str | None:
    """How `visible_exactly` shows `character` when it is a bidi control or draws nothing
    (``<U+202E>``, ``<U+200B>``); None for any other character, C0 and C1 controls included
    (an editor that shows those itself, as prompt_toolkit does, needs only these)."""
    if _BIDI_OR_INVISIBLE.fullmatch(character) is None:
        return None
    return f"<U+{ord(character):04X}>"


#: What JSON text may still hold raw that a terminal obeys: DEL, C1 and bidi controls (JSON
#: escapes C0 itself). Outside a string JSON holds only structure and whitespace, so they can
#: only stand inside one, where ``\uXXXX`` means the same character.
_JSON_UNSAFE = re.compile(r"[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def json_safe(encoded: str) -> str:
    r"""JSON text `encoded` with every DEL, C1 and bidi control written as a ``\uXXXX`` escape:
    the same JSON to any reader, and nothing a terminal would obey when it is printed."""
    return _JSON_UNSAFE.sub(lambda match: f"\\u{ord(match[0]):04x}", encoded)


class VisibleStream:
    """`visible` for text that arrives in pieces: the pieces `feed` returns, followed by what
    `end` returns, are `visible` of the whole text, wherever it was cut (a CRLF cut in two is
    still one newline; an escape sequence cut in two is shown as it would be whole)."""

    def __init__(self) -> None:
        self._carriage_return = False

    def feed(self, piece: str) -> str:
        """`piece` made visible, but a carriage return at its end: that one waits for the
        next piece (or `end`)."""
        if self._carriage_return:
            piece = "\r" + piece
        self._carriage_return = piece.endswith("\r")
        if self._carriage_return:
            piece = piece[:-1]
        return visible(piece)

    def end(self) -> str:
        """What is still held: ``^M`` for a carriage return that ended the text, else ``""``."""
        held, self._carriage_return = self._carriage_return, False
        return "^M" if held else ""
