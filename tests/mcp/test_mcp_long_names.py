"""Decision 68 through a real robotad and a small stdio MCP server (the SDK's own): a server
whose name is as long as robotad takes, configured daemon-wide (``LONGEST``, with a PreToolUse
hook whose matcher is ``mcp__LONGEST__.*``) or brought by a session (``SESSION_LONGEST``), has
every tool offered under ``mcp__SERVER__…``, two long tools cut apart; a rule ``mcp__SERVER``
covers each of them and a rule naming a long tool's full name covers that tool; a name one
character longer is refused by ``session/create``."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.errors import InvalidParams
from protocol.methods import MCP_SERVER_NAME_MAX
from tests.daemon_helpers import Client, DaemonHome, RunningDaemon, connect, running_daemon
from tests.mcp.conftest import MCP_TIMEOUT
from tests.mcp.test_mcp_daemon import call, new_session, tool_messages

#: Server names as long as robotad takes.
LONGEST = "daemon-" + "d" * (MCP_SERVER_NAME_MAX - len("daemon-"))
SESSION_LONGEST = "session-" + "s" * (MCP_SERVER_NAME_MAX - len("session-"))
BY_NAME = "fetch_the_weather_forecast_for_a_city_by_its_name"
BY_CODE = "fetch_the_weather_forecast_for_a_city_by_its_code"

WEATHER_SERVER = f'''
from mcp.server.mcpserver import MCPServer

server = MCPServer("weather")


def echo(text: str) -> str:
    """Say the text back."""
    return "echo: " + text


def by_name(city: str) -> str:
    """The forecast for a city named."""
    return "sunny in " + city


def by_code(code: str) -> str:
    """The forecast for a city by its code."""
    return "rainy at " + code


server.add_tool(echo, name="echo")
server.add_tool(by_name, name="{BY_NAME}")
server.add_tool(by_code, name="{BY_CODE}")
server.run("stdio")
'''


@pytest.fixture(scope="module")
def weather(tmp_path_factory: pytest.TempPathFactory) -> Path:
    script = tmp_path_factory.mktemp("weather-mcp") / "weather.py"
    script.write_text(WEATHER_SERVER)
    return script


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, weather: Path) -> Iterator[RunningDaemon]:
    home = DaemonHome(tmp_path_factory.mktemp("mcp-long-names"))
    home.write_config(
        f"""
[mcp_servers.{LONGEST}]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(weather))}]

[[hooks.PreToolUse]]
matcher = "mcp__{LONGEST}__.*"
hooks = [{{ type = "command", command = "echo 'no weather from this server' >&2; exit 2" }}]
"""
    )
    with running_daemon(home) as running:
        yield running


def session_server(weather: Path, name: str = SESSION_LONGEST) -> dict[str, Any]:
    return {"name": name, "command": sys.executable, "args": [str(weather)]}


async def offered(client: Client, server: str, session_id: str | None = None) -> dict[str, str]:
    """The names `server`'s tools are offered under (mcp/list), by what each answers."""
    params = {"sessionId": session_id} if session_id is not None else {}
    listed = await client.call("mcp/list", params)
    (entry,) = [s for s in listed["servers"] if s["name"] == server]
    assert entry["status"] == "ready", entry
    echo, by_name, by_code = entry["tools"]  # in the server's order
    return {"echo": echo, "by_name": by_name, "by_code": by_code}


async def probed(client: Client, cwd: Path, server: dict[str, Any]) -> dict[str, str]:
    """`offered` for a session's own `server`, through a session made to list it."""
    probe = await new_session(client, cwd, [{"text": "unused"}], mcpServers=[server])
    names = await offered(client, server["name"], probe)
    await client.call("session/close", {"sessionId": probe})
    return names


async def run_turn(
    client: Client, cwd: Path, calls: list[dict[str, Any]], **params: Any
) -> list[dict[str, Any]]:
    session_id = await new_session(client, cwd, [{"toolCalls": calls}, {"text": "done"}], **params)
    result = await client.call("session/run", {"sessionId": session_id, "prompt": "go"})
    assert result["status"] == "completed", result
    return await tool_messages(client, session_id)


