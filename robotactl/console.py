"""The ``robotactl`` command line as a process: `main` runs the click group (`robotactl.cli`)
and says in one line what click would leave as a traceback.

- An argument that is not UTF-8 (a shell passes bytes; Python keeps the bad ones as lone
  surrogates) is a usage error naming it, before anything runs (exit 2): robotad speaks
  JSON, which is UTF-8. So is such text met later — the current folder's path, standard input
  (kept as surrogates in the C locale, a decoding error in a UTF-8 one).
- An output that cannot be written (``robotactl ls > /dev/full``) is an error line on stderr
  (exit 1), and stdout is pointed at /dev/null so the interpreter's last flush stays quiet. A
  closed one (``>&-``) is that error before anything is done.
- Any other `OSError` that escaped a command names its file.

With ``--json`` among the global options, each is the JSON error document on stderr.
"""

from __future__ import annotations

from typing import NoReturn

from robotactl.cli import cli, first_command
from robotactl.render import Output

__all__ = ["main"]


def main(*, stdout_closed: bool = False) -> None:
    """The ``robotactl`` console script (click maps exceptions to exit statuses). What click
    leaves as a traceback is said in a line instead: text that is not UTF-8 (robota speaks
    JSON, which is; exit 2), an output that cannot be written (a full disk under ``>``; exit 1).
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
    except OSError as exc:
        if exc.filename is None:
            _silence_stdout()
            _fail(f"cannot write the output: {exc.strerror or exc}", 1, json_mode)
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
