"""A call to an MCP server over streamable HTTP that outlives its tool timeout fails alone, at
that timeout, and its request is abandoned with it (decision 41). The SDK left the request's
POST waiting until the HTTP client's own read timeout (300 s), which then tore down the whole
connection; it waited for the server to answer the call's ``notifications/cancelled`` before
sending anything else; and a dripping answer kept the abandoned request reading. Against a
loopback server (`tests.mcp.http_servers`) on trio's autojump clock: what is checked is what
happened (the server's status, the calls' results, the bytes the server got to send), never
how long it took."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from robotad.agent.tool import ToolContext, ToolResult
from robotad.mcp.config import McpServerConfig, spec_of_config
from robotad.mcp.connection import Connection, ServerFailed, connect
from robotad.mcp.hub import McpHub

from .http_servers import Answer, serve_mcp

TOOL_TIMEOUT_MS = 5000
TIMED_OUT = f"MCP server web: did not answer within {TOOL_TIMEOUT_MS} ms"
ANSWER = b'{"jsonrpc": "2.0", "id": {id}, "result": {"content": [{"type": "text", "text": "ok"}]}}'
#: Past the SDK's HTTP client's read timeout (300 s), in the mock clock's seconds.
LONG_AFTER = 400.0


def web(url: str) -> McpServerConfig:
    return McpServerConfig(url=url, tool_timeout_ms=TOOL_TIMEOUT_MS)


async def call(hub: McpHub, session: str, tmp_path: Path) -> ToolResult:
    (tool,) = await hub.for_session(session, []).tools()
    return await tool.run({}, ToolContext(cwd=tmp_path, session_id=session))


async def test_a_call_never_answered_fails_alone_and_its_request_is_abandoned(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The call failed at its tool timeout, but its POST waited on: 300 s later the HTTP
    client's ReadTimeout tore down the transport, the server became ``failed`` with the error
    "ReadTimeout", and a call in flight then failed as "the connection to the server closed".
    Now the POST is abandoned with its call (the server sees the client go), and the server,
    and the call in flight past the 300 s, carry on."""
    released = trio.Event()
    silent = Answer([], silent=True)
    patient = Answer([ANSWER], after=released)
    results: dict[str, ToolResult] = {}

    async def call_patiently(hub: McpHub) -> None:
        results["patient"] = await call(hub, "patient", tmp_path)

    with trio.fail_after(2 * LONG_AFTER):
        async with trio.open_nursery() as nursery:
            server = await serve_mcp(nursery, silent, patient)
            hub = McpHub({"web": web(server.url)})
            await nursery.start(hub.run)
            results["silent"] = await call(hub, "silent", tmp_path)
            await trio.sleep(1)
            abandoned = silent.done.is_set()
            await trio.sleep(LONG_AFTER - 3)
            nursery.start_soon(call_patiently, hub)
            await patient.arrived.wait()
            await trio.sleep(4)
            released.set()
            await patient.done.wait()
            await trio.sleep(1)
            (server_web,) = hub.daemon_servers()
            status, error = server_web.status, server_web.error
            await hub.aclose()
            nursery.cancel_scope.cancel()
    assert results["silent"].content == TIMED_OUT
    assert abandoned
    assert (status, error) == ("ready", None)
    assert results["patient"].ok, results["patient"].content


