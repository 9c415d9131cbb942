"""Answers the SDK refuses, and error answers under its own codes, as robotad says them
(decision 69).

Against tiny raw JSON-RPC stdio servers (`tests.mcp.test_mcp_server_answers.RAW_SERVER`), so
they can answer as no server of the official SDK would.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import trio

from .test_mcp_server_answers import NO_ARGUMENTS, RAW_SERVER, run_tool, running_hub

#: Lists `search`, whose input schema has no ``type`` (the SDK's model requires it), between
#: two usable tools, and a tool whose name is no string.
LAX_SERVER = (
    RAW_SERVER
    + f"""
def on_call(mid, name):
    send({{"id": mid, "result": {{"content": [{{"type": "text", "text": "called " + name}}]}}}})


serve(on_call, [{{"name": "first", "inputSchema": {NO_ARGUMENTS}}},
                {{"name": "search", "inputSchema": {{"properties": {{"q": {{}}}}}}}},
                {{"name": 7, "inputSchema": {NO_ARGUMENTS}}},
                {{"name": "last", "inputSchema": {NO_ARGUMENTS}}}])
"""
)
SEARCH_LEFT_OUT = 'tool left out: tools[1] ("search").inputSchema.type: Field required'
NUMBER_LEFT_OUT = "tool left out: tools[2].name: Input should be a valid string, got 7"


async def test_a_tool_the_sdk_refuses_is_left_out_and_the_others_offered(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """One tool whose ``inputSchema`` lacked ``type`` made the whole server fail with
    "ValidationError: 1 validation error for ListToolsResult", naming no tool: every tool of
    the server was lost. Its other tools are offered now, and the one left out is named with
    why: in the log, in ``mcp/list`` and to a call of it."""
    with trio.fail_after(60), caplog.at_level(logging.WARNING, logger="robotad.mcp"):
        async with running_hub(tmp_path, "lax", LAX_SERVER) as hub:
            session = hub.for_session("s", [])
            offered = [tool.name for tool in await session.tools()]
            called = await run_tool(hub, "mcp__lax__last", tmp_path)
            (entry,) = await hub.listing()
            missing = session.missing_reason("mcp__lax__search")
    assert offered == ["mcp__lax__first", "mcp__lax__last"]
    assert called.ok, called.content
    assert called.content == "called last"
    assert (entry.status, entry.tools) == ("ready", offered)
    assert entry.error == f"{SEARCH_LEFT_OUT}; {NUMBER_LEFT_OUT}"
    assert missing == f"MCP server lax: {SEARCH_LEFT_OUT}"
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == [
        "mcp server tool left out: " + SEARCH_LEFT_OUT.removeprefix("tool left out: "),
        "mcp server tool left out: " + NUMBER_LEFT_OUT.removeprefix("tool left out: "),
    ]


#: Answers `broken` with a result of five problems (a text block without text, an image
#: whose data is a number, a kind no MCP content has, and an `isError` that is no boolean),
#: `kindless` with one whose block has an unknown kind, and `late` with its own JSON-RPC
#: error -32001, the code the SDK reports its own timeout with.
ODD_SERVER = (
    RAW_SERVER
    + f"""
BROKEN = {{
    "content": [
        {{"type": "text"}},
        {{"type": "image", "data": 3, "mimeType": "image/png"}},
        {{"type": "video", "data": "x" * 10000}},
    ],
    "isError": "perhaps",
}}


def on_call(mid, name):
    if name == "broken":
        send({{"id": mid, "result": BROKEN}})
    elif name == "kindless":
        send({{"id": mid, "result": {{"content": [{{"type": "video", "data": "x"}}]}}}})
    else:
        error = {{"code": -32001, "message": "the upstream index timed out"}}
        send({{"id": mid, "error": error}})


serve(on_call, [{{"name": name, "inputSchema": {NO_ARGUMENTS}}}
                for name in ("broken", "kindless", "late")])
"""
)


async def test_a_malformed_call_result_says_which_member_and_what(tmp_path: Path) -> None:
    """It said only "unusable answer: ValidationError: 26 validation errors for
    CallToolResult": the model and the user saw no member and no problem. Now the first
    three, located and bounded, the rest counted; a union member (a content block) is the
    one its ``type`` names. The server serves on."""
    with trio.fail_after(60):
        async with running_hub(tmp_path, "odd", ODD_SERVER) as hub:
            broken = await run_tool(hub, "mcp__odd__broken", tmp_path)
            kindless = await run_tool(hub, "mcp__odd__kindless", tmp_path)
            (server,) = hub.daemon_servers()
            status = (server.status, server.error)
    assert not broken.ok
    assert broken.content == (
        "MCP server odd: unusable answer: not a valid CallToolResult: "
        "content[0].text: Field required; "
        "content[1].data: Input should be a valid string, got 3; "
        "content[2].type: Input should be one of 'text', 'image', 'audio', 'resource_link', "
        "'resource', got 'video' (and 1 more)"
    )
    assert kindless.content == (
        "MCP server odd: unusable answer: not a valid CallToolResult: "
        "content[0].type: Input should be one of 'text', 'image', 'audio', 'resource_link', "
        "'resource', got 'video'"
    )
    assert status == ("ready", None)


async def test_a_servers_own_error_32001_is_quoted_not_taken_for_a_timeout(
    tmp_path: Path,
) -> None:
    """-32001 is the code the SDK reports its own timeout with, and a server may answer a
    call with it too: that answer read "did not answer within 60000 ms", the server's words
    lost, though it had answered at once."""
    with trio.fail_after(60):
        async with running_hub(tmp_path, "odd", ODD_SERVER) as hub:
            late = await run_tool(hub, "mcp__odd__late", tmp_path)
    assert not late.ok
    assert late.content == "MCP server odd: error -32001: the upstream index timed out"


async def test_the_sdks_own_timeout_says_what_connection_reads_as_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """`Connection` takes a -32001 for the SDK's own timeout only in the SDK's words for
    one; the SDK is pinned, and this fails if those words change (a timeout would then be
    quoted as a server's error)."""
    import anyio
    from mcp.shared.exceptions import MCPError
    from mcp_types import REQUEST_TIMEOUT

    from robotad.mcp.connection import _SDK_TIMED_OUT
    from robotad.mcp.screening import ScreeningDispatcher

    # A server that reads nothing and never answers.
    answers, from_server = anyio.create_memory_object_stream[object](1)
    to_server, requests = anyio.create_memory_object_stream[object](1)
    dispatcher = ScreeningDispatcher(from_server, to_server)

    async def ignore(*_: object) -> None:
        return None

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(dispatcher.run, ignore, ignore)
            with pytest.raises(MCPError) as timed_out:
                await dispatcher.send_raw_request("tools/call", {"name": "x"}, {"timeout": 5})
            nursery.cancel_scope.cancel()
    for stream in (answers, from_server, to_server, requests):
        stream.close()
    assert (timed_out.value.code, timed_out.value.message) == (REQUEST_TIMEOUT, _SDK_TIMED_OUT)
