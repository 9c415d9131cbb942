"""JSON-RPC 2.0 conformance over a real Unix socket, in both framings (PROTOCOL.md §2).

Every test runs once with NDJSON and once with Content-Length framing against the real
`serve_daemon`, whose router also holds a few test-only methods (see `server_harness`). The
JSON-RPC 2.0 specification's examples use positional params; this protocol takes named params
only, so the examples' ``subtract``/``sum`` are registered with named parameters.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any

import pytest
import trio

from protocol.framing import Framing, encode_frame
from robotad.server.app import SessionCounts
from tests.server.server_harness import (
    IO_TIMEOUT,
    SECRET,
    ProbeApp,
    RawClient,
    assert_response,
    error_code,
    running_daemon,
)

STATUS = {"jsonrpc": "2.0", "id": "probe", "method": "daemon/status"}


@pytest.fixture(params=["ndjson", "content-length"])
def framing(request: pytest.FixtureRequest) -> Framing:
    value: Framing = request.param
    return value


async def assert_no_reply_then_probe(client: RawClient) -> None:
    """Prove that nothing was answered before this point: the next reply is the probe's."""
    await client.send(STATUS)
    reply = await client.receive()
    assert reply["id"] == "probe", reply
    assert "result" in reply


async def test_spec_examples_single_messages(framing: Framing) -> None:
    async with running_daemon() as daemon:
        client = await RawClient.connect(daemon.socket_path, framing)
        named = {"subtrahend": 23, "minuend": 42}
        await client.send({"jsonrpc": "2.0", "method": "subtract", "params": named, "id": 3})
        assert await client.receive() == {"jsonrpc": "2.0", "result": 19, "id": 3}

        await client.send({"jsonrpc": "2.0", "method": "update", "params": {"a": [1, 2]}})
        await client.send({"jsonrpc": "2.0", "method": "foobar"})  # unknown notification
        await assert_no_reply_then_probe(client)

        await client.send({"jsonrpc": "2.0", "method": "foobar", "id": "1"})
        reply = await client.receive()
        assert error_code(reply) == -32601
        assert reply["id"] == "1"

        await client.send(b'{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]')
        reply = await client.receive()
        assert error_code(reply) == -32700
        assert reply["id"] is None

        await client.send({"jsonrpc": "2.0", "method": 1, "params": "bar"})
        reply = await client.receive()
        assert error_code(reply) == -32600
        assert reply["id"] is None

        await assert_no_reply_then_probe(client)  # none of that closed the connection


async def test_spec_examples_batches(framing: Framing) -> None:
    async with running_daemon() as daemon:
        client = await RawClient.connect(daemon.socket_path, framing)
        await client.send(
            b'[{"jsonrpc": "2.0", "method": "sum", "params": {"values": [1,2,4]}, "id": "1"},'
            b'{"jsonrpc": "2.0", "method"]'
        )
        reply = await client.receive()
        assert error_code(reply) == -32700
        assert reply["id"] is None

        await client.send([])
        reply = await client.receive()
        assert isinstance(reply, dict)
        assert error_code(reply) == -32600
        assert reply["id"] is None

        await client.send([1])
        reply = await client.receive()
        assert isinstance(reply, list)
        assert [error_code(r) for r in reply] == [-32600]

        await client.send([1, 2, 3])
        reply = await client.receive()
        assert [(error_code(r), r["id"]) for r in reply] == [(-32600, None)] * 3

        await client.send(
            [
                {"jsonrpc": "2.0", "method": "sum", "params": {"values": [1, 2, 4]}, "id": "1"},
                {"jsonrpc": "2.0", "method": "notify_hello", "params": {"x": 7}},
                {
                    "jsonrpc": "2.0",
                    "method": "subtract",
                    "params": {"minuend": 42, "subtrahend": 23},
                    "id": "2",
                },
                {"foo": "boo"},
                {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
                {"jsonrpc": "2.0", "method": "get_data", "id": "9"},
                {"jsonrpc": "2.0", "method": "test/echo", "params": {"value": [1]}, "id": 10},
            ]
        )
        reply = await client.receive()
        assert isinstance(reply, list)
        for element in reply:
            assert_response(element)
        by_id = {r["id"]: r for r in reply if r["id"] is not None}
        assert len(reply) == 6
        assert by_id["1"]["result"] == 7
        assert by_id["2"]["result"] == 19
        assert by_id["5"]["error"]["code"] == -32601
        assert by_id["9"]["result"] == ["hello", 5]
        assert by_id[10]["result"] == {"value": [1]}
        assert [r["error"]["code"] for r in reply if r["id"] is None] == [-32600]

        await client.send(
            [
                {"jsonrpc": "2.0", "method": "notify_sum", "params": {"v": [1, 2, 4]}},
                {"jsonrpc": "2.0", "method": "notify_hello", "params": {"v": [7]}},
            ]
        )
        await assert_no_reply_then_probe(client)


async def test_ids_strings_and_integers_only(framing: Framing) -> None:
    async with running_daemon() as daemon:
        client = await RawClient.connect(daemon.socket_path, framing)
        for request_id in ("abc", "", 0, -5, 2**53 + 1):
            reply = await client.call("test/null", request_id=request_id)
            assert reply == {"jsonrpc": "2.0", "id": request_id, "result": None}
        for bad_id in (True, False, 1.5, 2.0, None, [1], {"a": 1}):
            reply = await client.call("daemon/status", request_id=bad_id)
            assert error_code(reply) == -32600, bad_id
            assert reply["id"] is None
        await assert_no_reply_then_probe(client)


async def test_params_absent_null_or_named(framing: Framing) -> None:
    """G-215: absent or null params mean {}; every invalid parameter is listed with its path."""
    async with running_daemon() as daemon:
        client = await RawClient.connect(daemon.socket_path, framing)
        absent = await client.call("daemon/status")
        await client.send({"jsonrpc": "2.0", "id": 2, "method": "daemon/status", "params": None})
        explicit_null = await client.receive()
        assert "result" in absent
        assert "result" in explicit_null

        reply = await client.call("subtract", {"minuend": "x", "subtrahend": True}, request_id=3)
        assert error_code(reply) == -32602
        paths = sorted(issue["path"] for issue in reply["error"]["data"]["issues"])
        assert paths == ["$.minuend", "$.subtrahend"]

        reply = await client.call("daemon/status", {"verbose": True}, request_id=4)
        assert error_code(reply) == -32602
        assert reply["error"]["data"]["issues"][0]["path"] == "$.verbose"

        reply = await client.call("subtract", [42, 23], request_id=5)
        assert error_code(reply) == -32602
        reply = await client.call("daemon/status", "bar", request_id=6)
        assert error_code(reply) == -32600
        assert reply["id"] == 6


async def test_responses_and_unknown_dollar_notifications_are_ignored(framing: Framing) -> None:
    async with running_daemon() as daemon:
        client = await RawClient.connect(daemon.socket_path, framing)
        await client.send({"jsonrpc": "2.0", "id": 99, "result": {"x": 1}})
        await client.send({"jsonrpc": "2.0", "id": "zz", "error": {"code": 1, "message": "m"}})
        await client.send({"jsonrpc": "2.0", "method": "$/setTrace", "params": {"v": "off"}})
        await client.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 404}})
        await assert_no_reply_then_probe(client)


