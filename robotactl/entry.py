"""The ``robotactl`` console script: a quick path for a plain ``status``, else the click CLI.

``robotactl status`` is what scripts and prompts run most often, and its cost is almost all
imports: click, msgspec (which loads `typing`, `inspect`, `decimal`) and `pathlib` cost several
times the interpreter's own start-up. This module answers the one form that needs none of
them — ``robotactl [--socket PATH] [--json] [--no-autostart] status`` with a daemon serving —
with `_socket`, stdlib `json` and `robotactl.status_view`, and prints exactly what the click
command prints.

Contract: the quick path only ever succeeds the way the full command would, or steps aside.
Any other argument list, a socket nobody answers on, a reply that is not a plain
``{"jsonrpc": "2.0", "id": 1, "result": {...}}`` line (an error, a notification first, bytes
that are not JSON), or any `OSError` hands the whole command to `robotactl.console.main`,
which repeats the request (``daemon/status`` has no effect) and owns every failure:
autostart, messages, exit statuses. The quick path waits a second (`_WAIT`) for the reply: a
daemon slower than that is asked again by the full command, which shows the wait on a terminal
and gives up on a silent daemon (`robotactl.unanswered`), counting the second already waited
(`waited`), so ``status`` never waits longer for the handover. Nothing is printed before the
reply has been fully checked, so a handover never duplicates output.
"""

from __future__ import annotations

import sys

#: Not `typing.TYPE_CHECKING`: importing `typing` is what this module exists to avoid.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["main", "quick_status", "status_request_options"]

#: The request, as the blocking client writes it (NDJSON, id 1, empty params).
_REQUEST = b'{"jsonrpc":"2.0","id":1,"method":"daemon/status","params":{}}\n'
#: Seconds the quick path waits for connect and reply: a terminal is told of a longer wait
#: (`robotactl.unanswered.NOTICE_AFTER`), which only the full command can do.
_WAIT = 1.0
#: Seconds this process's quick path waited for a reply that did not come (0: none).
waited = 0.0
#: The reply of daemon/status is a few hundred bytes; more than this is not a plain reply.
_MAX_REPLY = 1 << 20


def main() -> None:
    """The ``robotactl`` console script."""
    closed = reopen_closed_streams()
    try:
        answered = "stdout" not in closed and quick_status(sys.argv[1:])
    except OSError:  # stdout refused the answer: the full command says so
        answered = False
    except KeyboardInterrupt:  # Ctrl-C while the daemon is slow to answer: as click says it
        parsed = status_request_options(sys.argv[1:])
        if parsed is not None and parsed[1]:
            sys.stderr.write('{"error": {"message": "interrupted"}}\n')
        else:
            sys.stderr.write("\nAborted!\n")
        sys.exit(1)
    if not answered:
        from robotactl.console import main as full_main

        full_main(stdout_closed="stdout" in closed)


#: The standard streams: descriptor, name in `sys`, and how /dev/null is opened in its place.
_STREAMS = ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w"))


def reopen_closed_streams() -> list[str]:
    """Put /dev/null in place of each standard descriptor the caller left closed (``<&-``,
    ``>&-``), with a stream on it in `sys`; return their names (``"stdin"``, …).

    Python leaves ``sys.stdout`` and the others None for a closed descriptor, so the first read
    or write was a traceback; and the descriptor went to the next file opened, the daemon's
    socket, where a stray write would land. Taken in order, each /dev/null gets the lowest free
    descriptor: the closed one. A closed stdin then reads as empty, a closed stderr takes the
    messages away; a closed stdout is refused by the caller (the command's output is lost)."""
    import os

    closed: list[str] = []
    for descriptor, name, mode in _STREAMS:
        try:
            os.fstat(descriptor)
            continue
        except OSError:
            pass
        null = os.open(os.devnull, os.O_RDONLY if mode == "r" else os.O_WRONLY)
        if null != descriptor:
            os.dup2(null, descriptor)
            os.close(null)
        setattr(sys, name, open(descriptor, mode, encoding="utf-8", closefd=False))  # noqa: SIM115
        closed.append(name)
    return closed


