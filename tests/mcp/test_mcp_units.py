"""The SDK-free parts of robotad.mcp: naming, rules, configuration, environment, results,
backoff, the session's tool table, and that nothing loads the SDK before a server starts."""

from __future__ import annotations

import base64
import contextlib
import http.server
import json
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio

from protocol.validate import ValidationFailed
from robotad.agent.tool import Tool, ToolProfile, missing_tool_reason
from robotad.config import decode_config
from robotad.mcp.environment import server_environment
from robotad.mcp.naming import MAX_TOOL_NAME, model_tool_name, model_tool_names, rule_covers
from robotad.mcp.results import tool_result
from robotad.mcp.server import backoff
from robotad.session.permissions.enforcer import PermissionEnforcer
from robotad.session.permissions.patterns import parse_rules
from robotad.session.tool_table import ToolTable
from robotad.storage.spill import SpillStore
from robotad.tools import ReadTool
from tests.robotad_process import REPO, child_environment
from tests.storage.held_disk import HOLD_LIMIT, HeldDisk

# -- naming and rules ---------------------------------------------------------------------------


def test_names_are_sanitised_and_long_ones_capped_with_a_hash() -> None:
    """mcp__SERVER__TOOL; other characters become _; a name over 64 characters is cut and
    ends in a hash of the full name, so two long names differing at the end stay apart."""
    assert model_tool_name("every", "echo") == "mcp__every__echo"
    assert model_tool_name("my.server", "read file/v2") == "mcp__my_server__read_file_v2"
    long_a = model_tool_name("s", "x" * 80 + "a")
    long_b = model_tool_name("s", "x" * 80 + "b")
    assert len(long_a) == MAX_TOOL_NAME
    assert long_a != long_b
    assert long_a.startswith("mcp__s__xxxx")
    assert model_tool_name("s", "x" * 80 + "a") == long_a


def test_tools_whose_names_clean_alike_are_each_reachable() -> None:
    """``read.file`` and ``read_file`` both clean to ``read_file``: the later one ends in
    its hash, so a call of either reaches it; names that do not clash are left as they were."""
    names = model_tool_names("c", ["read_file", "read.file", "echo"])
    assert names[0] == "mcp__c__read_file"
    assert names[1].startswith("mcp__c__read_file_")
    assert names[1] != names[0]
    assert names[2] == "mcp__c__echo"
    assert len(set(names)) == 3


def test_server_and_tool_rules_parse_and_cover_their_tools() -> None:
    """`mcp__NAME` and `mcp__NAME__TOOL` are valid patterns; the first covers every tool of
    that server and no other server's."""
    rules = parse_rules(["mcp__every", "mcp__every__echo", "mcp__my-srv"], "$.allow")
    assert [rule.tool for rule in rules] == ["mcp__every", "mcp__every__echo", "mcp__my-srv"]
    assert rule_covers("mcp__every", "mcp__every__echo")
    assert rule_covers("mcp__every__echo", "mcp__every__echo")
    assert not rule_covers("mcp__every", "mcp__everything__echo")
    assert not rule_covers("mcp__every__echo", "mcp__every__echo2")
    assert not rule_covers("Read", "Read2")


def test_the_enforcer_applies_server_rules_and_the_server_risk(tmp_path: Path) -> None:
    """A deny on the server denies each of its tools; an allow on one tool allows that tool;
    without a rule, the tool's risk decides through the mode table."""
    profiles = {
        "mcp__a__x": ToolProfile(risk="execute"),
        "mcp__a__y": ToolProfile(risk="execute"),
        "mcp__b__z": ToolProfile(risk="inspect"),
    }
    enforcer = PermissionEnforcer(
        tmp_path, profiles=profiles, rules={"allow": ["mcp__a__x"], "deny": ["mcp__b"]}
    )
    assert enforcer.evaluate("mcp__a__x", {}).outcome == "allow"
    assert enforcer.evaluate("mcp__a__y", {}).outcome == "ask"
    denied = enforcer.evaluate("mcp__b__z", {})
    assert denied.outcome == "deny"
    assert denied.rule == "mcp__b"