async def test_cancel_request_is_answered_at_once(framing: Framing) -> None:
    """A cancelled request gets -32800 while its handler would otherwise wait forever; the
    handler is really cancelled and the connection stays usable."""
    async with running_daemon() as daemon:
        client = await RawClient.connect(daemon.socket_path, framing)
        await client.send(
            {"jsonrpc": "2.0", "id": 7, "method": "test/wait", "params": {"gate": "g"}}
        )
        await client.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 7}})
        reply = await client.receive()
        assert error_code(reply) == -32800
        assert reply["id"] == 7
        with trio.fail_after(IO_TIMEOUT):
            await daemon.app.cancelled.setdefault("g", trio.Event()).wait()
        await assert_no_reply_then_probe(client)
        daemon.app.gate("g").set()  # nothing may answer id 7 a second time
        await assert_no_reply_then_probe(client)


async def test_handler_failure_is_internal_error_without_detail(framing: Framing) -> None:
    async with running_daemon() as daemon:
        client = await RawClient.connect(daemon.socket_path, framing)
        other = await RawClient.connect(daemon.socket_path, framing)
        await client.send({"jsonrpc": "2.0", "id": 1, "method": "test/boom"})
        reply = await client.receive()
        assert error_code(reply) == -32603
        text = str(reply)
        assert SECRET not in text
        assert "Traceback" not in text
        assert "/root" not in text
        await assert_no_reply_then_probe(client)
        await assert_no_reply_then_probe(other)


async def test_half_close_still_answers_what_was_read(framing: Framing) -> None:
    """Requests already read are answered after the client shuts down its sending side."""
    async with running_daemon() as daemon:
        client = await RawClient.connect(daemon.socket_path, framing)
        await client.send(
            {"jsonrpc": "2.0", "id": 1, "method": "test/wait", "params": {"gate": "h"}}
        )
        await client.send({"jsonrpc": "2.0", "id": 2, "method": "daemon/status"})
        await client.half_close()
        first = await client.receive()
        assert first["id"] == 2
        daemon.app.gate("h").set()
        rest = await client.receive_all()
        assert rest == [{"jsonrpc": "2.0", "id": 1, "result": {"gate": "h"}}]
        assert client.eof


