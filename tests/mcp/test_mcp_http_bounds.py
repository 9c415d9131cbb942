"""What an MCP server over streamable HTTP may make robotad hold (decision 39): an answer, an
event or a line without end, or a compressed answer that unpacks to any size, fails its call
naming the server and what was too large, instead of growing the daemon that holds every
session; the server's other calls carry on. Against a loopback server
(`tests.mcp.http_servers`) that sends past the bound up to a cap: the bytes it got to send
measure what robotad read (without the bounds, all of them)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from robotad.agent.tool import ToolContext, ToolResult
from robotad.http_bounds import MAX_MESSAGE_BYTES
from robotad.mcp.config import McpServerConfig, spec_of_config
from robotad.mcp.connection import ServerFailed, connect
from robotad.mcp.hub import McpHub

from .http_servers import Answer, MisbehavingServer, serve_mcp, sse_event

#: What an endless answer sends at most: three bounds. What robotad reads stops at one; the
#: loopback socket buffers (a few MiB) hold some more, never another bound's worth.
CAP = 3 * MAX_MESSAGE_BYTES
PIECE = 64 * 1024
JSON_OPENING = b'{"jsonrpc": "2.0", "id": {id}, "result": {"content": [{"type": "text", "text": "'
JSON_CLOSING = b'"}]}}'


def endless(opening: bytes, filler: bytes) -> Iterator[bytes]:
    """`opening`, then `filler` until `CAP` bytes are sent."""
    yield opening
    for _ in range((CAP - len(opening)) // len(filler)):
        yield filler


async def call_failure(*answers: Answer) -> tuple[str, MisbehavingServer]:
    """Why a call of the server answering `answers` failed, and the server."""
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            server = await serve_mcp(nursery, *answers)
            spec = spec_of_config("web", McpServerConfig(url=server.url))
            with pytest.raises(ServerFailed) as failed:
                async with connect(spec, lambda: None) as connection:
                    await connection.call("big", {}, spec.tool_timeout)
            nursery.cancel_scope.cancel()
    return failed.value.reason, server


TOO_LONG = (
    "the server sent {} longer than 16 MiB without ending it: no event stream robotad can read"
)


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        pytest.param(
            Answer(endless(JSON_OPENING, b"x" * PIECE)),
            "the server sent an answer longer than 16 MiB: more than robotad holds of one message",
            id="json",
        ),
        pytest.param(
            Answer(endless(b'{"jsonrpc": "2.0", "id": {id}, "result": [\n', b" \n" * PIECE)),
            "the server sent an answer longer than 16 MiB: more than robotad holds of one message",
            id="json-of-short-lines",
        ),
        pytest.param(
            Answer(
                endless(b"event: message\n", b"data: " + b"y" * (PIECE - 7) + b"\n"),
                "text/event-stream",
            ),
            TOO_LONG.format("an event"),
            id="event-of-short-lines",
        ),
        pytest.param(
            Answer(endless(b"event: message\ndata: ", b"z" * PIECE), "text/event-stream"),
            TOO_LONG.format("a line"),
            id="line",
        ),
    ],
)
async def test_an_answer_without_end_fails_its_call_at_the_bound(
    answer: Answer, reason: str
) -> None:
    """The SDK reads a JSON answer whole (short lines or not), so one without end grew robotad
    until the server stopped; an event stream's event or line it cut at 1 MiB but told the
    call only that "the connection to the server closed"."""
    failure, server = await call_failure(answer)
    assert failure == reason
    assert server.sent < 2 * MAX_MESSAGE_BYTES


async def test_answers_are_asked_for_uncompressed_and_a_compressed_one_is_refused() -> None:
    """A gzip bomb: 48 MiB of result in 48 KiB, which the SDK unpacked whole."""
    bomb = Answer([JSON_OPENING, b"b" * CAP, JSON_CLOSING], gzip=True)
    failure, server = await call_failure(bomb)
    assert server.call_headers[0]["accept-encoding"] == "identity"
    assert failure == (
        "the server compressed its answer (gzip) though asked not to: robotad reads answers "
        "uncompressed, so that it can bound what it holds"
    )


@pytest.mark.parametrize("content_type", ["application/json", "text/event-stream"])
async def test_a_result_under_the_bound_arrives_whole_either_way(content_type: str) -> None:
    """The SDK cut an event at 1 MiB: a 2 MiB result that arrives from a stdio server, or as
    JSON, failed as an event. Both arrive, in small pieces, with line breaks of every kind."""
    text = "r" * (2 << 20)
    message = {"jsonrpc": "2.0", "id": 0, "result": {"content": [{"type": "text", "text": text}]}}
    body = json.dumps(message).encode().replace(b'"id": 0', b'"id": {id}', 1)
    if content_type == "text/event-stream":
        body = b": hello\r\n\r\n" + sse_event({}).replace(b"data: {}", b"data: " + body)
    pieces = [body[i : i + 1000] for i in range(0, len(body), 1000)]
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            server = await serve_mcp(nursery, Answer(pieces, content_type))
            spec = spec_of_config("web", McpServerConfig(url=server.url))
            async with connect(spec, lambda: None) as connection:
                result = await connection.call("big", {}, spec.tool_timeout)
            nursery.cancel_scope.cancel()
    assert result.content[0].text == text


async def test_a_refused_answer_fails_one_call_and_the_server_serves_on(tmp_path: Path) -> None:
    """Two sessions share a daemon server: one call's answer is too large, the other's comes
    after. The failure names the server and the bound; the other call, the connection and the
    server carry on (the SDK's own cut had said the connection closed, and robotad took the
    server down, the other call with it)."""
    released = trio.Event()
    patient = Answer([b'{"jsonrpc": "2.0", "id": {id}, "result": {"content": []}}'], after=released)
    flood = Answer(endless(b"event: message\n", b"data: y\n" * (PIECE // 8)), "text/event-stream")
    results: dict[str, ToolResult] = {}
    patient_done = trio.Event()

    async def call(hub: McpHub, session: str) -> None:
        (tool,) = await hub.for_session(session, []).tools()
        results[session] = await tool.run({}, ToolContext(cwd=tmp_path, session_id=session))

    async def call_patiently(hub: McpHub) -> None:
        await call(hub, "patient")
        patient_done.set()

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            server = await serve_mcp(nursery, patient, flood)
            hub = McpHub({"web": McpServerConfig(url=server.url)})
            await nursery.start(hub.run)
            nursery.start_soon(call_patiently, hub)
            await patient.arrived.wait()
            await call(hub, "flooded")
            released.set()
            await patient_done.wait()
            (web,) = hub.daemon_servers()
            status = web.status
            await hub.aclose()
            nursery.cancel_scope.cancel()
    assert results["patient"].ok, results["patient"].content
    assert status == "ready"
    assert results["flooded"].content == "MCP server web: " + TOO_LONG.format("an event")