async def test_the_longest_session_server_is_offered_under_its_prefix_and_denied_whole(
    daemon: RunningDaemon, weather: Path, tmp_path: Path
) -> None:
    """Every tool of a session's server with the longest name starts with its whole
    ``mcp__SERVER__`` within 64 characters, the two long ones cut apart; without a rule each
    answers; ``deny = ["mcp__SERVER"]`` denies each, the cut ones included."""
    server = session_server(weather)
    with trio.fail_after(MCP_TIMEOUT):
        async with connect(daemon) as client:
            names = await probed(client, tmp_path, server)
            calls = [
                call(names["echo"], text="hi"),
                call(names["by_name"], city="Oslo"),
                call(names["by_code"], code="OSL"),
            ]
            answered = await run_turn(client, tmp_path, calls, mcpServers=[server])
            denied = await run_turn(
                client,
                tmp_path,
                calls,
                mcpServers=[server],
                permissions={"deny": [f"mcp__{SESSION_LONGEST}"]},
            )
    assert [m["content"] for m in answered] == ["echo: hi", "sunny in Oslo", "rainy at OSL"]
    for message in denied:
        assert message["metadata"]["ok"] is False
        assert f"denied by rule mcp__{SESSION_LONGEST}" in message["content"]
    for name in names.values():
        assert name.startswith(f"mcp__{SESSION_LONGEST}__")
        assert len(name) <= 64
    assert len({names["by_name"], names["by_code"]}) == 2


async def test_a_rule_naming_a_long_tools_full_name_denies_that_tool_only(
    daemon: RunningDaemon, weather: Path, tmp_path: Path
) -> None:
    """A rule may name a tool whose offered name was cut by its full name: it denies that
    tool, and the other whose cut name starts alike still answers."""
    full = f"mcp__{SESSION_LONGEST}__{BY_NAME}"
    server = session_server(weather)
    with trio.fail_after(MCP_TIMEOUT):
        async with connect(daemon) as client:
            names = await probed(client, tmp_path, server)
            by_name, by_code = await run_turn(
                client,
                tmp_path,
                [call(names["by_name"], city="Oslo"), call(names["by_code"], code="OSL")],
                mcpServers=[server],
                permissions={"deny": [full]},
            )
    assert names["by_name"] != full
    assert by_name["metadata"]["ok"] is False
    assert f"denied by rule {full}" in by_name["content"]
    assert by_code["content"] == "rainy at OSL"


async def test_a_hook_matcher_on_the_longest_daemon_server_catches_every_tool(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """The configured server with the longest name: its PreToolUse hook, matcher
    ``mcp__SERVER__.*``, blocks each of its tools, the cut ones included."""
    with trio.fail_after(MCP_TIMEOUT):
        async with connect(daemon) as client:
            names = await offered(client, LONGEST)
            calls = [
                call(names["echo"], text="hi"),
                call(names["by_name"], city="Oslo"),
                call(names["by_code"], code="OSL"),
            ]
            blocked = await run_turn(client, tmp_path, calls)
    for message in blocked:
        assert message["metadata"]["ok"] is False
        assert "blocked by a PreToolUse hook: no weather from this server" in message["content"]
    for name in names.values():
        assert name.startswith(f"mcp__{LONGEST}__")


async def test_a_session_server_name_one_longer_is_refused_at_its_name(
    daemon: RunningDaemon, weather: Path, tmp_path: Path
) -> None:
    """``session/create`` refuses a server name one character longer (42) with -32602 at its
    name, saying why; no session is made."""
    server = session_server(weather, SESSION_LONGEST + "y")
    with trio.fail_after(MCP_TIMEOUT):
        async with connect(daemon) as client:
            with pytest.raises(InvalidParams) as refused:
                await client.call("session/create", {"cwd": str(tmp_path), "mcpServers": [server]})
            listed = await client.call("session/list", {})
    (issue,) = refused.value.issues
    assert issue["path"] == "$.mcpServers[0].name"
    assert issue["message"].startswith("a server name has at most 41 characters (this one has 42)")
    assert [s for s in listed["sessions"] if s["cwd"] == str(tmp_path)] == []
