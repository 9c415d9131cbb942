"""The ``robotactl`` command line as a process: `main` runs the click group (`robotactl.cli`)
and says in one line what click would leave as a traceback.

- An argument that is not UTF-8 (a shell passes bytes; Python keeps the bad ones as lone
  surrogates) is a usage error naming it, before anything runs (exit 2): robotad speaks
  JSON, which is UTF-8. So is such text met later — the current folder's path, standard input
  (kept as surrogates in the C locale, a decoding error in a UTF-8 one).
- An output that cannot be written (``robotactl ls > /dev/full``) is an error line on stderr
  (exit 1), and stdout is pointed at /dev/null so the interpreter's last flush stays quiet. A
  closed one (``>&-``) is that error before anything is done. A pipe whose reader has gone
  (``robotactl show | head``, EPIPE) is no error to tell: click ends the command quietly with
  status 1 before `main` sees it (decision 85). Standard input that cannot be
  read (a reset socket, a hung-up terminal) is said as such. Which failure is the streams' is
  a fact, not a guess: `main` puts stdin and stdout on descriptors whose own read and write
  failures say so (`OutputUnwritable`, `InputUnreadable`), since an `OSError` carries no
  filename there, nor in much else (``os.getcwd()`` in a folder since deleted, a socket).
- Any other `OSError` that escaped a command names its file, or else the call that failed,
  with what the OS said and where the call was made: ``os.getcwd() failed: No such file or
  directory (robotactl.commands.sessions, line 115)``.

With ``--json`` among the global options, each is the JSON error document on stderr.
"""

from __future__ import annotations

import contextlib
import io
from typing import TYPE_CHECKING, NoReturn, TextIO

from robotactl.cli import cli, first_command
from robotactl.render import Output

if TYPE_CHECKING:
    from collections.abc import Iterator

    from _typeshed import ReadableBuffer, WriteableBuffer

__all__ = ["InputUnreadable", "OutputUnwritable", "main"]


class OutputUnwritable(OSError):
    """Writing standard output failed (`errno` and `strerror` as the OS said)."""


class InputUnreadable(OSError):
    """Reading standard input failed (`errno` and `strerror` as the OS said)."""


def main(*, stdout_closed: bool = False) -> None:
    """The ``robotactl`` console script (click maps exceptions to exit statuses). What click
    leaves as a traceback is said in a line instead: text that is not UTF-8 (robota speaks
    JSON, which is; exit 2), an output that cannot be written (a full disk under ``>``; exit 1),
    an input that cannot be read, any other `OSError` (exit 1), as the module docstring says.
    `stdout_closed` (``>&-``; `robotactl.entry.reopen_closed_streams` put /dev/null there) is
    refused before anything is done: every command's result goes to stdout (exit 1)."""
    import sys

    arguments = sys.argv[1:]
    json_mode = "--json" in arguments[: first_command(arguments)]
    for index, argument in enumerate(arguments, start=1):
        if _undecodable(argument):
            _fail(f"argument {index} ({argument!r}) is not valid UTF-8 text", 2, json_mode)
    if stdout_closed:
        message = "standard output is closed, so nothing was done (send it to /dev/null instead)"
        _fail(f"cannot write the output: {message}", 1, json_mode)
    try:
        _watch_standard_streams()
        cli(prog_name="robotactl")
    except UnicodeDecodeError:
        # Standard input read strictly (a UTF-8 locale): bytes that are not UTF-8 fail there.
        where = "standard input, or a file it read,"
        _fail(f"{where} is not valid UTF-8 text, which is all robotad takes", 2, json_mode)
    except UnicodeEncodeError:
        import os

        here = os.getcwd()
        where = (
            f"the current folder's path ({here!r})"
            if _undecodable(here)
            else "standard input, or a file it read,"
        )
        _fail(f"{where} is not valid UTF-8 text, which is all robotad takes", 2, json_mode)
    except OutputUnwritable as exc:
        _silence_stdout()
        _fail(f"cannot write the output: {exc.strerror or exc}", 1, json_mode)
    except InputUnreadable as exc:
        _fail(f"cannot read standard input: {exc.strerror or exc}", 1, json_mode)
    except OSError as exc:
        if exc.filename is None:
            _fail(_unexpected(exc), 1, json_mode)
        _fail(f"{exc.filename}: {exc.strerror or exc}", 1, json_mode)