def status_request_options(argv: Sequence[str]) -> tuple[str | None, bool] | None:
    """``(socket, json_mode)`` when `argv` is a plain ``status`` the quick path may answer,
    else None (also when ``ROBOTA_NO_AUTOSTART`` holds what click refuses). Accepts the
    global options ``--socket PATH``, ``--socket=PATH``, ``--json`` and ``--no-autostart``
    (each at most once) before ``status``, and nothing after it."""
    if not argv or argv[-1] != "status":
        return None
    if not _autostart_variable_readable():
        return None
    socket: str | None = None
    json_mode = False
    seen: set[str] = set()
    index = 0
    options = argv[:-1]
    while index < len(options):
        option = options[index]
        name, equals, value = option.partition("=")
        if name in seen:
            return None
        seen.add(name)
        if name == "--socket":
            if not equals:
                index += 1
                if index >= len(options):
                    return None
                value = options[index]
            if not value:
                return None
            socket = value
        elif option in ("--json", "--no-autostart"):
            json_mode = json_mode or option == "--json"
        else:
            return None
        index += 1
    return socket, json_mode


#: The words click reads as a boolean (`click.BOOL`, after strip and lower-casing).
_BOOLEAN_WORDS = frozenset(
    ("", "0", "1", "f", "false", "n", "no", "off", "on", "t", "true", "y", "yes")
)


def _autostart_variable_readable() -> bool:
    """Whether ``ROBOTA_NO_AUTOSTART`` is unset or a word click reads as a boolean; any other
    value is the full command's usage error (exit 2), which the quick path must not hide."""
    import os

    value = os.environ.get("ROBOTA_NO_AUTOSTART")
    return value is None or value.strip().lower() in _BOOLEAN_WORDS


def quick_status(argv: Sequence[str]) -> bool:
    """Answer a plain ``status`` without click or msgspec; True when it was answered (and
    printed), False when the full CLI must run the command instead."""
    parsed = status_request_options(argv)
    if parsed is None:
        return False
    socket, json_mode = parsed
    try:
        result = _ask_status(socket)
    except TimeoutError:
        global waited
        waited = _WAIT  # the full command counts it
        return False
    except OSError:
        return False
    if result is None:
        return False
    if json_mode:
        from robotactl.render import format_json

        text = format_json(result) + "\n"
    else:
        text = _status_table(result)
    sys.stdout.write(text)
    sys.stdout.flush()
    return True


def _ask_status(socket: str | None) -> dict[str, object] | None:
    """The ``daemon/status`` result from the daemon at the resolved socket, or None when the
    reply is anything but one plain success line."""
    import _socket
    import json

    from protocol.socket_path import resolve_socket_name

    path = resolve_socket_name(socket)
    connection = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        connection.settimeout(_WAIT)
        connection.connect(path)
        connection.sendall(_REQUEST)
        received = b""
        while b"\n" not in received:
            chunk = connection.recv(65536)
            if not chunk or len(received) + len(chunk) > _MAX_REPLY:
                return None
            received += chunk
    finally:
        connection.close()
    line, _, rest = received.partition(b"\n")
    if rest.strip():
        return None  # something followed the reply: let the full client judge it
    try:
        reply = json.loads(line)
    except ValueError:
        return None
    if (
        not isinstance(reply, dict)
        or set(reply) != {"jsonrpc", "id", "result"}
        or reply["jsonrpc"] != "2.0"
        or type(reply["id"]) is not int
        or reply["id"] != 1
        or not isinstance(reply["result"], dict)
    ):
        return None
    result: dict[str, object] = reply["result"]
    return result


def _status_table(result: dict[str, object]) -> str:
    """The human table `robotactl.render.Output.table` prints for `result`: each value made
    visible, as `table` makes it."""
    from datetime import UTC, datetime

    from robotactl.render import Output
    from robotactl.status_view import status_rows
    from robotactl.terminal_text import visible

    rows = status_rows(result, now=datetime.now(UTC))
    output = Output()
    width = max(len(key) for key, _ in rows)
    return "".join(
        f"{output.style(key.ljust(width), 'dim')}  {visible(value)}\n" for key, value in rows
    )
