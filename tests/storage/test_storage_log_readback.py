"""What a session log holds already of a recovery's lines (`log_readback.logged_already`):
the put-back messages a ``history_mutation`` added, and the turn's ``turn_completed``."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from protocol.shapes import Message
from robotad.storage.log_files import FileLogSink, FileLogSource, log_paths
from robotad.storage.log_readback import AlreadyLogged, logged_already
from robotad.storage.session_log import SessionLogger

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
SID = "s-readback"


def _logger(logs: Path, *, limit: int = 64 * 1024) -> SessionLogger:
    return SessionLogger(SID, FileLogSink.for_session(logs, SID), spill_limit=limit)


def _message(n: int, content: str = "x") -> Message:
    return Message(f"m-{n}", "user", content, "complete", T0)


def test_the_added_messages_and_the_completion_are_found_in_one_read(tmp_path: Path) -> None:
    """An ``append`` or ``set`` carrying a message counts; a turn counts as logged completed
    only by its own "completed" line, not by the "waiting" one of its park or another
    turn's; a missing log holds nothing."""
    source = FileLogSource.for_session(tmp_path, SID)
    ids = ["m-1", "m-2", "m-3"]
    assert logged_already(source, "t-1", ids) == AlreadyLogged(frozenset(), completed=False)
    logger = _logger(tmp_path)
    logger.log("history_mutation", {"op": "append", "messages": [_message(0), _message(1)]})
    logger.log("turn_completed", {"turnId": "t-1", "status": "waiting"})
    logger.log("turn_completed", {"turnId": "t-0", "status": "completed"})
    assert logged_already(source, "t-1", ids) == AlreadyLogged(frozenset({"m-1"}), False)
    logger.log("history_mutation", {"op": "set", "index": 0, "messages": [_message(2)]})
    logger.log("turn_completed", {"turnId": "t-1", "status": "completed"})
    assert logged_already(source, "t-1", ids) == AlreadyLogged(frozenset({"m-1", "m-2"}), True)


@pytest.mark.parametrize(("limit", "spilled"), [(256, "the message"), (128, "the list")])
def test_a_message_spilled_whole_is_read_from_its_sidecar(
    tmp_path: Path, limit: int, spilled: str
) -> None:
    """A message whose line holds it, or the list of its mutation, as a sidecar reference
    (its id too) is read from the sidecar; a bad line is passed over, as ``session/log``
    reports it."""
    logger = _logger(tmp_path, limit=limit)
    logger.log("history_mutation", {"op": "append", "messages": [_message(1, "y" * 500)]})
    path = log_paths(tmp_path, SID)[0]
    assert b'"m-1"' not in path.read_bytes()  # the id is in the sidecar only
    held = json.loads(path.read_bytes())["data"]["messages"]
    assert isinstance(held, list) == (spilled == "the message")
    with path.open("ab") as log:
        log.write(b"not a line\n")
    source = FileLogSource.for_session(tmp_path, SID)
    assert logged_already(source, "t-1", ["m-1"]).messages == {"m-1"}


def test_a_log_that_cannot_be_read_raises(tmp_path: Path) -> None:
    """Nothing is answered for a log that cannot be read: whether a line is there is unknown."""
    log_paths(tmp_path, SID)[0].mkdir(parents=True)
    with pytest.raises(OSError):  # noqa: PT011 - any read failure
        logged_already(FileLogSource.for_session(tmp_path, SID), "t-1", ["m-1"])
