"""What robotad adds to an MCP tool call: an echo through robotad vs the SDK calling directly.

Run: ``.venv/bin/python bench/mcp.py [--calls N]``. Prints figures; asserts nothing. Needs node
and npm (server-everything is installed into the user's cache like the tests do).

- direct: the official SDK (``stdio_client`` + ``ClientSession``) calling server-everything's
  ``echo`` over stdio, median per call — the floor, measured in this run with the calls as far
  apart as the daemon's turns (an idle server answers a call measurably slower than one
  called back to back: ~0.75 ms vs ~5.7 ms with 70 ms between calls on a loaded machine);
- robotad's MCP tool in-process: `McpTool.run` (the supervised server, robotad's own stdio
  transport, result conversion) calling a second copy of the server, alternating call by call
  with the direct one so load on the machine falls on both alike;
- through robotad: a real daemon configured with the same server; each turn is scripted to
  make one tool call and then answer. A turn calling ``mcp__every__echo`` is timed against the
  same turn calling ``Read`` on a tiny file (the same rounds, gate, journal, commits and
  events: the turn machinery cancels out). Added per call = median(echo turn) − median(Read
  turn) − direct median: what robotad's MCP path (adapter, transport, result conversion)
  costs beyond the server's own answer. Target: ≤ 2 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import trio

# This file is named like the SDK's package: keep its own folder off the import path.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from tests.mcp.npm_servers import NpmServers, installed_servers  # noqa: E402
from tests.system.daemon_process import SCRIPTED_CONFIG, DaemonProcess, daemon_home  # noqa: E402
from tests.system.soak_client import SoakConnection, open_soak_connection  # noqa: E402

TARGET_MS = 2.0
#: Turns per session (history stays short).
TURNS_PER_SESSION = 20


async def direct_and_adapter(
    servers: NpmServers, calls: int, gap: float
) -> tuple[list[float], list[float]]:
    """Seconds per echo call: the SDK talking to one server itself, and robotad's MCP tool
    (`McpTool.run`: supervised server, own stdio transport, result conversion) talking to
    another, call by call in turn so machine load falls on both alike. Each call comes `gap`
    seconds after the previous one, as the daemon's calls come one turn apart: a server
    process idle for that long takes measurably longer to answer than one called back to
    back, and the floor must be measured as the daemon meets it."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from robotad.agent.tool import ToolContext
    from robotad.mcp.config import McpServerConfig
    from robotad.mcp.hub import McpHub

    argv = [str(servers.everything), "stdio"]
    params = StdioServerParameters(command=servers.node, args=argv)
    hub = McpHub({"every": McpServerConfig(command=servers.node, args=argv)})
    sdk: list[float] = []
    ours: list[float] = []
    with open(os.devnull, "w") as quiet:
        async with (
            trio.open_nursery() as nursery,
            stdio_client(params, errlog=quiet) as (read, write),
            ClientSession(read, write) as session,
        ):
            await nursery.start(hub.run)
            await session.initialize()
            tools = await hub.for_session("bench", []).tools()
            echo = next(tool for tool in tools if tool.name == "mcp__every__echo")
            ctx = ToolContext(cwd=Path("/"), session_id="bench")
            for index in range(calls + 20):
                await trio.sleep(gap)
                started = time.perf_counter()
                await session.call_tool("echo", {"message": f"m{index}"})
                direct_seconds = time.perf_counter() - started
                await trio.sleep(gap)
                started = time.perf_counter()
                await echo.run({"message": f"m{index}"}, ctx)
                if index >= 20:  # warm-up calls are not counted
                    sdk.append(direct_seconds)
                    ours.append(time.perf_counter() - started)
            await hub.aclose()
            nursery.cancel_scope.cancel()
    return sdk, ours


async def through_robotad(
    connection: SoakConnection, cwd: Path, calls: dict[str, dict[str, Any]], turns: int
) -> dict[str, list[float]]:
    """Seconds per turn that makes one tool call and then answers, for each labelled call;
    the labels take turns, so load on the machine falls on each alike."""
    times: dict[str, list[float]] = {label: [] for label in calls}
    sessions: dict[str, str] = {}
    for index in range(turns + 5):
        for label, tool_call in calls.items():
            if index % TURNS_PER_SESSION == 0:
                sessions[label] = f"{label}-{index // TURNS_PER_SESSION}"
                script = [{"toolCalls": [tool_call]}, {"text": "done"}] * TURNS_PER_SESSION
                await connection.call(
                    "session/create",
                    {
                        "cwd": str(cwd),
                        "sessionId": sessions[label],
                        "permissionMode": "bypassPermissions",
                        "script": script,
                    },
                )
            params = {"sessionId": sessions[label], "prompt": "go"}
            started = time.perf_counter()
            result = await connection.call("session/run", params)
            if index >= 5:  # the first turns start the server and warm up
                times[label].append(time.perf_counter() - started)
            assert result["status"] == "completed", result
    return times


def _ms(values: list[float]) -> float:
    return statistics.median(values) * 1e3


async def main(arguments: argparse.Namespace) -> None:
    servers = installed_servers()
    if servers is None:
        print("bench/mcp.py needs node and npm (apt-get install nodejs npm)")
        return
    config = SCRIPTED_CONFIG + (
        f"\n[mcp_servers.every]\ncommand = {json.dumps(servers.node)}\n"
        f'args = [{json.dumps(str(servers.everything))}, "stdio"]\n'
    )
    with daemon_home() as home:
        home.config_path.write_text(config)
        daemon = DaemonProcess(home).start()
        try:
            cwd = home.workspace("mcp")
            tiny = cwd / "tiny.txt"
            tiny.write_text("x\n")
            async with open_soak_connection(daemon.socket_path) as connection:
                echo = {"name": "mcp__every__echo", "arguments": {"message": "hello"}}
                read = {"name": "Read", "arguments": {"file_path": str(tiny)}}
                turns = await through_robotad(
                    connection, cwd, {"echo": echo, "read": read}, arguments.calls
                )
        finally:
            daemon.stop()
    mcp_turns, read_turns = turns["echo"], turns["read"]
    gap = statistics.median(read_turns)
    sdk, adapter = await direct_and_adapter(servers, arguments.calls, gap)
    added = _ms(mcp_turns) - _ms(read_turns) - _ms(sdk)
    adapter_added = _ms(adapter) - _ms(sdk)
    verdict = "ok" if added <= TARGET_MS else "OVER TARGET"
    print(
        f"mcp echo (medians over {arguments.calls}, calls {gap * 1e3:.0f} ms apart): direct SDK "
        f"{_ms(sdk):.3f} ms/call; "
        f"robotad's MCP tool in-process {_ms(adapter):.3f} ms/call (added "
        f"{adapter_added:+.3f} ms); a daemon turn with one echo call {_ms(mcp_turns):.2f} ms "
        f"vs one Read call {_ms(read_turns):.2f} ms: added by robotad per MCP call "
        f"{added:+.3f} ms (target <= {TARGET_MS:.0f} ms: {verdict}); load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="calls (and turns) to time")
    trio.run(main, parser.parse_args())
