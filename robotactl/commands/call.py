"""``robotactl call METHOD [JSON]``: any JSON-RPC method, raw (PROTOCOL.md §9).

The parameters are a JSON object or array given as the argument, or read from stdin when the
argument is ``-``; omitted (or ``null``) they are ``{}``. Invalid JSON is a usage error (exit 2)
that names the line and column and points at the spot. The result is printed as JSON whether
or not ``--json`` was given; a JSON-RPC error prints ``error CODE: message`` and its data on
stderr and exits 1.

It is one request on the blocking client, waiting as long as the method takes; events that
the call subscribes the connection to (``session/run``) are not shown.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import click

from robotactl.cli import ClientOptions, call_daemon

if TYPE_CHECKING:
    from json import JSONDecodeError

    from protocol.blocking_client import BlockingClient

__all__ = ["JSON_PARAMS", "JsonParams", "call", "parse_json"]


class JsonParams(click.ParamType[Any]):
    """A JSON object or array (JSON-RPC's structured params); ``-`` reads it from stdin.

    Converts to the decoded value; ``null`` converts to ``{}``. Anything else fails with a
    located message (line, column and a caret under the offending character).
    """

    name = "json"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if not isinstance(value, str):
            return value  # already converted (a default)
        text = sys.stdin.read() if value == "-" else value
        source = "stdin" if value == "-" else "argument"
        try:
            decoded = parse_json(text, source)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        if decoded is None:
            return {}
        if not isinstance(decoded, dict | list):
            kind = _JSON_KINDS.get(type(decoded), type(decoded).__name__)
            self.fail(f"params must be a JSON object or array, not a {kind}", param, ctx)
        return decoded


def parse_json(text: str, source: str) -> Any:
    """Decode strict JSON `text` read from `source` (named in the message: "stdin", "FILE").

    Raises `ValueError` whose message locates the problem (line, column, a caret under the
    spot) or names the non-standard constant (NaN, Infinity) that strict JSON lacks.
    """
    import json

    if not text.strip():
        raise ValueError(f"not valid JSON ({source}): it is empty")
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not valid JSON ({source}): {_locate(exc)}") from None
    except _NotJson as exc:
        raise ValueError(f"not valid JSON ({source}): {exc} is not a JSON value") from None
    except _TooLarge as exc:
        raise ValueError(
            f"{source}: the number {exc} is too large (it would become infinity)"
        ) from None


JSON_PARAMS = JsonParams()
_JSON_KINDS = {bool: "boolean", int: "number", float: "number", str: "string"}


class _NotJson(ValueError):
    """A non-standard constant Python's json module would accept (NaN, Infinity)."""


class _TooLarge(ValueError):
    """A JSON number beyond a double's range."""


def _refuse_constant(name: str) -> Any:
    raise _NotJson(name)


def _finite(text: str) -> float:
    """A JSON number as a float; one too large for a double (``1e400``) is refused: Python
    would make it infinity, which goes out as ``null``."""
    import math

    value = float(text)
    if not math.isfinite(value):
        raise _TooLarge(text)
    return value


def _locate(exc: JSONDecodeError) -> str:
    """``<msg> at line L, column C`` plus that line (made visible: it may be anyone's file)
    with a caret under column C."""
    lines = exc.doc.splitlines()
    # The error may sit on the empty line after a last newline (input cut short).
    line_text = lines[exc.lineno - 1] if exc.lineno <= len(lines) else ""
    # Some messages end in "at" already ("Invalid control character at"): not "at at line".
    what = exc.msg.removesuffix(" at")
    where = f"{what} at line {exc.lineno}, column {exc.colno}"
    if not line_text:
        return where
    from robotactl.terminal_text import visible

    # Long lines are cut around the error so the caret stays on screen.
    start = max(0, exc.colno - 1 - 60)
    before = visible(line_text[start : exc.colno - 1])
    shown = before + visible(line_text[exc.colno - 1 : start + 120])
    caret = " " * len(before) + "^"
    return f"{where}\n  {shown}\n  {caret}"


@click.command(short_help="Call a JSON-RPC method and print its result as JSON.")
@click.argument("method")
@click.argument("params", required=False, type=JSON_PARAMS, metavar="[JSON]")
@click.pass_obj
def call(options: ClientOptions, method: str, params: Any) -> None:
    """Call METHOD with JSON params (an object; `-` reads stdin) and print the result as JSON.

    \b
    Examples:
      robotactl call daemon/status
      robotactl call session/get '{"sessionId": "abc"}'
      echo '{"query": "tests"}' | robotactl call history/search -
    """

    def send(client: BlockingClient) -> Any:
        return client.request(method, {} if params is None else params)

    # Any method may be called, session/run and session/compact included: the reply comes
    # when the daemon is done, however long that takes (Ctrl-C stops waiting).
    options.output.json(call_daemon(options, send, timeout=None))