# -- configuration ------------------------------------------------------------------------------


def test_config_takes_servers_and_refuses_bad_ones_each_located() -> None:
    config = decode_config(
        """
[mcp_servers.every]
command = "npx"
args = ["-y", "x"]
env = { KEY = "v" }
risk = "inspect"
[mcp_servers.web]
url = "http://127.0.0.1:8080/mcp"
headers = { Authorization = "Bearer t" }
"""
    )
    assert config.mcp_servers["every"].risk == "inspect"
    assert config.mcp_servers["web"].tool_timeout_ms == 120_000
    with pytest.raises(ValidationFailed) as refused:
        decode_config(
            """
[mcp_servers."bad name"]
command = "x"
[mcp_servers.both]
command = "x"
url = "http://127.0.0.1/mcp"
[mcp_servers.web]
url = "http://127.0.0.1/mcp"
args = ["x"]
[mcp_servers.risky]
command = "x"
risk = "dangerous"
[mcp_servers.typo]
command = "x"
comand = "y"
[mcp_servers.my__srv]
command = "x"
[mcp_servers.trailing_]
command = "x"
[mcp_servers.nothing]
risk = "inspect"
[mcp_servers.relative]
command = "x"
cwd = "no/such/dir"
"""
        )
    paths = sorted(issue["path"] for issue in refused.value.issues)
    assert paths == [
        'mcp_servers."bad name"',
        "mcp_servers.both",
        "mcp_servers.my__srv",
        "mcp_servers.nothing",
        "mcp_servers.relative.cwd",
        "mcp_servers.risky.risk",
        "mcp_servers.trailing_",
        "mcp_servers.typo.comand",
        "mcp_servers.web.args",
    ]
    said = {issue["path"]: issue["message"] for issue in refused.value.issues}
    assert "mcp__NAME__TOOL" in said["mcp_servers.my__srv"]
    assert "it has neither" in said["mcp_servers.nothing"]
    assert "not both" in said["mcp_servers.both"]


# -- environment --------------------------------------------------------------------------------


def test_the_environment_is_the_allow_list_plus_the_servers_own() -> None:
    """Only HOME, PATH, LANG, USER, TMPDIR and a few basics pass; keys, tokens and robotad's
    own settings never do, unless the server's env names them; shell functions never."""
    parent = {
        "HOME": "/home/u",
        "PATH": "/bin",
        "LANG": "C.UTF-8",
        "USER": "u",
        "TMPDIR": "/tmp",
        "OPENAI_API_KEY": "sk-1",
        "GITHUB_TOKEN": "t",
        "ROBOTA_CONFIG": "/c",
        "TERM": "() { evil; }",
    }
    env = server_environment([("GITHUB_TOKEN", "given")], parent)
    assert env == {
        "HOME": "/home/u",
        "PATH": "/bin",
        "LANG": "C.UTF-8",
        "USER": "u",
        "TMPDIR": "/tmp",
        "GITHUB_TOKEN": "given",
    }


# -- results ------------------------------------------------------------------------------------


async def test_results_join_text_and_store_images_and_resources(tmp_path: Path) -> None:
    png = base64.b64encode(b"\x89PNG" + b"\0" * 96).decode()
    result = types.CallToolResult(
        content=[
            types.TextContent(text="first"),
            types.ImageContent(data=png, mime_type="image/png"),
            types.EmbeddedResource(
                resource=types.TextResourceContents(
                    uri="file:///r.txt", mime_type="text/plain", text="resource body"
                )
            ),
            types.ResourceLink(uri="https://127.0.0.1/x", name="x", mime_type="text/html"),
            types.TextContent(text="last"),
        ]
    )
    with SpillStore(tmp_path) as spill:
        converted = await tool_result("srv", "tool", result, spill)
        lines = converted.content.splitlines()
        assert converted.ok
        assert lines[0] == "first"
        assert lines[1].startswith("[image, image/png, 100 bytes, stored, base64 as tool-result:")
        image_ref = lines[1].split(" as ")[1].rstrip("]")
        assert spill.get(image_ref) == png
        assert lines[2].startswith("[resource, text/plain, 13 bytes, file:///r.txt, stored as ")
        assert spill.get(lines[2].split(" as ")[1].rstrip("]")) == "resource body"
        assert lines[3] == "[resource link, text/html, https://127.0.0.1/x, x]"
        assert lines[4] == "last"
    assert converted.metadata == {"mcpServer": "srv", "mcpTool": "tool"}


