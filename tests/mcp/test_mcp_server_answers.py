"""What an MCP server answers, lists and prints, as robotad passes it on (decisions 65, 66).

Against tiny stdio servers written here (raw JSON-RPC, so they can answer as real servers of
other SDKs do) and the loopback streamable-HTTP server of `tests.mcp.http_servers`.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
import trio.testing
from msgspec import UNSET

from protocol.methods import McpServerEntry
from robotad.agent.tool import ToolContext, ToolResult
from robotad.mcp.config import McpServerConfig
from robotad.mcp.hub import McpHub
from robotad.providers.convert import anthropic_tools, openai_tools

from .http_servers import Answer, MisbehavingServer, serve_mcp

#: The opening of a raw stdio server: `send(message)` writes one JSON-RPC message, and
#: `serve(on_call, tools)` answers the handshake and passes each ``tools/call`` to `on_call`.
RAW_SERVER = """
import json, sys


def send(message):
    print(json.dumps({"jsonrpc": "2.0", **message}), flush=True)


def serve(on_call, tools):
    for line in sys.stdin:
        message = json.loads(line)
        mid, method = message.get("id"), message.get("method")
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw", "version": "1"},
            }
            send({"id": mid, "result": result})
        elif method == "tools/list":
            send({"id": mid, "result": {"tools": tools}})
        elif method == "tools/call":
            on_call(mid, message["params"]["name"])
        elif mid is not None:
            send({"id": mid, "result": {}})
"""

NO_ARGUMENTS = {"type": "object", "properties": {}}

#: `fail` is answered with JSON-RPC error -32000 (the SDK's code for a closed connection, and
#: JSON-RPC's first server error). The first `fail` is held until a `slow` call is in flight
#: too; then the error goes out first and the answer to `slow` after it.
ERRING_SERVER = (
    RAW_SERVER
    + f"""
held = {{}}
paired = []


def on_call(mid, name):
    held[name] = mid
    if "fail" not in held or ("slow" not in held and not paired):
        return
    error = {{"code": -32000, "message": "the index is offline"}}
    send({{"id": held.pop("fail"), "error": error}})
    if "slow" in held:
        text = {{"type": "text", "text": "slow answered"}}
        send({{"id": held.pop("slow"), "result": {{"content": [text]}}}})
        paired.append(True)


serve(on_call, [{{"name": "fail", "inputSchema": {NO_ARGUMENTS}}},
                {{"name": "slow", "inputSchema": {NO_ARGUMENTS}}}])
