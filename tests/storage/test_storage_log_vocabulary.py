"""One event vocabulary for writer and reader (G-149).

Scans the daemon's sources: every event name written (``….log("name", …)``) or read
(``….event == "name"``, ``event="name"``) must be in `LOG_EVENTS`, and every name of the
vocabulary has a payload shape the reader checks — so no event is writer-only or reader-only.
"""

from __future__ import annotations

import ast
from pathlib import Path

from robotad.storage.log_events import LOG_EVENTS, PAYLOADS
from robotad.storage.session_log import SessionLogger

ROOT = Path(__file__).resolve().parents[2] / "robotad"


def _event_literals(tree: ast.AST) -> set[str]:
    """Literal event names used when writing or reading session-log events."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "log"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and node.args[0].value.isidentifier()
        ):
            found.add(node.args[0].value)
        if (
            isinstance(node, ast.Compare)
            and isinstance(node.left, ast.Attribute)
            and node.left.attr == "event"
        ):
            for comparator in node.comparators:
                if isinstance(comparator, ast.Constant) and isinstance(comparator.value, str):
                    found.add(comparator.value)
        if (
            isinstance(node, ast.keyword)
            and node.arg == "event"
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            found.add(node.value.value)
    return found


def test_every_event_in_the_sources_belongs_to_the_vocabulary() -> None:
    """G-149: no event name is written or read outside the shared list."""
    strays: dict[str, set[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        if path.name == "log_events.py":
            continue
        names = _event_literals(ast.parse(path.read_text(), filename=str(path)))
        stray = {name for name in names if name not in LOG_EVENTS and not _is_hook_event(name)}
        if stray:
            strays[str(path.relative_to(ROOT))] = stray
    assert strays == {}


def _is_hook_event(name: str) -> bool:
    """Hook events (PreToolUse…) are CamelCase names of another vocabulary."""
    return name[:1].isupper()


def test_the_scan_finds_the_readers_own_literals() -> None:
    """The scanner is not vacuous: the replay reader's comparisons are found."""
    replay = ROOT / "storage" / "log_replay.py"
    names = _event_literals(ast.parse(replay.read_text()))
    assert {"history_mutation", "provider_request", "tool_call"} <= names
    assert names <= set(LOG_EVENTS)


def test_writer_and_reader_share_one_table() -> None:
    """G-149: the writer validates with the same payload table the reader decodes with."""
    assert tuple(PAYLOADS) == LOG_EVENTS
    assert len(set(LOG_EVENTS)) == len(LOG_EVENTS)
    assert SessionLogger.log.__annotations__["event"] == "LogEventName"
