"""Session-scoped MCP servers (``session/create {mcpServers}``) over stdio and streamable HTTP,
through a real robotad with no server configured (PROTOCOL §10.5)."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from protocol.errors import InvalidParams
from tests.daemon_helpers import PROCESS_TIMEOUT, RunningDaemon, connect, module_daemon
from tests.mcp.conftest import MCP_TIMEOUT, FakeServers, NpmServers
from tests.mcp.processes import processes_with
from tests.mcp.test_mcp_daemon import call, new_session, tool_messages

daemon = module_daemon()


async def test_a_session_brings_its_own_server(
    daemon: RunningDaemon, npm_servers: NpmServers, tmp_path: Path
) -> None:
    """A session's own server is listed with scope "session", its tools are offered to that
    session only, and closing the session stops the server."""
    mine = {
        "name": "mine",
        "command": npm_servers.node,
        "args": [str(npm_servers.everything), "stdio"],
        "env": {"MARK": "mine-server"},
    }
    echo = call("mcp__mine__echo", message="own")
    with trio.fail_after(MCP_TIMEOUT):
        async with connect(daemon) as client:
            owner = await new_session(
                client, tmp_path, [{"toolCalls": [echo]}, {"text": "done"}], mcpServers=[mine]
            )
            listed = await client.call("mcp/list", {"sessionId": owner})
            result = await client.call("session/run", {"sessionId": owner, "prompt": "go"})
            own = await tool_messages(client, owner)
            other = await new_session(client, tmp_path, [{"toolCalls": [echo]}, {"text": "done"}])
            await client.call("session/run", {"sessionId": other, "prompt": "go"})
            foreign = await tool_messages(client, other)
            assert processes_with("MARK=mine-server", parent=daemon.pid)
            await client.call("session/close", {"sessionId": owner})
    assert listed["servers"] == [
        {
            "name": "mine",
            "scope": "session",
            "status": "ready",
            "tools": listed["servers"][0]["tools"],
        }
    ]
    assert "mcp__mine__echo" in listed["servers"][0]["tools"]
    assert result["status"] == "completed"
    assert own[0]["content"] == "Echo: own"
    assert foreign[0]["metadata"]["ok"] is False
    assert "unknown tool 'mcp__mine__echo'" in foreign[0]["content"]
    assert processes_with("MARK=mine-server", parent=daemon.pid) == []


async def test_a_sessions_servers_come_back_when_it_is_opened_again(
    daemon: RunningDaemon, npm_servers: NpmServers, tmp_path: Path
) -> None:
    """The servers a session was created with are part of its record: after a close (and
    saves in between), opening it again gives it the same servers."""
    mine = {"name": "kept", "command": npm_servers.node, "args": [str(npm_servers.everything)]}
    echo = call("mcp__kept__echo", message="again")
    with trio.fail_after(MCP_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await new_session(
                client,
                tmp_path,
                [{"text": "first"}, {"toolCalls": [echo]}, {"text": "done"}],
                mcpServers=[mine],
            )
            await client.call("session/run", {"sessionId": session_id, "prompt": "one"})
            await client.call("session/close", {"sessionId": session_id})
            await client.call("session/open", {"sessionId": session_id})
            result = await client.call("session/run", {"sessionId": session_id, "prompt": "two"})
            messages = await tool_messages(client, session_id)
            listed = await client.call("mcp/list", {"sessionId": session_id})
    assert result["status"] == "completed"
    assert messages[0]["content"] == "Echo: again"
    assert [(s["name"], s["scope"]) for s in listed["servers"]] == [("kept", "session")]


async def test_a_changed_tool_list_is_offered_from_the_next_turn(
    daemon: RunningDaemon, fake_servers: FakeServers, tmp_path: Path
) -> None:
    """After notifications/tools/list_changed the server's tools are read again: mcp/list
    shows the new tool and the next turn offers it."""
    growing = {"name": "g", "command": fake_servers.python, "args": [str(fake_servers.growing)]}
    script: list[dict[str, Any]] = [
        {"toolCalls": [call("mcp__g__grow")]},
        {"text": "grown"},
        {"toolCalls": [call("mcp__g__late")]},
        {"text": "done"},
    ]
    with trio.fail_after(MCP_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await new_session(client, tmp_path, script, mcpServers=[growing])
            listed = await client.call("mcp/list", {"sessionId": session_id})
            await client.call("session/run", {"sessionId": session_id, "prompt": "grow"})
            while True:
                after = await client.call("mcp/list", {"sessionId": session_id})
                if "mcp__g__late" in after["servers"][0]["tools"]:
                    break
                await trio.sleep(0.05)
            await client.call("session/run", {"sessionId": session_id, "prompt": "late"})
            messages = await tool_messages(client, session_id)
    assert listed["servers"][0]["tools"] == ["mcp__g__grow"]
    assert [m["content"] for m in messages] == ["grown", "late tool answered"]


async def test_malformed_servers_are_refused_each_located(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """Every problem of mcpServers is listed in one -32602, at its path; nothing is made."""
    servers: list[dict[str, Any]] = [
        {"name": "neither"},
        {"name": "bad name", "command": "x"},
        {"name": "both", "command": "x", "url": "http://127.0.0.1:1/mcp"},
        {"name": "web", "url": "ftp://127.0.0.1/mcp"},
        {"name": "web", "command": "x"},
        {"name": "my__srv", "command": "x"},  # a rule mcp__my would cover its tools
        # No process takes these, nor any request: they failed only when the server started.
        {"name": "envs", "command": "x", "env": {"A=B": "1"}},
        {"name": "head", "url": "http://127.0.0.1:1/mcp", "headers": {"X-A": "a\r\nX-B: b"}},
        {"name": "nul", "command": "x\u0000y", "args": ["ok", "a\u0000"]},
        # URLs the HTTP client refuses, or would send to another port than written.
        {"name": "v6", "url": "http://[::1/mcp"},
        {"name": "port", "url": "http://127.0.0.1:99999/mcp"},
    ]
    with trio.fail_after(MCP_TIMEOUT):
        async with connect(daemon) as client:
            with pytest.raises(InvalidParams) as refused:
                await client.call("session/create", {"cwd": str(tmp_path), "mcpServers": servers})
            listed = await client.call("session/list", {})
    paths = [issue["path"] for issue in refused.value.issues]
    assert paths == [
        "$.mcpServers[0]",
        "$.mcpServers[1].name",
        "$.mcpServers[2]",
        "$.mcpServers[3].url",
        "$.mcpServers[4].name",
        "$.mcpServers[5].name",
        '$.mcpServers[6].env["A=B"]',
        '$.mcpServers[7].headers["X-A"]',
        "$.mcpServers[8].command",
        "$.mcpServers[8].args[1]",
        "$.mcpServers[9].url",
        "$.mcpServers[10].url",
    ]
    assert [s for s in listed["sessions"] if s["cwd"] == str(tmp_path)] == []


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
async def http_server(
    npm_servers: NpmServers,
) -> AsyncIterator[tuple[str, subprocess.Popen[bytes]]]:
    """server-everything over streamable HTTP on a loopback port; its /mcp URL."""
    port = _free_port()
    env = {**os.environ, "PORT": str(port), "HOST": "127.0.0.1"}
    process = subprocess.Popen(
        [npm_servers.node, str(npm_servers.everything), "streamableHttp"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        await _wait_for_port(port)
        yield f"http://127.0.0.1:{port}/mcp", process
    finally:
        process.kill()
        process.wait(PROCESS_TIMEOUT)


async def _wait_for_port(port: int) -> None:
    with trio.fail_after(PROCESS_TIMEOUT):
        while True:
            try:
                stream = await trio.open_tcp_stream("127.0.0.1", port)
            except OSError:
                await trio.sleep(0.05)
            else:
                await stream.aclose()
                return


async def test_an_http_server_and_its_death(
    daemon: RunningDaemon,
    http_server: tuple[str, subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    """A streamable-HTTP server's tools work like a stdio server's; once it is gone, a call
    is a failed result naming the server, never a failed turn, and mcp/list shows it failed
    (its next use starts it again)."""
    url, process = http_server
    echo = call("mcp__web__echo", message="over http")
    again = call("mcp__web__echo", message="gone")
    with trio.fail_after(MCP_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await new_session(
                client,
                tmp_path,
                [
                    {"toolCalls": [echo]},
                    {"text": "one"},
                    {"toolCalls": [again]},
                    {"text": "two"},
                ],
                mcpServers=[{"name": "web", "url": url}],
            )
            first = await client.call("session/run", {"sessionId": session_id, "prompt": "a"})
            process.kill()
            process.wait(PROCESS_TIMEOUT)
            second = await client.call("session/run", {"sessionId": session_id, "prompt": "b"})
            messages = await tool_messages(client, session_id)
            listed = await client.call("mcp/list", {"sessionId": session_id})
    assert first["status"] == "completed"
    assert messages[0]["content"] == "Echo: over http"
    assert second["status"] == "completed"
    assert messages[1]["metadata"]["ok"] is False
    assert messages[1]["content"] == "MCP server web: the connection to the server closed"
    (web,) = listed["servers"]
    assert web["status"] == "failed"
    assert web["error"].startswith("ConnectError")
