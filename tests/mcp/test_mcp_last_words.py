"""A stdio server that ended by itself: ``mcp/list`` says what it said last on stderr, the
model's tool results never do (decision 86).

Against tiny raw stdio servers (`RAW_SERVER` of `tests.mcp.test_mcp_server_answers`) that
print to stderr and exit, before the handshake or after some calls.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import trio

from robotad.mcp import stdio
from robotad.mcp.config import McpServerConfig
from robotad.mcp.hub import LAST_WORDS_CHARS, McpHub, SessionTools, last_words

from .test_mcp_server_answers import NO_ARGUMENTS, RAW_SERVER, run_tool, running_hub

PREFIX = "; its last words on stderr: "

#: Exits 3 before the handshake, saying why on stderr (as a server missing its token does).
NO_TOKEN = "import sys\nprint('GITHUB_TOKEN is not set', file=sys.stderr)\nsys.exit(3)\n"

#: Its first run says why on stderr and exits 3 before the handshake; every later run exits
#: 5 saying nothing.
SILENT_SECOND_RUN = """
import pathlib, sys
marker = pathlib.Path(sys.argv[1])
if not marker.exists():
    marker.write_text("ran")
    print("first run: GITHUB_TOKEN is not set", file=sys.stderr)
    sys.exit(3)
