"""MCP servers configured daemon-wide, through a real robotad and real servers (PROTOCOL §10.5).

One daemon serves the whole module, configured with server-everything twice (``every``, and
``slow`` with a 1 s tool timeout), server-filesystem (``files``, its root a temp folder), a
server that never answers (``silent``, 1 s startup timeout), one whose stdout is garbage, a
disabled one, and a PreToolUse hook blocking ``mcp__every__get-sum``. Its environment holds a
provider key and a secret-named variable the servers must never see. Turns are scripted: each
step's ``toolCalls`` name the ``mcp__SERVER__TOOL`` tools.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.daemon_helpers import (
    PROCESS_TIMEOUT,
    REPO,
    Client,
    DaemonHome,
    RunningDaemon,
    connect,
    stop_robotad,
)
from tests.mcp.conftest import MCP_TIMEOUT, FakeServers, NpmServers
from tests.mcp.processes import processes_with
from tests.mcp.test_mcp_absent import sdk_loaded
from tests.robotad_process import start_robotad

SECRET = "s3cret-value-never-for-servers"


@pytest.fixture(scope="module")
def daemon(
    tmp_path_factory: pytest.TempPathFactory, npm_servers: NpmServers, fake_servers: FakeServers
) -> Iterator[RunningDaemon]:
    home = DaemonHome(tmp_path_factory.mktemp("mcp-daemon"))
    files_root = home.root / "files-root"
    files_root.mkdir()
    (files_root / "inside.txt").write_text("inside the root\n")
    node, every = npm_servers.node, npm_servers.everything
    home.write_config(
        f"""
[mcp_servers.every]
command = {json.dumps(node)}
args = [{json.dumps(str(every))}, "stdio"]
env = {{ GIVEN_TO_SERVER = "yes" }}

[mcp_servers.slow]
command = {json.dumps(node)}
args = [{json.dumps(str(every))}, "stdio"]
tool_timeout_ms = 1000

[mcp_servers.files]
command = {json.dumps(node)}
args = [{json.dumps(str(npm_servers.filesystem))}, {json.dumps(str(files_root))}]
risk = "inspect"

[mcp_servers.silent]
command = {json.dumps(fake_servers.python)}
args = [{json.dumps(str(fake_servers.silent))}]
startup_timeout_ms = 1000

[mcp_servers.garbage]
command = {json.dumps(fake_servers.python)}
args = [{json.dumps(str(fake_servers.garbage))}]

[mcp_servers.off]
command = "no-such-command"
enabled = false