def _undecodable(text: str) -> bool:
    """Whether `text` holds bytes that were not UTF-8 (Python keeps them as lone surrogates)."""
    return any("\udc80" <= character <= "\udcff" for character in text)


def _fail(message: str, status: int, json_mode: bool) -> NoReturn:
    import sys

    output = Output(json_mode=json_mode)
    if json_mode:
        output.error_json({"error": {"message": message}})
    else:
        output.error(message)
    sys.exit(status)


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush does not fail again."""
    import os
    import sys

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _watch_standard_streams() -> None:
    """Put `sys.stdin` and `sys.stdout` (when they are files) on descriptors whose failures
    are `InputUnreadable` and `OutputUnwritable`, keeping their encoding, errors and
    buffering. What stdout still holds is written first: a failure there is the output's."""
    import sys

    try:
        sys.stdout.flush()
    except OSError as exc:
        raise OutputUnwritable(exc.errno, exc.strerror) from exc
    descriptor = _descriptor(sys.stdin)
    if descriptor is not None:
        reader = io.BufferedReader(_Input(descriptor, "r", closefd=False))
        sys.stdin = _text_like(sys.stdin, reader)
    descriptor = _descriptor(sys.stdout)
    if descriptor is not None:
        writer = io.BufferedWriter(_Output(descriptor, "w", closefd=False))
        sys.stdout = _text_like(sys.stdout, writer)


def _descriptor(stream: TextIO) -> int | None:
    """The descriptor under `stream`; None when it is no file (a test's `io.StringIO`)."""
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None


def _text_like(
    stream: TextIO, buffered: io.BufferedReader[_Input] | io.BufferedWriter[_Output]
) -> io.TextIOWrapper:
    """A text stream over `buffered` that encodes, and buffers lines, as `stream` did."""
    return io.TextIOWrapper(
        buffered,
        encoding=stream.encoding,
        errors=stream.errors,
        newline="\n",  # as Python makes the standard streams: no translation
        line_buffering=bool(stream.line_buffering),
        write_through=getattr(stream, "write_through", False),
    )


class _Output(io.FileIO):
    """Standard output's descriptor: a write that fails is `OutputUnwritable`."""

    def write(self, data: ReadableBuffer) -> int:
        try:
            return super().write(data)
        except OSError as exc:
            raise OutputUnwritable(exc.errno, exc.strerror) from exc


class _Input(io.FileIO):
    """Standard input's descriptor: a read that fails is `InputUnreadable`."""

    def readinto(self, buffer: WriteableBuffer) -> int:
        with _unreadable():
            return super().readinto(buffer)

    def readall(self) -> bytes:
        with _unreadable():
            return super().readall()


@contextlib.contextmanager
def _unreadable() -> Iterator[None]:
    """A read of standard input that fails raises `InputUnreadable`."""
    try:
        yield
    except OSError as exc:
        raise InputUnreadable(exc.errno, exc.strerror) from exc


def _unexpected(exc: OSError) -> str:
    """`exc`, which names no file, for a person: the call that raised it as its source spells
    it, what the OS said and where the call was made (``os.getcwd() failed: No such file or
    directory (robotactl.commands.sessions, line 115)``); the function's name instead of the
    call when the source cannot be read."""
    import linecache
    import traceback

    said = exc.strerror or str(exc)
    last = exc.__traceback__
    if last is None:
        return f"a system call failed: {said}"
    while last.tb_next is not None:
        last = last.tb_next
    module = last.tb_frame.f_globals.get("__name__", "?")
    place = traceback.extract_tb(last)[-1]
    call = ""
    if place.colno is not None and place.end_colno is not None and place.end_lineno == place.lineno:
        # The columns count bytes of the UTF-8 source line.
        source = linecache.getline(place.filename, place.lineno or 0).encode()
        call = source[place.colno : place.end_colno].decode(errors="replace").strip()
    return f"{call or place.name + '()'} failed: {said} ({module}, line {place.lineno})"