"""
)


async def run_tool(hub: McpHub, name: str, cwd: Path) -> ToolResult:
    """A call of the tool `name` (``mcp__SERVER__TOOL``) as a session makes it."""
    tools = {tool.name: tool for tool in await hub.for_session("s", []).tools()}
    return await tools[name].run({}, ToolContext(cwd=cwd, session_id="s"))


@asynccontextmanager
async def running_hub(tmp_path: Path, name: str, source: str) -> AsyncIterator[McpHub]:
    """A hub of one stdio server `name`, the Python program `source` (written under
    `tmp_path`), running for the block and closed after it."""
    script = tmp_path / f"{name}.py"
    script.write_text(source)
    hub = McpHub({name: McpServerConfig(command=sys.executable, args=[str(script)])})
    async with trio.open_nursery() as nursery:
        await nursery.start(hub.run)
        yield hub
        await hub.aclose()
        nursery.cancel_scope.cancel()


async def test_a_servers_own_error_32000_fails_its_call_alone(tmp_path: Path) -> None:
    """-32000 is the SDK's code for a connection that closed, and JSON-RPC's first server
    error, which servers answer a call with. Such an answer read as "the connection to the
    server closed": the server's words were lost, and the ready server was taken down and
    started again, failing the calls in flight on it (other sessions' too)."""
    script = tmp_path / "erring.py"
    script.write_text(ERRING_SERVER)
    hub = McpHub({"erring": McpServerConfig(command=sys.executable, args=[str(script)])})
    results: dict[str, ToolResult] = {}

    async def call(name: str) -> None:
        results[name] = await run_tool(hub, f"mcp__erring__{name}", tmp_path)

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(hub.run)
            (server,) = hub.daemon_servers()
            await server.ready()
            pid = server.pid
            async with trio.open_nursery() as calls:
                calls.start_soon(call, "slow")
                calls.start_soon(call, "fail")
            assert (
                results["fail"].content == "MCP server erring: error -32000: the index is offline"
            )
            assert not results["fail"].ok
            assert results["slow"].ok, results["slow"].content
            assert results["slow"].content == "slow answered"
            again = await run_tool(hub, "mcp__erring__fail", tmp_path)
            assert again.content == results["fail"].content
            assert (server.status, server.pid, server.error) == ("ready", pid, None)
            await hub.aclose()
            nursery.cancel_scope.cancel()


async def test_an_http_servers_own_error_32000_fails_its_call_alone(tmp_path: Path) -> None:
    """The same answer from a streamable-HTTP server: the call fails with the server's words,
    and the connection serves on."""
    error = b'{"jsonrpc": "2.0", "id": {id}, "error": {"code": -32000, "message": "no quota"}}'
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            web = await serve_mcp(nursery, Answer([error]))
            hub = McpHub({"web": McpServerConfig(url=web.url)})
            await nursery.start(hub.run)
            first = await run_tool(hub, "mcp__web__big", tmp_path)
            (server,) = hub.daemon_servers()
            await trio.testing.wait_all_tasks_blocked()
            assert (server.status, server.error) == ("ready", None)
            second = await run_tool(hub, "mcp__web__big", tmp_path)
            await hub.aclose()
            nursery.cancel_scope.cancel()
    assert first.content == second.content == "MCP server web: error -32000: no quota"
    assert len(web.call_headers) == 2


def _error_answer(status: int, code: int, message: str) -> Answer:
    """A refusal at `status` whose body is the JSON-RPC error `code`, `message`."""
    error = json.dumps({"code": code, "message": message}).encode()
    body = b'{"jsonrpc": "2.0", "id": {id}, "error": ' + error + b"}"
    return Answer([body], status=status)


#: How a server refuses a request naming a session it no longer knows: the MCP
#: specification's 404 (the Python SDK's body), and the 400 of the TypeScript SDK's examples.
FORGOTTEN = {
    "404": _error_answer(404, -32600, "Session not found"),
    "400": _error_answer(400, -32000, "Bad Request: No valid session ID provided"),
}
OK_ANSWER = (
    b'{"jsonrpc": "2.0", "id": {id}, "result": {"content": [{"type": "text", "text": "ok"}]}}'
)


async def _call_twice_over_http(
    tmp_path: Path, *answers: Answer
) -> tuple[list[ToolResult], MisbehavingServer, McpServerEntry]:
    """Two calls of `big` on a server with sessions answering `answers`: their results, the
    server, and its ``mcp/list`` entry after them."""
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            web = await serve_mcp(nursery, *answers, sessions=True)
            hub = McpHub({"web": McpServerConfig(url=web.url)})
            await nursery.start(hub.run)
            results = [await run_tool(hub, "mcp__web__big", tmp_path) for _ in range(2)]
            (entry,) = await hub.listing()
            await hub.aclose()
            nursery.cancel_scope.cancel()
    return results, web, entry


@pytest.mark.parametrize("status", sorted(FORGOTTEN))
async def test_a_call_refused_for_a_forgotten_session_is_made_on_a_new_one(
    tmp_path: Path, status: str
) -> None:
    """An HTTP server that restarted no longer knows robotad's session and refuses every
    request naming it. robotad kept that session: every later call failed ("error -32600:
    Session not found") while ``robotactl mcp`` said the server was ready, until robotad
    itself restarted. The refused call is made again on a new session, and so are the next."""
    ok = Answer([OK_ANSWER])
    (first, second), web, entry = await _call_twice_over_http(tmp_path, FORGOTTEN[status], ok)
    assert (first.ok, first.content) == (True, "ok")
    assert (second.ok, second.content) == (True, "ok")
    sessions = [headers.get("mcp-session-id") for headers in web.call_headers]
    assert sessions == ["s1", "s2", "s2"]
    assert entry.status == "ready"
    assert str(entry.error).startswith("the server no longer knows robotad's session (HTTP")


async def test_a_server_forgetting_every_session_fails_the_call_after_one_more_try(
    tmp_path: Path,
) -> None:
    """Made again once, never more: a server refusing every session fails the call saying
    why, and the next call tries a new session again."""
    (first, second), web, _ = await _call_twice_over_http(tmp_path, FORGOTTEN["404"])
    reason = "the server no longer knows robotad's session (HTTP 404 X: Session not found)"
    assert (first.ok, first.content) == (False, f"MCP server web: {reason}")
    assert (second.ok, second.content) == (False, f"MCP server web: {reason}")
    assert [headers.get("mcp-session-id") for headers in web.call_headers] == [
        "s1",
        "s2",
        "s3",
        "s4",
    ]


async def test_another_refusal_of_a_call_keeps_the_session(tmp_path: Path) -> None:
    """A 400 that speaks of no session (the server refused the arguments) is the call's own
    failure: it is not made again, and the session serves on."""
    refused = _error_answer(400, -32602, "Invalid params: q is required")
    (first, second), web, entry = await _call_twice_over_http(
        tmp_path, refused, Answer([OK_ANSWER])
    )
    assert (first.ok, first.content) == (
        False,
        "MCP server web: error -32602: Invalid params: q is required",
    )
    assert (second.ok, second.content) == (True, "ok")
    assert [headers.get("mcp-session-id") for headers in web.call_headers] == ["s1", "s1"]
    assert (entry.status, entry.error) == ("ready", UNSET)


async def test_an_http_answer_whose_event_stream_ends_empty_fails_its_call_alone(
    tmp_path: Path,
) -> None:
    """The SDK fails a request whose event stream ended without its answer with the same
    code, -32000: that took the connection down too, failing the other calls in flight on
    it, though one request whose connection breaks fails alone (decision 41)."""
    answer = (
        b'{"jsonrpc": "2.0", "id": {id}, "result": {"content": [{"type": "text", "text": "ok"}]}}'
    )
    released = trio.Event()
    event = b"event: message\ndata: " + answer + b"\n\n"
    patient = Answer([event], "text/event-stream", after=released)
    ended = Answer([b": nothing for you\n\n"], "text/event-stream")
    results: dict[str, ToolResult] = {}
    answered = trio.Event()

    async def call_patiently(hub: McpHub) -> None:
        results["patient"] = await run_tool(hub, "mcp__web__big", tmp_path)
        answered.set()

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            web = await serve_mcp(nursery, patient, ended)
            hub = McpHub({"web": McpServerConfig(url=web.url)})
            await nursery.start(hub.run)
            nursery.start_soon(call_patiently, hub)
            await patient.arrived.wait()
            results["ended"] = await run_tool(hub, "mcp__web__big", tmp_path)
            released.set()
            await answered.wait()
            (server,) = hub.daemon_servers()
            status = (server.status, server.error)
            await hub.aclose()
            nursery.cancel_scope.cancel()
    assert results["ended"].content == (
        "MCP server web: no answer came: SSE stream ended without a response"
    )
    assert results["patient"].content == "ok"
    assert status == ("ready", None)


#: A tool without arguments as the official Go SDK lists it, and one with arguments.
GO_STYLE_SERVER = (
    RAW_SERVER
    + """
SEARCH = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
CLOSED = {"type": "object", "additionalProperties": False}


def on_call(mid, name):
    send({"id": mid, "result": {"content": [{"type": "text", "text": "called " + name}]}})


serve(on_call, [{"name": "whoami", "inputSchema": {"type": "object"}},
                {"name": "closed", "inputSchema": CLOSED},
                {"name": "search", "inputSchema": SEARCH}])
"""
)


async def test_an_object_schema_without_properties_is_offered_with_empty_ones(
    tmp_path: Path,
) -> None:
    """OpenAI refuses a function whose parameters are an object schema without `properties`
    ("object schema missing properties"), and with it the whole request: every turn of a
    session offered such a tool (the Go SDK lists every tool without arguments so) failed.
    It is offered with empty ones, to every provider; the rest of a schema is the server's."""
    with trio.fail_after(60):
        async with running_hub(tmp_path, "go", GO_STYLE_SERVER) as hub:
            tools = await hub.for_session("s", []).tools()
            called = await run_tool(hub, "mcp__go__whoami", tmp_path)
    schemas = [tool.schema for tool in tools]
    parameters = {f["function"]["name"]: f["function"]["parameters"] for f in openai_tools(schemas)}
    assert parameters == {
        "mcp__go__whoami": {"type": "object", "properties": {}},
        "mcp__go__closed": {"type": "object", "additionalProperties": False, "properties": {}},
        "mcp__go__search": {
            "type": "object",
            "properties": {"q": {"type": "string"}},
            "required": ["q"],
        },
    }
    assert [tool["input_schema"] for tool in anthropic_tools(schemas)] == list(parameters.values())
    assert called.content == "called whoami"
    assert hub.daemon_servers()[0].tools[0].input_schema == {"type": "object"}  # the server's


#: Prints `NOISE` lines that are not JSON-RPC on stdout as it works (a stray ``print``), then
#: answers.
NOISE = 500
CHATTY_SERVER = (
    RAW_SERVER
    + f"""
def on_call(mid, name):
    for n in range({NOISE}):
        print("working on it", n)
    send({{"id": mid, "result": {{"content": [{{"type": "text", "text": "done"}}]}}}})


serve(on_call, [{{"name": "chatty", "inputSchema": {NO_ARGUMENTS}}}])
"""
)


async def test_stdout_lines_that_are_not_json_rpc_are_logged_at_a_bounded_rate(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Each was a warning of its own: a server printing as it works filled robotad's log (and
    the journal, whose rate limit then drops robotad's own lines), while its stderr was bounded.
    At most 200 a minute now, then how many more were skipped; the answer comes through.
    Everything happens within the first minute: the test's own bound is shorter."""
    with trio.fail_after(50), caplog.at_level(logging.WARNING, logger="robotad.mcp"):
        async with running_hub(tmp_path, "chatty", CHATTY_SERVER) as hub:
            result = await run_tool(hub, "mcp__chatty__chatty", tmp_path)
    assert result.content == "done"
    said = [record.getMessage() for record in caplog.records]
    skipped = [record for record in caplog.records if record.getMessage() == said[0]]
    assert said[0] == "skipped a stdout line that is not JSON-RPC"
    assert [record.robota_fields["line"] for record in skipped] == [
        f"working on it {n}" for n in range(200)
    ]
    assert said[200:] == [
        f"skipped {NOISE - 200} more stdout lines that are not JSON-RPC without logging them "
        "(over 200 a minute)"
    ]