async def test_a_cancel_the_server_never_answers_holds_up_no_later_call(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """After a call timed out, the SDK posted its ``notifications/cancelled`` and sent nothing
    else until the server answered that POST: the next call, from another session, waited
    295 s instead of its 5 s, then failed as "the connection to the server closed". Now the
    cancel goes out beside the calls, and the next call is answered."""
    silent = Answer([], silent=True)
    prompt = Answer([ANSWER])
    with trio.fail_after(2 * LONG_AFTER):
        async with trio.open_nursery() as nursery:
            server = await serve_mcp(nursery, silent, prompt, answer_cancels=False)
            hub = McpHub({"web": web(server.url)})
            await nursery.start(hub.run)
            first = await call(hub, "first", tmp_path)
            second = await call(hub, "second", tmp_path)
            await hub.aclose()
            nursery.cancel_scope.cancel()
    assert first.content == TIMED_OUT
    assert second.ok, second.content
    assert len(server.cancelled) == 1


class _Unanswering:
    """An SDK session whose call never ends, whatever its timeout says."""

    async def call_tool(self, name: str, arguments: dict[str, Any], **_: Any) -> Any:
        await trio.sleep_forever()


async def test_a_call_ends_at_its_tool_timeout_whatever_the_sdk_does(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The SDK starts a request's clock only once the transport took the request: a transport
    that does not take it (its writer stuck on an earlier message) held the call without
    bound. The tool timeout counts from the call."""
    connection = Connection(_Unanswering(), None)  # type: ignore[arg-type]
    with trio.fail_after(LONG_AFTER), pytest.raises(ServerFailed) as failed:
        await connection.call("tool", {}, TOOL_TIMEOUT_MS / 1000)
    assert failed.value.reason == f"did not answer within {TOOL_TIMEOUT_MS} ms"


DRIPS = 3600


@pytest.mark.parametrize("content_type", ["application/json", "text/event-stream"])
async def test_an_answer_that_drips_is_abandoned_with_its_call(
    content_type: str, autojump_clock: trio.testing.MockClock
) -> None:
    """A byte a second never trips a read timeout: the SDK went on reading a timed-out call's
    answer for as long as the server dripped it (all of it). Now its reading stops with the
    call: the server got to send a few of its drips."""
    opening = b'{"jsonrpc": "2.0", "id": {id}, "result": {"content": [{"type": "text", "text": "'
    if content_type == "text/event-stream":
        opening = b"event: message\ndata: " + opening
    drip = Answer(
        itertools.chain([opening], itertools.repeat(b"x", DRIPS)), content_type, interval=1.0
    )
    with trio.fail_after(2 * DRIPS):
        async with trio.open_nursery() as nursery:
            server = await serve_mcp(nursery, drip)
            spec = spec_of_config("web", web(server.url))
            async with connect(spec, lambda: None) as connection:
                with pytest.raises(ServerFailed) as failed:
                    await connection.call("big", {}, spec.tool_timeout)
                await drip.done.wait()
            nursery.cancel_scope.cancel()
    assert failed.value.reason == f"did not answer within {TOOL_TIMEOUT_MS} ms"
    assert server.sent - len(opening) < DRIPS // 10


async def test_a_call_the_server_hangs_up_on_fails_alone(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A POST that failed (the server closed its connection without answering) raised in the
    SDK's task group: the transport went down, and with it another session's call in flight.
    Now that call fails alone, saying so; the other is answered and the server stays ready."""
    released = trio.Event()
    patient = Answer([ANSWER], after=released)
    hung_up = Answer([], hang_up=True)
    results: dict[str, ToolResult] = {}

    async def call_patiently(hub: McpHub) -> None:
        results["patient"] = await call(hub, "patient", tmp_path)

    with trio.fail_after(LONG_AFTER):
        async with trio.open_nursery() as nursery:
            server = await serve_mcp(nursery, patient, hung_up)
            hub = McpHub({"web": web(server.url)})
            await nursery.start(hub.run)
            nursery.start_soon(call_patiently, hub)
            await patient.arrived.wait()
            results["hung up"] = await call(hub, "hung up", tmp_path)
            released.set()
            await patient.done.wait()
            await trio.sleep(1)
            (server_web,) = hub.daemon_servers()
            status = server_web.status
            await hub.aclose()
            nursery.cancel_scope.cancel()
    assert results["hung up"].content == (
        "MCP server web: the connection to the server broke before it answered: "
        "Server disconnected without sending a response."
    )
    assert results["patient"].ok, results["patient"].content
    assert status == "ready"


async def test_a_request_without_a_timeout_of_its_own_ends_at_the_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A request the SDK sends with no timeout and never cancels (robotad re-reads a tool
    list so) waited for the HTTP client's read timeout, which then took the connection down.
    Its POST ends at the longer of the server's tool and startup timeouts (10 s here), and the
    request alone fails, saying so."""
    from mcp.shared.exceptions import MCPError

    with trio.fail_after(LONG_AFTER):
        async with trio.open_nursery() as nursery:
            server = await serve_mcp(nursery, Answer([], silent=True), Answer([ANSWER]))
            spec = spec_of_config("web", web(server.url))
            async with connect(spec, lambda: None) as connection:
                with pytest.raises(MCPError) as failed:
                    await connection.session.call_tool("big", {})
                after = await connection.call("big", {}, spec.tool_timeout)
            nursery.cancel_scope.cancel()
    assert "did not answer within 10000 ms" in failed.value.message
    assert after.content[0].text == "ok"
