"""Which session a command means: ``-s/--session ID``, else the one this directory worked in.

An ID may be a unique prefix of a session id, as git and docker take short ids
(docs/architecture.md decision 84): `match_session_id` is the one rule — an id that names a
session exactly wins, else the one id the text begins, else the text as given (so robotad's
own not-found error, -32002, reaches the user unchanged); several matches are
`AmbiguousSession` (exit 1). A value of the full default-id form (32 lowercase hex digits,
`protocol.shapes.new_id`) is used as given without asking for ``session/list``.

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
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

import click

from robotactl.cli import FROM_ENVIRONMENT, CommandFailed

if TYPE_CHECKING:
    from protocol.blocking_client import BlockingClient
    from protocol.methods import SessionList, SessionSummary
    from protocol.peer import JsonRpcPeer

__all__ = [
    "AmbiguousSession",
    "NoSessionHere",
    "checked_session_id",
    "is_full_id",
    "match_session_id",
    "pick_session",
    "resolve_session",
    "resolve_session_streaming",
    "same_directory",
    "session_option",
]

F = TypeVar("F", bound=Callable[..., object])

#: The form of the ids robotad generates (`protocol.shapes.new_id`): never a prefix to expand.
_FULL_ID = re.compile(r"[0-9a-f]{32}")
#: How many of an ambiguous prefix's sessions its error lists.
AMBIGUOUS_SHOWN = 4


def session_option(command: F) -> F:
    """``-s/--session ID`` (also ``ROBOTA_SESSION``), passed to the command as `session`."""
    return click.option(
        "-s",
        "--session",
        "session",
        metavar="ID",
        envvar="ROBOTA_SESSION",
        callback=checked_session_id,
        help="The session, or a unique prefix of its id (default: the most recently updated "
        "session whose working directory is the current one).",
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
    source = ctx.get_parameter_source(param.name or "")
    given = "ROBOTA_SESSION" if source is click.core.ParameterSource.ENVIRONMENT else None
    if problem is None:
        if given:
            ctx.meta[FROM_ENVIRONMENT] = value
        return value
    shown = value if len(value) <= 40 else f"{value[:40]}…"
    said = f"{shown!r}: {problem}"
    if given:
        said = f"{said} (from {given})"
    raise click.BadParameter(said, ctx=ctx, param=param)


class AmbiguousSession(CommandFailed):
    """The text given for a session is no session's id and begins several (`matches`)."""

    def __init__(self, given: str, matches: Sequence[str]) -> None:
        width = len(given) + 8  # enough of each id to tell them apart, short enough to read
        shown = [m if len(m) <= width else f"{m[:width]}…" for m in matches[:AMBIGUOUS_SHOWN]]
        if len(matches) > AMBIGUOUS_SHOWN:
            shown.append("…")
        super().__init__(
            f'"{given}" names {len(matches)} sessions: {", ".join(shown)}; give more of the id'
        )
        self.given = given
        self.matches = list(matches)


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


def is_full_id(given: str) -> bool:
    """Whether `given` has the form of a generated id: then it is used as given, unlisted."""
    return _FULL_ID.fullmatch(given) is not None


def match_session_id(given: str, ids: Sequence[str]) -> str:
    """The session id `given` means among `ids`: `given` itself when it is one of them (even
    if it also begins others), else the one id that starts with it, else `given` unchanged
    (robotad then answers its own not-found error).

    Raises `AmbiguousSession` when `given` is no id and begins several.
    """
    if given in ids:
        return given
    matches = [session_id for session_id in ids if session_id.startswith(given)]
    if len(matches) > 1:
        raise AmbiguousSession(given, matches)
    return matches[0] if matches else given


def resolve_session(client: BlockingClient, given: str | None) -> str:
    """The session `given` names (an id or a unique prefix of one, `match_session_id`), else
    the default session of the current directory. Asks for ``session/list`` unless `given`
    is a full generated id.

    Raises `NoSessionHere` (exit 1) when there is no default, `AmbiguousSession` (exit 1)
    when `given` begins several ids.
    """
    if given is not None and is_full_id(given):
        return given
    from protocol.methods import SessionList

    return _chosen(client.request("session/list", {}, result_type=SessionList), given)


async def resolve_session_streaming(peer: JsonRpcPeer, given: str | None) -> str:
    """`resolve_session` on the trio peer of a command that streams a turn."""
    if given is not None and is_full_id(given):
        return given
    from protocol.methods import SessionList

    return _chosen(await peer.request("session/list", {}, result_type=SessionList), given)


def _chosen(listing: SessionList, given: str | None) -> str:
    if given is not None:
        return match_session_id(given, [summary.session_id for summary in listing.sessions])
    here = os.getcwd()
    chosen = pick_session(listing.sessions, here)
    if chosen is None:
        raise NoSessionHere(here)
    return chosen