async def test_a_conversion_cancelled_while_it_stores_leaves_nothing_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Images are stored off the event loop. A call cancelled (its turn aborted) while the
    first of three is written gets no result, so nothing may stay stored for it: the image
    written whole is discarded, and the others are never written."""
    png = base64.b64encode(b"\x89PNG" + b"\0" * 60_000).decode()
    images = [types.ImageContent(data=png, mime_type="image/png") for _ in range(3)]
    with SpillStore(tmp_path) as spill:
        disk = HeldDisk(monkeypatch)
        converted: list[Any] = []

        async def convert(task_status: trio.TaskStatus[trio.CancelScope]) -> None:
            with trio.CancelScope() as scope:
                task_status.started(scope)
                converted.append(
                    await tool_result("srv", "shot", types.CallToolResult(content=images), spill)
                )

        with trio.fail_after(HOLD_LIMIT):
            async with trio.open_nursery() as nursery:
                scope = await nursery.start(convert)
                await disk.entered.wait()
                scope.cancel()
                disk.release()
        assert scope.cancelled_caught
        assert converted == []
        assert disk.writes == 1
        assert len(spill) == 0
        (folder,) = list(tmp_path.iterdir())
        assert [name for name in os.listdir(folder) if name != ".owner"] == []


async def test_is_error_and_structured_content() -> None:
    failed = await tool_result(
        "srv",
        "tool",
        types.CallToolResult(content=[types.TextContent(text="no")], is_error=True),
        None,
    )
    assert not failed.ok
    assert failed.content == "MCP server srv: tool failed: no"
    structured = await tool_result(
        "srv", "t", types.CallToolResult(content=[], structured_content={"sum": 3}), None
    )
    assert structured.content == '{"sum": 3}'
    image = types.ImageContent(data="AAAA", mime_type="image/png")
    unstored = await tool_result("srv", "t", types.CallToolResult(content=[image]), None)
    assert unstored.content == "[image, image/png, 3 bytes, not stored]"


def test_backoff_is_immediate_then_doubles_to_a_bound() -> None:
    assert [backoff(n) for n in (1, 2, 3, 4)] == [0.0, 0.5, 1.0, 2.0]
    assert backoff(50) == 30.0


# -- the session's tool table -------------------------------------------------------------------


class _Source:
    def __init__(self) -> None:
        self.offered: list[Tool] = []
        self.closed = False

    async def tools(self) -> Sequence[Tool]:
        return self.offered

    async def aclose(self) -> None:
        self.closed = True

    def missing_reason(self, name: str) -> str | None:
        return f"{name}: its server is down" if name.startswith("mcp__down__") else None


class _Named:
    def __init__(self, name: str, risk: Any = "execute") -> None:
        self.name = name
        self.description = name
        self.profile = ToolProfile(risk=risk)

    @property
    def schema(self) -> Any:
        raise NotImplementedError

    def decode_arguments(self, arguments: dict[str, Any]) -> Any:
        return arguments

    async def run(self, arguments: Any, ctx: Any) -> Any:
        raise NotImplementedError


def test_the_tool_table_says_why_a_missing_name_cannot_be_called() -> None:
    table = ToolTable([ReadTool()], _Source())
    assert missing_tool_reason(table.tools, "mcp__down__x") == "mcp__down__x: its server is down"
    assert missing_tool_reason(table.tools, "Nope") is None
    assert missing_tool_reason({}, "mcp__down__x") is None  # a plain mapping cannot say


async def test_the_tool_table_replaces_added_tools_on_each_refresh() -> None:
    """Fixed tools stay; the source's tools replace the previous ones, profiles with them;
    a source tool never shadows a fixed one."""
    source = _Source()
    table = ToolTable([ReadTool()], source)
    source.offered = [_Named("mcp__a__x", "inspect"), _Named("Read")]
    await table.refresh()
    assert list(table.tools) == ["Read", "mcp__a__x"]
    assert table.profiles["mcp__a__x"].risk == "inspect"
    assert table.profiles["Read"].argument_key == "file_path"
    source.offered = [_Named("mcp__a__y")]
    await table.refresh()
    assert list(table.tools) == ["Read", "mcp__a__y"]
    assert "mcp__a__x" not in table.profiles
    await table.aclose()
    assert source.closed


# -- the SDK stays unloaded ---------------------------------------------------------------------


def test_nothing_loads_the_sdk_until_a_server_starts() -> None:
    """The daemon's modules, a hub with no server and a session's MCP tool source import
    neither `mcp` nor its types (start-up and memory without MCP stay as they were)."""
    script = """
