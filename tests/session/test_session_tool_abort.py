"""An abort stops the built-in tool that is running, and the turn ends aborted, promptly.

Each test makes the tool's own deadline longer than the bound, starts a turn whose first reply
calls the tool, waits for ``tool_started`` (and for the tool to be at work), aborts, and bounds
the wait for the turn's end with ``trio.fail_after``: a tool that stops only at its deadline
fails the test as TooSlowError.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any, BinaryIO

import pytest
import trio

from protocol.errors import TurnAborted
from protocol.events import SessionEvent
from robotad.session.session import Session
from robotad.tools import Tool, WebFetchTool, builtin_tools, stoppable
from robotad.tools import grep as grep_module
from robotad.tools import webfetch as webfetch_module
from tests.session.session_harness import Events, new_session, scripted
from tests.tools.loopback_http import respond, serve_loopback

#: Seconds an aborted turn may take to end: a tool that notices the abort ends in far less.
STOP_BOUND_S = 5


class _Watch(Events):
    """The session's events, and `tool_started` set once a tool's body is about to run."""

    def __init__(self) -> None:
        super().__init__()
        self.tool_started = trio.Event()

    def __call__(self, event: SessionEvent) -> None:
        super().__call__(event)
        if self.items[-1]["type"] == "tool_started":
            self.tool_started.set()


def _calling(
    cwd: Path,
    events: _Watch,
    name: str,
    arguments: dict[str, Any],
    tools: list[Tool] | None = None,
    **options: Any,
) -> Session:
    """A session (with `options`) whose first reply calls the tool `name` of `tools` (default:
    the built-in ones) with `arguments`."""
    provider = scripted([{"toolCalls": [{"name": name, "arguments": arguments}]}])
    tools = builtin_tools() if tools is None else tools
    return new_session(cwd, provider, tools=tools, event_sink=events, **options)


async def _abort_once_started(
    session: Session, events: _Watch, busy: trio.Event | None = None
) -> None:
    """Run a turn, abort it once its tool has started (and `busy` is set, when given), and
    wait (at most `STOP_BOUND_S`) for the turn to end as aborted (G-192): its call closed as
    interrupted, ``turn_finished`` saying "aborted"."""
    with trio.fail_after(STOP_BOUND_S):
        async with trio.open_nursery() as nursery:

            async def turn() -> None:
                with pytest.raises(TurnAborted):
                    await session.run("go", turn_id="t-1")

            nursery.start_soon(turn)
            await events.tool_started.wait()
            if busy is not None:
                await busy.wait()
            assert session.abort() is True
    assert not session.is_running()
    [result] = [m for m in session.get_history() if m.role == "tool"]
    assert result.state == "interrupted"
    assert result.content.startswith("interrupted: the turn was aborted while")
    assert events.of("turn_finished")[-1]["status"] == "aborted"


async def test_an_abort_stops_grep_between_two_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """G-095: Grep searched a file to its end (or to its 20 s deadline) after the turn was
    aborted; it looked for the abort only between files. Each line here takes the pattern
    milliseconds, the file a minute; the search now stops at the next line. The call waits
    for its search to stop for as long as it takes (`STOP_GRACE_S` made long), so only a
    search that stops by itself passes. The abort comes once the file is open."""
    monkeypatch.setattr(grep_module, "TIME_LIMIT_S", 600.0)
    monkeypatch.setattr(stoppable, "STOP_GRACE_S", 600.0)
    (tmp_path / "slow.txt").write_text(("a" * 20 + "b\n") * 12_000)
    opened = trio.Event()
    token = trio.lowlevel.current_trio_token()
    open_regular_file = grep_module.open_regular_file

    def open_and_tell(path: str) -> BinaryIO:
        file = open_regular_file(path)
        token.run_sync_soon(opened.set)
        return file

    monkeypatch.setattr(grep_module, "open_regular_file", open_and_tell)
    events = _Watch()
    session = _calling(tmp_path, events, "Grep", {"pattern": "(a|aa)+$", "path": "slow.txt"})
    await _abort_once_started(session, events, opened)


async def test_an_abort_leaves_a_grep_match_underway_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """G-095: a backtracking pattern on one line held an aborted turn until Grep's deadline
    (20 s): the match cannot be interrupted, and the turn waited for its thread. The call
    now waits `STOP_GRACE_S` for the search to stop, then leaves the match to end alone at
    the deadline, its answer dropped. (The deadline is 10 s, not longer: the match left
    behind runs to it.) The abort comes once the search, having looked for an abort before
    the line, has gone on to match it."""
    monkeypatch.setattr(grep_module, "TIME_LIMIT_S", 10.0)
    (tmp_path / "trap.txt").write_text("a" * 60 + "b\n")
    matching = trio.Event()
    token = trio.lowlevel.current_trio_token()
    check_cancelled = trio.from_thread.check_cancelled

    def check_then_match() -> None:
        check_cancelled()
        token.run_sync_soon(matching.set)

    monkeypatch.setattr(trio.from_thread, "check_cancelled", check_then_match)
    events = _Watch()
    session = _calling(tmp_path, events, "Grep", {"pattern": "(a|aa)+$", "path": "trap.txt"})
    await _abort_once_started(session, events, matching)
    assert await session.run("again") == "echo: again"


async def test_an_abort_stops_webfetch_converting_a_page(
    tmp_path: Path, nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """G-095: WebFetch turned an HTML page into text in a worker thread nothing stopped, and
    Python's parser takes minutes over some malformed pages (``<a b='`` repeated): an aborted
    turn waited for the whole conversion. It now looks for the abort between the parser's
    steps. The call waits for it for as long as it takes (`STOP_GRACE_S` made long), so only
    a conversion that stops by itself passes. The abort comes once the conversion began."""
    monkeypatch.setattr(stoppable, "STOP_GRACE_S", 600.0)
    server = await serve_loopback(nursery)
    server.routes["/slow"] = partial(
        respond, status="200 OK", body=b"<a b='" * 20_000, content_type="text/html"
    )
    converting = trio.Event()
    token = trio.lowlevel.current_trio_token()
    html_to_text = webfetch_module.html_to_text

    def convert_and_tell(*args: Any, **kwargs: Any) -> str:
        token.run_sync_soon(converting.set)
        return html_to_text(*args, **kwargs)

    monkeypatch.setattr(webfetch_module, "html_to_text", convert_and_tell)
    events = _Watch()
    session = _calling(
        tmp_path,
        events,
        "WebFetch",
        {"url": server.url("/slow")},
        [WebFetchTool(time_limit_s=600.0)],
        permissions={"allow": ["WebFetch(domain:127.0.0.1)"]},
    )
    await _abort_once_started(session, events, converting)
