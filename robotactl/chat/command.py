"""The ``robotactl chat`` command: options, the terminal check, failures → exit status.

Imports only click and robotactl's light modules: prompt_toolkit, rich and trio load when the
command runs (`robotactl.chat.host`), so listing commands (``robotactl --help``) stays cheap.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from robotactl.cli import ClientOptions, CommandFailed, RpcFailed
from robotactl.sessions import session_option

__all__ = ["chat"]


class ShownFailure(CommandFailed):
    """A failure the chat has already told on the screen: exit 1 without a second line."""

    def show(self, file: Any = None) -> None:
        pass


@click.command(short_help="Talk to a session interactively (a REPL in the terminal).")
@session_option
@click.option("--new", "new", is_flag=True, help="Start a new session instead.")
@click.option(
    "--cwd",
    metavar="DIR",
    type=click.Path(exists=True, file_okay=False, resolve_path=True),
    help="Working directory of a new session, and where the default session is looked "
    "for (default: the current directory).",
)
@click.pass_obj
def chat(options: ClientOptions, session: str | None, new: bool, cwd: str | None) -> None:
    """An interactive session on robotad: type a prompt, watch the reply stream in, answer
    approvals inline (y once, a always, n no). /help lists the slash commands and keys.

    Without -s or --new, continues the most recently updated session of the directory (a new
    one when there is none). Leaving (Ctrl-D, /quit) never stops a running turn; come back
    with `robotactl chat -s ID`.
    """
    if session and new:
        raise click.UsageError("-s and --new exclude each other")
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise CommandFailed(
            "robotactl chat needs a terminal on stdin and stdout; scripts use `robotactl run`"
        )
    from protocol.errors import RpcError
    from protocol.jsonrpc import ConnectionLost
    from robotactl.chat.controller import StartOptions
    from robotactl.chat.host import ConnectionShown, run_chat
    from robotactl.daemon_errors import DaemonUnavailable
    from robotactl.hints import hint_for
    from robotactl.render import color_enabled

    start = StartOptions(cwd=cwd or os.getcwd(), session_id=session, new=new)
    try:
        run_chat(
            options.socket_path,
            autostart=options.autostart,
            color=color_enabled(sys.stdout),
            start=start,
            connect_watch=options.connect_watch(),
        )
    except DaemonUnavailable as exc:
        raise CommandFailed(str(exc)) from None
    except RpcError as exc:
        raise RpcFailed(exc.code, exc.message, exc.data, hint_for(exc.code, exc.data)) from None
    except ConnectionShown:
        raise ShownFailure("robotad closed the connection") from None
    except ConnectionLost as exc:
        raise CommandFailed(f"robotad closed the connection ({exc})") from None