sys.exit(5)
"""

#: Exits 3 at once, leaving its stderr to a process of a session of its own (out of robotad's
#: reach once the server is gone), which says why a moment later and exits.
LATE_WORDS = """
import subprocess, sys
late = "import sys, time; time.sleep(0.3); print('GITHUB_TOKEN is not set', file=sys.stderr)"
subprocess.Popen([sys.executable, "-c", late], start_new_session=True,
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
sys.exit(3)
"""

#: Serves `echo`; `die` ends it with a traceback on stderr and status 3.
DYING_SERVER = (
    RAW_SERVER
    + f"""
print("serving on stdio", file=sys.stderr, flush=True)


def on_call(mid, name):
    if name == "die":
        print("Traceback (most recent call last):", file=sys.stderr)
        print('  File "server.py", line 9, in <module>', file=sys.stderr)
        print("KeyError: 'GITHUB_TOKEN'", file=sys.stderr, flush=True)
        sys.exit(3)
    send({{"id": mid, "result": {{"content": [{{"type": "text", "text": "echoed"}}]}}}})


serve(on_call, [{{"name": "echo", "inputSchema": {NO_ARGUMENTS}}},
                {{"name": "die", "inputSchema": {NO_ARGUMENTS}}}])
"""
)

#: Exits 3 after one stderr line far longer than `LAST_WORDS_CHARS`, holding control and bidi
#: characters.
LONG_LINE = "import sys\nsys.stderr.write('x' * 5000 + '\\x1b[2J\\u202e the end\\n')\nsys.exit(3)\n"


async def test_a_server_that_exits_before_the_handshake_is_listed_with_its_words(
    tmp_path: Path,
) -> None:
    """``exited with status 3`` told the person nothing they could act on; the server had
    said why on stderr, and only robotad's log had it. The model, asking for one of its
    tools, still gets the failure alone."""
    with trio.fail_after(60):
        async with running_hub(tmp_path, "gh", NO_TOKEN) as hub:
            (entry,) = await hub.listing()
            (server,) = hub.daemon_servers()
            missing = SessionTools(hub, "s", has_own=False).missing_reason("mcp__gh__search")
    assert entry.status == "failed"
    assert entry.error == f'exited with status 3{PREFIX}"GITHUB_TOKEN is not set"'
    assert server.error == "exited with status 3"
    assert missing is not None
    assert missing.startswith("MCP server gh: exited with status 3")
    assert "GITHUB_TOKEN" not in missing
    assert "GITHUB_TOKEN" not in server.unavailable_reason()


async def test_the_words_listed_are_those_of_the_run_that_failed(tmp_path: Path) -> None:
    """A later run that ended saying nothing is listed with its own failure alone, not with
    what an earlier run said."""
    script = tmp_path / "twice.py"
    script.write_text(SILENT_SECOND_RUN)
    config = McpServerConfig(command=sys.executable, args=[str(script), str(tmp_path / "m")])
    hub = McpHub({"twice": config})
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(hub.run)
            (first,) = await hub.listing()
            (second,) = await hub.listing()  # one failure: the retry is immediate
            await hub.aclose()
            nursery.cancel_scope.cancel()
    assert first.error == f'exited with status 3{PREFIX}"first run: GITHUB_TOKEN is not set"'
    assert second.error == "exited with status 5"


async def test_words_said_after_the_exit_are_waited_for_within_a_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process the server left holding its stderr may say why after robotad has seen the
    server exit: its stderr is read to the end, within `_STDERR_GRACE` (made long here so that
    a slow machine cannot outlast it)."""
    monkeypatch.setattr(stdio, "_STDERR_GRACE", 30.0)
    with trio.fail_after(60):
        async with running_hub(tmp_path, "late", LATE_WORDS) as hub:
            (entry,) = await hub.listing()
    assert entry.error == f'exited with status 3{PREFIX}"GITHUB_TOKEN is not set"'


async def test_a_server_that_dies_after_calls_is_listed_with_its_words(tmp_path: Path) -> None:
    """The call it died in fails for the model with the exit alone; ``mcp/list`` quotes the
    traceback's end, not what it said while starting, and keeps it, as it keeps the failure,
    once the server is up again."""
    with trio.fail_after(60):
        async with running_hub(tmp_path, "dying", DYING_SERVER) as hub:
            echoed = await run_tool(hub, "mcp__dying__echo", tmp_path)
            died = await run_tool(hub, "mcp__dying__die", tmp_path)
            again = await run_tool(hub, "mcp__dying__echo", tmp_path)  # after the death's record
            (server,) = hub.daemon_servers()
            (entry,) = await hub.listing()
    assert echoed.content == "echoed"
    assert not died.ok
    assert died.content == "MCP server dying: exited with status 3"
    assert again.content == "echoed"
    assert (entry.status, server.error) == ("ready", "exited with status 3")
    assert entry.error == (
        f'exited with status 3{PREFIX}"Traceback (most recent call last): | '
        'File "server.py", line 9, in <module> | KeyError: \'GITHUB_TOKEN\'"'
    )


async def test_an_over_long_line_is_cut_to_its_end_and_shown_harmlessly(tmp_path: Path) -> None:
    """A server's words are bounded, and a control or bidi character in them is an escape,
    not sent to a terminal printing ``mcp/list``."""
    with trio.fail_after(60):
        async with running_hub(tmp_path, "long", LONG_LINE) as hub:
            (entry,) = await hub.listing()
    assert entry.error is not None
    failure, words = entry.error.split(PREFIX)
    assert failure == "exited with status 3"
    end = "<U+001B>[2J<U+202E> the end"
    assert words == '"…' + "x" * (LAST_WORDS_CHARS - 1 - len(end)) + end + '"'
    assert "\x1b" not in entry.error
    assert "\u202e" not in entry.error


def test_the_last_lines_are_joined_on_one_line_and_blank_ones_dropped() -> None:
    assert last_words(["  code: 'MODULE_NOT_FOUND',", " ", "}", "Node.js v20"]) == (
        PREFIX + "\"code: 'MODULE_NOT_FOUND', | } | Node.js v20\""
    )
    assert last_words([]) == ""
    assert last_words(["  "]) == ""


def test_the_bound_counts_what_is_shown_and_never_splits_an_escape() -> None:
    def words(said: str) -> str:
        return last_words([said]).removeprefix(PREFIX)[1:-1]

    fits = "y" * LAST_WORDS_CHARS
    assert words(fits) == fits
    assert words("z" + fits) == "…" + fits[1:]
    escapes = words("\x07" * LAST_WORDS_CHARS)
    assert escapes == "…" + "<U+0007>" * ((LAST_WORDS_CHARS - 1) // 8)
    assert words("a\tb") == "a b"