[[hooks.PreToolUse]]
matcher = "mcp__every__get-sum"
hooks = [{{ type = "command", command = "echo 'no sums today' >&2; exit 2" }}]
"""
    )
    env = home.environment()
    env["ROBOTA_TEST_TOKEN"] = SECRET
    env["OPENAI_API_KEY"] = SECRET
    started = start_robotad(home.socket_path, home.log_path, env=env)
    running = RunningDaemon(started.socket_path, started.process, started.log, home)
    try:
        yield running
    finally:
        stop_robotad(running)


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"name": tool, "arguments": arguments}


async def new_session(client: Client, cwd: Path, steps: list[dict[str, Any]], **params: Any) -> str:
    params.setdefault("permissionMode", "bypassPermissions")
    info = await client.call("session/create", {"cwd": str(cwd), "script": steps, **params})
    session_id: str = info["sessionId"]
    return session_id


async def tool_messages(client: Client, session_id: str) -> list[dict[str, Any]]:
    history = await client.call("session/history", {"sessionId": session_id})
    return [m for m in history["messages"] if m["role"] == "tool"]


async def run_calls(
    daemon: RunningDaemon, cwd: Path, *calls: dict[str, Any], **params: Any
) -> list[dict[str, Any]]:
    """One turn whose first step makes `calls`; the tool messages it produced."""
    with trio.fail_after(MCP_TIMEOUT):
        async with connect(daemon) as client:
            steps = [{"toolCalls": list(calls)}, {"text": "done"}]
            session_id = await new_session(client, cwd, steps, **params)
            result = await client.call("session/run", {"sessionId": session_id, "prompt": "go"})
            assert result["status"] == "completed", result
            return await tool_messages(client, session_id)


async def test_list_shows_every_server_its_tools_and_errors(daemon: RunningDaemon) -> None:
    """mcp/list starts the servers and reports them as they are: ready ones with their
    tools as the model sees them, a server that never answers and one whose stdout is
    garbage as failed with why, a disabled one as stopped."""
    with trio.fail_after(MCP_TIMEOUT):
        async with connect(daemon) as client:
            listed = await client.call("mcp/list", {})
    servers = {entry["name"]: entry for entry in listed["servers"]}
    assert servers["every"]["status"] == "ready"
    assert servers["every"]["scope"] == "daemon"
    assert "mcp__every__echo" in servers["every"]["tools"]
    assert len(servers["every"]["tools"]) >= 10
    assert "mcp__files__read_text_file" in servers["files"]["tools"]
    assert servers["silent"]["status"] == "failed"
    assert "did not finish starting within 1000 ms" in servers["silent"]["error"]
    assert servers["garbage"]["status"] == "failed"
    assert "hello, I am not JSON-RPC" in servers["garbage"]["error"]
    assert servers["off"] == {
        "name": "off",
        "scope": "daemon",
        "status": "stopped",
        "tools": [],
        "error": "disabled",
    }
    assert sdk_loaded(daemon.pid)  # the check tests/mcp/test_mcp_absent.py relies on
    log = daemon.output()
    assert "mcp server failed" in log
    assert "mcp_server=silent" in log


def test_robotactl_mcp_lists_servers(daemon: RunningDaemon) -> None:
    """`robotactl mcp` shows each server's status, tools and last error; --json prints the
    mcp/list result."""
    base = [sys.executable, "-m", "robotactl", "--socket", str(daemon.socket_path)]
    env = {**daemon.home.environment()}

    def ctl(*args: str) -> str:
        done = subprocess.run(
            [*base, *args],
            capture_output=True,
            text=True,
            timeout=PROCESS_TIMEOUT,
            env=env,
            cwd=REPO,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    rows = {line.split()[0]: line for line in ctl("mcp").splitlines()[1:]}
    assert "ready" in rows["every"]
    assert "echo" in rows["every"]
    assert "mcp__every__" not in rows["every"]  # the prefix is the server's name
    assert re.search(r"… \(\+[0-9]+ more\)", rows["every"])  # server-everything has many
    assert "failed" in rows["silent"]
    assert "did not finish starting" in rows["silent"]
    assert "\n  mcp__every__echo\n" in ctl("mcp", "--tools")
    as_json = ctl("--json", "mcp")
    names = {entry["name"] for entry in json.loads(as_json)["servers"]}
    assert {"every", "slow", "files", "silent", "garbage", "off"} <= names


async def test_a_call_and_its_result(daemon: RunningDaemon, tmp_path: Path) -> None:
    """The model's call of mcp__every__echo reaches the server; its text is the result."""
    (message,) = await run_calls(daemon, tmp_path, call("mcp__every__echo", message="hello"))
    assert message["name"] == "mcp__every__echo"
    assert message["content"] == "Echo: hello"
    assert message["metadata"]["ok"] is True


async def test_default_mode_asks_a_person(daemon: RunningDaemon, tmp_path: Path) -> None:
    """An MCP tool is `execute` by default: in default mode the call waits for a person,
    who sees the exact call; the approved call then runs."""
    with trio.fail_after(MCP_TIMEOUT):
        async with connect(daemon) as client:
            steps = [{"toolCalls": [call("mcp__every__echo", message="asked")]}, {"text": "ok"}]
            session_id = await new_session(client, tmp_path, steps, permissionMode="default")
            waiting = await client.call("session/run", {"sessionId": session_id, "prompt": "go"})
            assert waiting["status"] == "waiting"
            (request,) = waiting["requests"]
            assert request["tool"] == "mcp__every__echo"
            assert request["arguments"] == {"message": "asked"}
            answer = {"requestId": request["requestId"], "responseId": "r1", "approved": True}
            done = await client.call(
                "session/resume",
                {
                    "sessionId": session_id,
                    "executionId": waiting["executionId"],
                    "responses": [answer],
                },
            )
            messages = await tool_messages(client, session_id)
    assert done["status"] == "completed"
    assert messages[0]["content"] == "Echo: asked"


