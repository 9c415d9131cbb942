"""What a session log holds already of the lines a recovery after a stop would write.

Recovery (`robotad.session.recovery.recoverable`) puts back the results and replies a stopped
robotad journaled but never saved, and completes the turn they end. The stopped process may
have logged some of them already — each message enters history, and the log, right after its
journal line — and a recovery whose save was refused, or which a second stop cut off, logged
the rest. Each line the log holds already, written again, claims what did not happen: a message
logged twice is replayed twice (G-145), and a turn logged completed twice completed once.

`logged_already` reads the log once, line by line as `decode_each` gives it (a log may be
large; what stays is the few ids asked about), and answers both questions: which of the
put-back messages a ``history_mutation`` added already, and whether the turn's
``turn_completed`` "completed" line is there. A message counts as logged when an ``append``
(how robotad logs a message entering history) or a ``set`` carries it, not a ``replace``:
robotad writes one at a load, of a saved record, and at a compaction, which a put-back stops
before.
Undecodable lines are skipped (``session/log`` reports them). A message's id is read from
its line; sidecars are read only for a message (or a mutation's list) the line holds whole as
a reference — too large still once its own large members went to sidecars — never for the
members of one in the line (a long tool result), so the read costs the log's lines, not every
sidecar they name.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from .session_log import LogEntry, LogSource, decode_each
from .sidecars import LITERAL_KEY, SIDECAR_KEY, SidecarError, resolve

__all__ = ["AlreadyLogged", "logged_already"]


class AlreadyLogged(NamedTuple):
    """What `logged_already` found: the ids asked about that the log added to history, and
    whether the turn asked about is logged completed."""

    messages: frozenset[str]
    completed: bool


def logged_already(source: LogSource, turn_id: str, message_ids: Iterable[str]) -> AlreadyLogged:
    """Which of `message_ids` a ``history_mutation`` of `source` added already, and whether
    `source` has the ``turn_completed`` line of turn `turn_id` completed (not the "waiting"
    one of its park). One read, line by line; `OSError` comes from the read (see the module
    doc for what counts)."""
    wanted = frozenset(message_ids)
    found: set[str] = set()
    completed = False
    for _, decoded in decode_each(source, resolve_sidecars=False):
        if not isinstance(decoded, LogEntry):
            continue
        data = decoded.data
        if decoded.event == "history_mutation" and data.get("op") in ("append", "set"):
            if wanted:
                found.update(wanted.intersection(_added_ids(data.get("messages"), source)))
        elif (
            decoded.event == "turn_completed"
            and data.get("turnId") == turn_id
            and data.get("status") == "completed"
        ):
            completed = True
    return AlreadyLogged(frozenset(found), completed)


def _added_ids(messages: Any, source: LogSource) -> Iterator[str]:
    """The ids of the messages a mutation carries, as its line holds them (unresolved): each
    message's id is read in place; a message, or the list, spilled whole to a sidecar is read
    from it, and one that cannot be read is passed over."""
    if not isinstance(messages, list):
        messages = _resolved(messages, source)
        if not isinstance(messages, list):
            return
    for message in messages:
        if _spilled_whole(message):
            message = _resolved(message, source)
        if isinstance(message, dict) and isinstance(message.get("id"), str):
            yield message["id"]


def _spilled_whole(message: Any) -> bool:
    return (
        isinstance(message, dict)
        and len(message) == 1
        and (SIDECAR_KEY in message or LITERAL_KEY in message)
    )


def _resolved(value: Any, source: LogSource) -> Any:
    """`value` with its sidecars read, or None when they cannot be (``session/log`` names the
    line whose sidecar is refused)."""
    try:
        return resolve(value, source)
    except (SidecarError, RecursionError):
        return None