import sys, trio
import robotad.cli, robotad.daemon.app, robotad.daemon.assembly, robotad.config
from robotad.mcp.hub import McpHub

async def main():
    hub = McpHub({})
    async with trio.open_nursery() as nursery:
        await nursery.start(hub.run)
        assert list(await hub.for_session("s", []).tools()) == []
        assert await hub.listing() == []
        nursery.cancel_scope.cancel()

trio.run(main)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("mcp", "mcp_types", "pydantic"))
print(loaded)
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env=child_environment(),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_readme_configuration_example_decodes() -> None:
    """The README's MCP configuration block is a valid config.toml as written."""
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("### MCP tool servers") :]
    block = section[section.index("```toml\n") + len("```toml\n") :]
    config = decode_config(block[: block.index("```")])
    assert sorted(config.mcp_servers) == ["every", "files", "remote"]
    assert not config.mcp_servers["remote"].enabled


async def test_a_server_whose_cwd_is_missing_says_so_not_that_its_command_is() -> None:
    """The spawn's ENOENT read as "No such file or directory", as if `cat` were missing."""
    from robotad.mcp.config import McpServerConfig, spec_of_config
    from robotad.mcp.stdio import open_stdio

    spec = spec_of_config("gone", McpServerConfig(command="cat", cwd="/nonexistent/robota-cwd"))
    with pytest.raises(FileNotFoundError) as refused:
        async with open_stdio(spec):
            pass
    assert refused.value.strerror == "its cwd /nonexistent/robota-cwd is not an existing folder"


async def test_leaving_a_server_its_session_still_writes_to_ends_cleanly() -> None:
    """Leaving `open_stdio` while the session's side of the stream is still open (the pump
    waiting for a message) closed it under the waiting pump, whose anyio ClosedResourceError
    escaped as an exception group instead of a clean stop."""
    import trio

    from robotad.mcp.config import McpServerConfig, spec_of_config
    from robotad.mcp.stdio import open_stdio

    spec = spec_of_config("idle", McpServerConfig(command="cat"))
    with trio.fail_after(30):
        async with open_stdio(spec) as channel:
            await trio.sleep(0.05)  # the pumps are waiting now
            pid = channel.pid
    assert channel.failure is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # stopped and reaped


