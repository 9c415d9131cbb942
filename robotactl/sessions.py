"""Which session a command means: ``-s/--session ID``, else the one this directory worked in.

PROTOCOL.md §9: ``-s`` defaults to the most recently updated session whose cwd is the current
directory. `resolve_session` (on a blocking client; `resolve_session_streaming` on a trio peer)
asks the daemon for ``session/list`` and picks it, comparing
directories after resolving symbolic links on both sides (the daemon may store a canonical
cwd, the shell may stand in a linked path). Damaged records (status "corrupt" or
"unsupported") are never picked by default: they can be named with ``-s`` only.

`session_option` is the one definition of the option, so every command spells and explains
it the same way. ``ROBOTA_SESSION`` in the environment stands in for ``-s``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import click

from robotactl.cli import CommandFailed

if TYPE_CHECKING:
    from protocol.blocking_client import BlockingClient
    from protocol.methods import SessionList, SessionSummary
    from protocol.peer import JsonRpcPeer

__all__ = [
    "NoSessionHere",
    "checked_session_id",
    "pick_session",
    "resolve_session",
    "resolve_session_streaming",
    "same_directory",
    "session_option",
]

F = TypeVar("F", bound=Callable[..., object])


def session_option(command: F) -> F:
    """``-s/--session ID`` (also ``ROBOTA_SESSION``), passed to the command as `session`."""
    return click.option(
        "-s",
        "--session",
        "session",
        metavar="ID",
        envvar="ROBOTA_SESSION",
        callback=checked_session_id,
        help="The session (default: the most recently updated session whose working "
        "directory is the current one).",
    )(command)


def checked_session_id(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """`value` when it is a session id (or not given); else a usage error (exit 2) quoting it
    and saying what is wrong — before anything is asked of the daemon. An empty value is an
    error, never "this folder's session": ``-s "$SID"`` with SID unset must not reach another
    session."""
    if value is None:
        return None
    from protocol.session_ids import session_id_problem

    problem = session_id_problem(value)
    if problem is None:
        return value
    source = ctx.get_parameter_source(param.name or "")
    given = "ROBOTA_SESSION" if source is click.core.ParameterSource.ENVIRONMENT else None
    shown = value if len(value) <= 40 else f"{value[:40]}…"
    said = f"{shown!r}: {problem}"
    if given:
        said = f"{said} (from {given})"
    raise click.BadParameter(said, ctx=ctx, param=param)


class NoSessionHere(CommandFailed):
    """No session was named and none has the current directory as its cwd."""

    def __init__(self, directory: str) -> None:
        super().__init__(
            f"no session works in {directory}: pass -s ID, or create one here with "
            "`robotactl new` (`robotactl ls` lists them all)"
        )
        self.directory = directory


def same_directory(stored: str, here: str) -> bool:
    """Whether `stored` (a session's cwd) and `here` name the same directory."""
    if stored == here:
        return True
    try:
        return os.path.realpath(stored) == os.path.realpath(here)
    except (OSError, ValueError):
        return False


def pick_session(sessions: list[SessionSummary], here: str) -> str | None:
    """The id of the most recently updated healthy session whose cwd is `here`, or None.

    Recency is compared on `updatedAt` (ISO-8601 UTC strings of one format sort as instants);
    the daemon's own newest-first order breaks ties.
    """
    candidates = [
        (summary.updated_at or "", -index, summary.session_id)
        for index, summary in enumerate(sessions)
        if summary.status == "ok" and summary.cwd and same_directory(summary.cwd, here)
    ]
    if not candidates:
        return None
    return max(candidates)[2]


def resolve_session(client: BlockingClient, given: str | None) -> str:
    """`given` when set, else the default session of the current directory.

    Raises `NoSessionHere` (exit 1) when there is none.
    """
    if given is not None:
        return given
    from protocol.methods import SessionList

    return _default_session(client.request("session/list", {}, result_type=SessionList))


async def resolve_session_streaming(peer: JsonRpcPeer, given: str | None) -> str:
    """`resolve_session` on the trio peer of a command that streams a turn."""
    if given is not None:
        return given
    from protocol.methods import SessionList

    return _default_session(await peer.request("session/list", {}, result_type=SessionList))


def _default_session(listing: SessionList) -> str:
    here = os.getcwd()
    chosen = pick_session(listing.sessions, here)
    if chosen is None:
        raise NoSessionHere(here)
    return chosen
