"""How robotactl writes: JSON for scripts (``--json``), short plain text for people.

`Output` is the one writer every command uses. In JSON mode stdout carries exactly one JSON
document per command (the daemon's result, unchanged), so ``robotactl --json status | jq`` is
safe; diagnostics always go to stderr. In human mode values are laid out for reading and may
be coloured, but only when that stream is a terminal, ``NO_COLOR`` is unset or empty
(https://no-color.org) and ``TERM`` is not ``dumb``.

Text from a model or from other people's data is made visible (`robotactl.terminal_text`)
before it is styled: `side`, `error`, `rpc_error`, `table`'s values and `columns`' cells do it
themselves; `line`, `notice`, `prompt_line` and `write` print what they are given, which their
callers made visible piece by piece (their own colour codes included in it).

Nothing here talks to the daemon or imports trio or msgspec; `json` and click load on first
use (``robotactl status``'s quick path lays out its table without click).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from robotactl.terminal_text import json_safe, visible

#: Not `typing.TYPE_CHECKING`: ``robotactl status``'s quick path must not import `typing`.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import IO, Any

__all__ = ["Output", "color_enabled", "format_json", "format_rpc_error", "rpc_error_document"]

_ANSI = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}


def color_enabled(stream: IO[str], environ: Mapping[str, str] | None = None) -> bool:
    """Whether text written to `stream` may carry ANSI colours.

    Only for a terminal, never with a non-empty ``NO_COLOR``, never for ``TERM=dumb``.
    """
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR", ""):
        return False
    if env.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # not a real stream, or a closed one
        return False


def format_json(value: Any, *, indent: int | None = 2) -> str:
    """`value` as JSON text: UTF-8 kept readable, member order kept as the daemon sent it;
    the controls a terminal obeys escaped (`json_safe`: C0 JSON escapes itself)."""
    import json

    return json_safe(json.dumps(value, indent=indent, ensure_ascii=False))


def format_rpc_error(code: int, message: str, data: Any = None) -> str:
    """``error CODE: message`` — one line a person reads (the message carries the facts:
    a provider failure's endpoint and cause, a session id…), then one ``  path: message``
    line per located issue of an invalid-params error. The rest of `data` is for scripts:
    ``--json`` prints the whole error (`rpc_error_document`). What the daemon said is made
    visible: a message may quote a model's or a record's text."""
    text = f"error {code}: {visible(message)}"
    issues = data.get("issues") if isinstance(data, Mapping) else None
    lines = [
        visible(f"{issue.get('path') or '$'}: {issue.get('message')}")
        for issue in (issues if isinstance(issues, list) else ())
        if isinstance(issue, Mapping)
    ]
    if len(lines) == 1 and text.endswith(lines[0]):
        return text  # the message is that one issue already: said once
    return "\n  ".join([text, *lines])


def rpc_error_document(code: int, message: str, data: Any = None) -> dict[str, Any]:
    """The whole JSON-RPC error as ``--json`` prints it on stderr: ``{"error": {code,
    message, data?}}``."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"error": error}


class Output:
    """Writes a command's results (stdout) and diagnostics (stderr).

    `json_mode` comes from the global ``--json``. Colour is decided per stream on first use
    unless `color` forces it (tests, or a future ``--color`` option).
    """

    def __init__(self, *, json_mode: bool = False, color: bool | None = None) -> None:
        self.json_mode = json_mode
        self._color = color

    def _colors(self, *, err: bool) -> bool:
        if self._color is not None:
            return self._color
        return color_enabled(sys.stderr if err else sys.stdout)

    def style(self, text: str, *styles: str, err: bool = False) -> str:
        """`text` wrapped in the named ANSI `styles` when that stream may be coloured."""
        if not styles or not self._colors(err=err):
            return text
        codes = ";".join(_ANSI[name] for name in styles)
        return f"\x1b[{codes}m{text}\x1b[0m"

    def json(self, value: Any) -> None:
        """Write `value` as one JSON document on stdout (indented, newline-terminated)."""
        import click

        click.echo(format_json(value), color=False)

    def line(self, text: str = "") -> None:
        """One line of human output on stdout."""
        import click

        click.echo(text, color=self._colors(err=False))

    def table(self, rows: Sequence[tuple[str, str]]) -> None:
        """Two aligned columns, the keys dimmed: ``key   value`` per row, each value made
        visible."""
        if not rows:
            return
        width = max(len(key) for key, _ in rows)
        for key, value in rows:
            self.line(f"{self.style(key.ljust(width), 'dim')}  {visible(value)}")

    def write(self, text: str) -> None:
        """Part of a line on stdout, flushed at once (streamed model text, which the caller
        made visible with a `robotactl.terminal_text.VisibleStream`)."""
        import click

        click.echo(text, nl=False, color=self._colors(err=False))
        sys.stdout.flush()

    def columns(self, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        """An aligned table on stdout under a dimmed `header`; the last column is not padded.

        Cells are plain text, made visible here (so widths are their lengths).
        """
        shown = [[visible(cell) for cell in row] for row in rows]
        widths = [len(name) for name in header]
        for row in shown:
            for index, cell in enumerate(row):
                widths[index] = max(widths[index], len(cell))

        def lay_out(cells: Sequence[str]) -> str:
            padded = [cell.ljust(width) for cell, width in zip(cells[:-1], widths, strict=False)]
            return "  ".join([*padded, cells[-1]]).rstrip()

        self.line(self.style(lay_out(header), "dim"))
        for row in shown:
            self.line(lay_out(row))

    def side(self, text: str, *styles: str) -> None:
        """A line of activity on stderr (tool calls, decisions), dimmed unless `styles` say
        otherwise, so it stands apart from the answer on stdout. `text` is made visible."""
        import click

        shown = self.style(visible(text), *(styles or ("dim",)), err=True)
        click.echo(shown, err=True, color=self._colors(err=True))

    def notice(self, text: str) -> None:
        """An informational line on stderr; none under ``--json``, where stderr carries only
        an error, as one JSON document, and stdout's document says what a script needs."""
        if not self.json_mode:
            self.prompt_line(text)

    def prompt_line(self, text: str) -> None:
        """A line of a question to the person at the terminal, on stderr, in every mode."""
        import click

        click.echo(text, err=True, color=self._colors(err=True))

    def error(self, text: str) -> None:
        """An error line on stderr: ``robotactl: text``, the prefix red on a terminal. `text`
        is made visible (it may quote what robotad or a file said)."""
        import click

        prefix = self.style("robotactl:", "red", "bold", err=True)
        click.echo(f"{prefix} {visible(text)}", err=True, color=self._colors(err=True))

    def error_json(self, document: Any) -> None:
        """An error as one line of JSON on stderr (``--json``: scripts parse stderr too)."""
        import click

        click.echo(format_json(document, indent=None), err=True, color=False)

    def rpc_error(self, code: int, message: str, data: Any = None) -> None:
        """A JSON-RPC error on stderr, as `format_rpc_error` lays it out, after the
        ``robotactl:`` prefix every error line has."""
        import click

        text = format_rpc_error(code, message, data)
        first, newline, rest = text.partition("\n")
        prefix = self.style("robotactl:", "red", "bold", err=True)
        click.echo(
            f"{prefix} {self.style(first, 'red', err=True)}{newline}{rest}",
            err=True,
            color=self._colors(err=True),
        )