def test_a_killed_robotad_takes_what_its_stdio_server_started(tmp_path: Path) -> None:
    """A stdio server exits when robotad's end of its stdin closes, but what it had started
    itself lived on after a SIGKILLed robotad: the server is tethered now, as commands are."""
    import textwrap

    from tests.tools.tool_calls import is_running

    server = f"sleep 1000 & echo $! > {tmp_path}/pids; echo go > {tmp_path}/ready; exec cat"
    owner = textwrap.dedent(
        f"""
        import os, signal, trio
        from robotad.mcp.config import McpServerConfig, spec_of_config
        from robotad.mcp.stdio import open_stdio

        async def main():
            spec = spec_of_config("s", McpServerConfig(command="sh", args=["-c", {server!r}]))
            async with open_stdio(spec):
                while not os.path.exists({str(tmp_path / "ready")!r}):
                    await trio.sleep(0.02)
                os.kill(os.getpid(), signal.SIGKILL)

        trio.run(main)
        """
    )
    import trio

    done = subprocess.run(
        [sys.executable, "-c", owner], timeout=30, capture_output=True, check=False
    )
    assert done.returncode == -9, done.stderr
    [helper] = [int(pid) for pid in (tmp_path / "pids").read_text().split()]

    async def gone() -> None:
        with trio.fail_after(10):
            while is_running(helper):
                await trio.sleep(0.02)

    try:
        trio.run(gone)
    finally:
        with contextlib.suppress(OSError):
            os.kill(helper, signal.SIGKILL)  # a failed test leaves nothing running


@pytest.mark.parametrize(
    ("content", "mode", "why"),
    [
        (b"#!/bin/sh\nexec cat\n", 0o644, "Permission denied"),
        (b"#!/nonexistent/robota-interpreter\n", 0o755, "not found"),
        (b"\x7fELF" + b"\x00" * 60, 0o755, "Exec format error"),
    ],
    ids=["not-executable", "bad-interpreter", "not-a-program"],
)
async def test_a_server_that_cannot_be_run_says_so(
    tmp_path: Path, content: bytes, mode: int, why: str
) -> None:
    """Through the tether's shell such a server would only have "exited with status 126" (or
    127): the file is checked as a spawn checks it, and the shell's complaint is kept."""
    import trio

    from robotad.mcp.config import McpServerConfig, spec_of_config
    from robotad.mcp.connection import ServerFailed, connect

    server = tmp_path / "server"
    server.write_bytes(content)
    server.chmod(mode)
    spec = spec_of_config("s", McpServerConfig(command=str(server)))
    with trio.fail_after(30), pytest.raises(ServerFailed) as refused:
        async with connect(spec, lambda: None):
            pass
    assert str(refused.value) == f"cannot start {server}: {why}"


async def test_a_server_whose_command_is_missing_is_named() -> None:
    """ "cannot start: No such file or directory" named nothing to look for."""
    import trio

    from robotad.mcp.config import McpServerConfig, spec_of_config
    from robotad.mcp.connection import ServerFailed, connect

    spec = spec_of_config("gone", McpServerConfig(command="robota-no-such-mcp-server"))
    with trio.fail_after(30), pytest.raises(ServerFailed) as refused:
        async with connect(spec, lambda: None):
            pass
    assert str(refused.value) == (
        "cannot start robota-no-such-mcp-server: No such file or directory"
    )


CUT_ANSWER_SERVER = """
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    mid, meth = m.get("id"), m.get("method")
    if meth == "initialize":
        result = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "cut", "version": "1"}}
        print(json.dumps({"jsonrpc": "2.0", "id": mid, "result": result}), flush=True)
    elif meth == "tools/call":
        print('{"jsonrpc":"2.0","id":%s,"result":{"content":[' % json.dumps(mid), flush=True)
    elif meth == "tools/list":
        print(json.dumps({"jsonrpc": "2.0", "id": mid, "result": {"tools": []}}), flush=True)
    elif mid is not None:
        print(json.dumps({"jsonrpc": "2.0", "id": mid, "result": {}}), flush=True)
"""


async def test_an_answer_that_is_not_json_fails_its_call_at_once(tmp_path: Path) -> None:
    """A cut-off answer was skipped, and its call waited out the whole tool timeout, then
    said the server "did not answer"."""
    import sys

    import trio

    from robotad.mcp.config import McpServerConfig, spec_of_config
    from robotad.mcp.connection import ServerFailed, connect

    script = tmp_path / "cut.py"
    script.write_text(CUT_ANSWER_SERVER)
    config = McpServerConfig(command=sys.executable, args=[str(script)], tool_timeout_ms=600_000)
    spec = spec_of_config("cut", config)
    with trio.fail_after(30):
        async with connect(spec, lambda: None) as connection:
            with pytest.raises(ServerFailed) as failed:
                await connection.call("anything", {}, spec.tool_timeout)
    assert "not valid JSON-RPC" in str(failed.value)
    assert "did not answer" not in str(failed.value)