async def test_inspect_risk_runs_without_asking(daemon: RunningDaemon, tmp_path: Path) -> None:
    """A server configured with risk "inspect" has its tools allowed in default mode."""
    (message,) = await run_calls(
        daemon, tmp_path, call("mcp__files__list_allowed_directories"), permissionMode="default"
    )
    assert message["metadata"]["ok"] is True
    assert "files-root" in message["content"]


async def test_allow_and_deny_rules_on_server_and_tool_names(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """`mcp__every` allows every tool of that server; `mcp__every__get-env` denies that one
    tool (deny wins); another server's tools are untouched by either."""
    messages = await run_calls(
        daemon,
        tmp_path,
        call("mcp__every__echo", message="allowed"),
        call("mcp__every__get-env"),
        permissionMode="plan",
        permissions={"allow": ["mcp__every"], "deny": ["mcp__every__get-env"]},
    )
    echo, env = messages
    assert echo["content"] == "Echo: allowed"
    assert env["metadata"]["ok"] is False
    assert "denied by rule mcp__every__get-env" in env["content"]
    (other,) = await run_calls(
        daemon,
        tmp_path,
        call("mcp__slow__echo", message="x"),
        permissionMode="plan",
        permissions={"allow": ["mcp__every"]},
    )
    assert other["metadata"]["ok"] is False
    assert "plan mode" in other["content"]


async def test_a_pre_tool_use_hook_blocks_an_mcp_call(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """Hook matchers see mcp__SERVER__TOOL names: a PreToolUse hook blocks get-sum."""
    (message,) = await run_calls(daemon, tmp_path, call("mcp__every__get-sum", a=1, b=2))
    assert message["metadata"]["ok"] is False
    assert "no sums today" in message["content"]


async def test_is_error_is_a_failed_result_naming_the_server(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """server-filesystem refuses a path outside its root with isError: a failed result
    whose text names the server; a path inside it reads."""
    inside = str(daemon.home.root / "files-root" / "inside.txt")
    refused, read = await run_calls(
        daemon,
        tmp_path,
        call("mcp__files__read_text_file", path="/etc/hostname"),
        call("mcp__files__read_text_file", path=inside),
    )
    assert refused["metadata"]["ok"] is False
    assert refused["content"].startswith("MCP server files: read_text_file failed:")
    assert read["content"] == "inside the root\n"


async def test_a_call_to_a_server_that_cannot_start_says_why(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """PROTOCOL §10.5: a configured server that cannot start makes a call of one of its tools
    a failed result saying why (the model may know the name from earlier history), not
    "unknown tool"; a name of no server stays unknown."""
    silent, nowhere = await run_calls(
        daemon, tmp_path, call("mcp__silent__echo", text="x"), call("mcp__nowhere__echo")
    )
    assert silent["metadata"]["ok"] is False
    assert silent["content"].startswith("MCP server silent: ")
    assert "unknown tool" not in silent["content"]
    assert nowhere["content"].startswith("unknown tool 'mcp__nowhere__echo'")


async def test_images_are_described_and_spilled(daemon: RunningDaemon, tmp_path: Path) -> None:
    """An image is described (type, size) and its data stored in the spill store."""
    (message,) = await run_calls(daemon, tmp_path, call("mcp__every__get-tiny-image"))
    assert message["metadata"]["ok"] is True
    assert "[image, image/png, " in message["content"]
    assert "stored, base64 as tool-result:" in message["content"]


async def test_a_call_that_gets_no_answer_times_out(daemon: RunningDaemon, tmp_path: Path) -> None:
    """A call running past the server's tool_timeout_ms is a failed result saying so."""
    (message,) = await run_calls(
        daemon, tmp_path, call("mcp__slow__trigger-long-running-operation", duration=5, steps=5)
    )
    assert message["metadata"]["ok"] is False
    assert message["content"] == "MCP server slow: did not answer within 1000 ms"


def _server_pid(daemon: RunningDaemon, marker: str) -> int:
    """The pid of the daemon's child whose environment holds `marker`."""
    found = processes_with(marker, parent=daemon.pid)
    if not found:
        raise AssertionError(f"no server process with {marker}")
    return found[0]


async def test_a_killed_server_is_restarted_on_the_next_call(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """SIGKILL the running server: once robotad has reaped it, the next call starts it
    again and gets its answer; mcp/list keeps the signal as the last error."""
    await run_calls(daemon, tmp_path, call("mcp__every__echo", message="before"))
    pid = _server_pid(daemon, "GIVEN_TO_SERVER=yes")
    os.kill(pid, signal.SIGKILL)
    with trio.fail_after(MCP_TIMEOUT):
        while Path(f"/proc/{pid}").exists():  # robotad reaps its child when it sees it die
            await trio.sleep(0.02)
    (message,) = await run_calls(daemon, tmp_path, call("mcp__every__echo", message="after"))
    assert message["content"] == "Echo: after"
    assert _server_pid(daemon, "GIVEN_TO_SERVER=yes") != pid
    with trio.fail_after(MCP_TIMEOUT):
        async with connect(daemon) as client:
            listed = await client.call("mcp/list", {})
    every = next(s for s in listed["servers"] if s["name"] == "every")
    assert every["status"] == "ready"
    assert every["error"] == "killed by SIGKILL"


async def test_abort_cancels_a_running_mcp_call(daemon: RunningDaemon, tmp_path: Path) -> None:
    """session/abort during the 30 s long-running operation ends the turn at once as
    aborted, the call interrupted; the server keeps serving."""
    long_call = call("mcp__every__trigger-long-running-operation", duration=30, steps=30)
    with trio.fail_after(MCP_TIMEOUT):
        async with connect(daemon) as client:
            session_id = await new_session(client, tmp_path, [{"toolCalls": [long_call]}])
            await client.call("session/subscribe", {"sessionId": session_id})
            await client.call(
                "session/run", {"sessionId": session_id, "prompt": "go", "wait": False}
            )
            await client.wait_for_event(session_id, "tool_started")
            aborted = await client.call("session/abort", {"sessionId": session_id})
            finished = await client.wait_for_event(session_id, "turn_finished")
            messages = await tool_messages(client, session_id)
    assert aborted == {"aborted": True}
    assert finished["status"] == "aborted"
    assert messages[0]["state"] == "interrupted"
    (message,) = await run_calls(daemon, tmp_path, call("mcp__every__echo", message="still"))
    assert message["content"] == "Echo: still"


async def test_servers_get_only_the_allow_listed_environment(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """A server sees HOME, PATH and its configured env, never robotad's provider keys,
    secret-named variables or its own settings."""
    (message,) = await run_calls(daemon, tmp_path, call("mcp__every__get-env"))
    seen = json.loads(message["content"])
    assert seen["GIVEN_TO_SERVER"] == "yes"
    assert "PATH" in seen
    assert "HOME" in seen
    for hidden in ("OPENAI_API_KEY", "ROBOTA_TEST_TOKEN", "ROBOTA_STATE_DIR", "ROBOTA_CONFIG"):
        assert hidden not in seen
    assert SECRET not in message["content"]


async def test_shutdown_stops_every_server(daemon: RunningDaemon, tmp_path: Path) -> None:
    """The last test of the module: daemon/shutdown leaves no server process behind."""
    await run_calls(daemon, tmp_path, call("mcp__every__echo", message="last"))
    assert processes_with("GIVEN_TO_SERVER=yes")
    with trio.fail_after(MCP_TIMEOUT):
        async with connect(daemon) as client:
            await client.call("daemon/shutdown", {"graceSeconds": 5})
    assert daemon.wait_exit() == 0
    assert processes_with("GIVEN_TO_SERVER=yes") == []