async def test_frame_over_limit_is_refused_and_closes_only_that_connection(
    framing: Framing,
) -> None:
    limit = 1024
    async with running_daemon(max_message_bytes=limit) as daemon:
        bystander = await RawClient.connect(daemon.socket_path, framing)
        await assert_no_reply_then_probe(bystander)
        await bystander.send(
            {"jsonrpc": "2.0", "id": 5, "method": "test/wait", "params": {"gate": "b"}}
        )

        at_limit = await RawClient.connect(daemon.socket_path, framing)
        envelope = {"jsonrpc": "2.0", "id": 1, "method": "test/echo", "params": {"value": ""}}
        padding = limit - len(_compact(envelope))
        envelope["params"] = {"value": "x" * padding}
        assert len(_compact(envelope)) == limit
        reply = await at_limit.call("test/echo", envelope["params"])
        assert reply["result"] == {"value": "x" * padding}

        offender = await RawClient.connect(daemon.socket_path, framing)
        envelope["params"] = {"value": "x" * (padding + 1)}
        await offender.send_raw(encode_frame(_compact(envelope), framing))
        replies = await offender.receive_all()
        assert len(replies) == 1
        assert error_code(replies[0]) == -32600
        assert replies[0]["error"]["data"] == {"limit": limit}
        assert offender.eof

        await assert_no_reply_then_probe(at_limit)
        await assert_no_reply_then_probe(bystander)
        daemon.app.gate("b").set()
        assert (await bystander.receive())["result"] == {"gate": "b"}


def _compact(message: Any) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode()


async def test_initialize_and_status_shapes(framing: Framing) -> None:
    app = ProbeApp(counts=SessionCounts(loaded=3, running=1, waiting=2))
    async with running_daemon(app=app) as daemon:
        client = await RawClient.connect(daemon.socket_path, framing)
        reply = await client.call(
            "initialize", {"clientInfo": {"name": "t", "version": "1"}, "processId": 1}
        )
        assert reply["result"]["protocolVersion"] == 1
        assert reply["result"]["serverInfo"]["name"] == "robotad"
        assert reply["result"]["capabilities"] == {"framings": ["ndjson", "content-length"]}
        status = (await client.call("daemon/status", request_id=2))["result"]
        assert set(status) == {
            "version",
            "protocolVersion",
            "pid",
            "startedAt",
            "socketPath",
            "stateDir",
            "sessions",
        }
        assert status["pid"] == os.getpid()
        assert status["protocolVersion"] == 1
        assert status["socketPath"] == str(daemon.socket_path)
        assert status["stateDir"] == daemon.environ["ROBOTA_STATE_DIR"]
        assert status["sessions"] == {"loaded": 3, "running": 1, "waiting": 2}
        assert status["startedAt"].endswith("Z")


async def test_shutdown_answers_first_then_drains_in_flight_requests(framing: Framing) -> None:
    """daemon/shutdown answers {ok:true}; the app drains while connections are still served
    (here the drain releases a waiting request, whose reply still arrives); then every
    connection closes and the socket file is gone."""
    app = ProbeApp()

    async def drain(grace: float) -> None:
        app.shutdown_graces.append(grace)
        app.gate("d").set()

    app.on_shutdown = drain  # type: ignore[method-assign]
    async with running_daemon(app=app) as daemon:
        waiting = await RawClient.connect(daemon.socket_path, framing)
        await waiting.send(
            {"jsonrpc": "2.0", "id": 1, "method": "test/wait", "params": {"gate": "d"}}
        )
        await assert_no_reply_then_probe(waiting)
        controller = await RawClient.connect(daemon.socket_path, framing)
        for bad in (-1, "soon", True):
            reply = await controller.call("daemon/shutdown", {"graceSeconds": bad})
            assert error_code(reply) == -32602
        reply = await controller.call("daemon/shutdown", {"graceSeconds": 2.5}, request_id=9)
        assert reply == {"jsonrpc": "2.0", "id": 9, "result": {"ok": True}}
        assert await waiting.receive_all() == [{"jsonrpc": "2.0", "id": 1, "result": {"gate": "d"}}]
        assert await controller.receive_all() == []
        with trio.fail_after(IO_TIMEOUT):
            await daemon.stopped.wait()
        assert not daemon.socket_path.exists()
        assert app.shutdown_graces == [2.5]
        with pytest.raises(OSError):  # noqa: PT011 - ENOENT or ECONNREFUSED, either proves it
            await trio.open_unix_socket(os.fspath(daemon.socket_path))


@pytest.mark.skipif(shutil.which("socat") is None, reason="socat is not installed")
async def test_socat_works_unmodified(framing: Framing) -> None:
    """socat sends, half-closes and prints the reply, in either framing."""
    async with running_daemon() as daemon:
        body = b'{"jsonrpc":"2.0","id":1,"method":"daemon/status"}'
        with trio.fail_after(IO_TIMEOUT):
            done = await trio.run_process(
                ["socat", "-t", "5", "-", f"UNIX-CONNECT:{daemon.socket_path}"],
                stdin=encode_frame(body, framing),
                capture_stdout=True,
                stderr=subprocess.DEVNULL,
            )
        out = done.stdout
        if framing == "content-length":
            header, _, out = out.partition(b"\r\n\r\n")
            assert header.lower().startswith(b"content-length: ")
            assert int(header.split(b":")[1]) == len(out)
        reply = json.loads(out)
        assert reply["result"]["pid"] == os.getpid()