def test_a_server_flooding_stderr_is_logged_at_a_bounded_rate(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from robotad.mcp.line_logs import StderrLog

    now = [0.0]
    stderr = StderrLog("noisy", lambda: now[0])
    with caplog.at_level("INFO", logger="robotad.mcp"):
        for index in range(250):
            stderr.line(f"line {index}")
        now[0] = 61.0
        stderr.line("next minute")
        stderr.flush()
    said = [record.getMessage() for record in caplog.records]
    assert said[:200] == [f"stderr: line {index}" for index in range(200)]
    assert said[200:] == [
        "stderr: 50 more lines not logged (over 200 a minute)",
        "stderr: next minute",
    ]


FLAKY_START = '''
import pathlib, sys

marker = pathlib.Path(sys.argv[1])
if not marker.exists():  # the first start fails, as an `npx -y` download outlasting its timeout
    marker.write_text("tried")
    sys.exit(1)

from mcp.server.mcpserver import MCPServer

server = MCPServer("flaky")


@server.tool()
def echo(text: str) -> str:
    """Say it back."""
    return text


server.run("stdio")
'''


async def test_a_server_that_fails_the_same_way_again_is_warned_of_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A broken server retried in the background fails the same way each time: the first
    failure is a warning, the ones like it after are noted at info level."""
    from robotad.mcp.config import McpServerConfig
    from robotad.mcp.hub import McpHub

    broken = McpServerConfig(command=sys.executable, args=["-c", "raise SystemExit(3)"])
    hub = McpHub({"broken": broken})
    with trio.fail_after(60), caplog.at_level(logging.INFO, logger="robotad.mcp"):
        async with trio.open_nursery() as nursery:
            await nursery.start(hub.run)
            (server,) = hub.daemon_servers()
            for _ in range(3):
                await server.ready()
                while trio.current_time() < server._retry_at:
                    await trio.sleep(0.05)
            await hub.aclose()
            nursery.cancel_scope.cancel()
    failed = [r for r in caplog.records if r.getMessage().startswith("mcp server failed")]
    assert [r.levelno for r in failed] == [logging.WARNING, logging.INFO, logging.INFO]


async def test_a_server_whose_first_start_failed_is_started_again_for_a_later_turn(
    tmp_path: Path,
) -> None:
    """It never listed a tool, so no call could restart it: the next turn's tool listing
    starts it again in the background (not waiting for it), and a later turn has its tools."""
    from robotad.mcp.config import McpServerConfig
    from robotad.mcp.hub import McpHub, SessionTools

    script = tmp_path / "flaky.py"
    script.write_text(FLAKY_START)
    config = McpServerConfig(command=sys.executable, args=[str(script), str(tmp_path / "m")])
    hub = McpHub({"flaky": config})
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(hub.run)
            tools = SessionTools(hub, "s1", has_own=False)
            assert await tools.tools() == []  # the first start, waited for, failed
            (server,) = hub.daemon_servers()
            assert server.error is not None
            assert "status 1" in server.error
            assert server.status != "failed"  # started again at once, not waited for
            while server.status != "ready":
                await trio.sleep(0.05)
            assert [tool.name for tool in await tools.tools()] == ["mcp__flaky__echo"]
            await hub.aclose()
            nursery.cancel_scope.cancel()


BIG_RESULT = '''
from mcp.server.mcpserver import MCPServer

server = MCPServer("big")


@server.tool()
def big(size: int) -> str:
    """A result of `size` characters on one stdout line."""
    return "".join(chr(ord("a") + i % 26) for i in range(size))


server.run("stdio")
'''


async def test_a_result_line_longer_than_any_pipe_read_comes_whole(tmp_path: Path) -> None:
    """A result line arrives in many reads of the server's stdout: they are joined whole, in
    order, with nothing lost at a read's edge."""
    from robotad.mcp.config import McpServerConfig
    from robotad.mcp.hub import McpHub

    script = tmp_path / "big.py"
    script.write_text(BIG_RESULT)
    hub = McpHub({"big": McpServerConfig(command=sys.executable, args=[str(script)])})
    size = 3_000_000
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(hub.run)
            (server,) = hub.daemon_servers()
            result = await server.call("big", {"size": size})
            await hub.aclose()
            nursery.cancel_scope.cancel()
    text = result.content[0].text
    assert len(text) == size
    assert text == "".join(chr(ord("a") + i % 26) for i in range(size))


class _Refusing(http.server.BaseHTTPRequestHandler):
    """Answers every POST with the status the path names (``/401``); under ``/call/401`` only
    ``tools/call``, serving the handshake as a streamable-HTTP server does."""

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        status = int(self.path.rsplit("/", 1)[1])
        if self.path.startswith("/call/") and message.get("method") != "tools/call":
            self._serve(message)
            return
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("WWW-Authenticate", 'Bearer realm="mcp"')
        self.end_headers()
        self.wfile.write(b"no")

    def _serve(self, message: dict[str, Any]) -> None:
        if "id" not in message:
            self.send_response(202)
            self.end_headers()
            return
        result: dict[str, Any] = {"tools": []}
        if message["method"] == "initialize":
            version = message["params"]["protocolVersion"]
            result = {"protocolVersion": version, "capabilities": {"tools": {}}}
            result["serverInfo"] = {"name": "refusing", "version": "1"}
        body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/401", "HTTP 401 Unauthorized: the server wants credentials (set its headers"),
        ("/403", "HTTP 403 Forbidden: the server refused these credentials (check its headers)"),
        ("/500", "the server answered HTTP 500 Internal Server Error"),
        # The SDK spells a 404 before a session as JSON-RPC's "method not found": a url
        # with a wrong path read "handshake failed: error -32601: Not Found".
        ("/404", "the server answered HTTP 404 Not Found: nothing serves MCP at its url"),
        ("/call/401", "HTTP 401 Unauthorized: the server wants credentials (set its headers"),
    ],
)
async def test_an_http_server_that_refuses_is_named_by_its_status(path: str, reason: str) -> None:
    """The SDK turns any HTTP refusal into "Server returned an error response": a 401 read
    as if the server were broken, not as a missing Authorization header; at the handshake
    or on a call (a token that expired)."""
    from robotad.mcp.config import McpServerConfig, spec_of_config
    from robotad.mcp.connection import ServerFailed, connect

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}{path}"
        spec = spec_of_config("web", McpServerConfig(url=url))
        with trio.fail_after(30), pytest.raises(ServerFailed) as refused:
            async with connect(spec, lambda: None) as connection:
                await connection.call("anything", {}, spec.tool_timeout)
    finally:
        server.shutdown()
        server.server_close()
    assert str(refused.value).startswith(reason)


async def test_only_a_refused_post_explains_a_failure() -> None:
    """The GET event stream's 405 (many servers refuse it) or the DELETE at close could be
    told as a call's refusal: only POSTs, which carry requests, count."""
    from types import SimpleNamespace

    from mcp.shared.exceptions import MCPError

    from robotad.mcp.connection import _STAND_IN, _HttpRefusals

    def response(method: str, status: int, phrase: str) -> SimpleNamespace:
        request = SimpleNamespace(method=method)
        return SimpleNamespace(status_code=status, reason_phrase=phrase, request=request)

    refusals = _HttpRefusals()
    stand_in = MCPError(-32603, _STAND_IN)
    await refusals.on_response(response("GET", 405, "Method Not Allowed"))
    await refusals.on_response(response("DELETE", 404, "Not Found"))
    assert refusals.explain(stand_in) is None
    await refusals.on_response(response("POST", 401, "Unauthorized"))
    await refusals.on_response(response("GET", 405, "Method Not Allowed"))
    assert (refusals.explain(stand_in) or "").startswith("HTTP 401 Unauthorized")
    assert refusals.explain(MCPError(-32603, "another message")) is None
