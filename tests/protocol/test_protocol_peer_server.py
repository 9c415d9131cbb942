"""The JSON-RPC peer answering requests (PROTOCOL.md §1–§2), over memory streams, in both
framings."""

from __future__ import annotations

import logging
from typing import Annotated, Any

import msgspec
import pytest
import trio

from protocol.errors import SessionBusy, SessionNotFound
from protocol.framing import Framing
from protocol.jsonrpc import MAX_BATCH
from protocol.peer import CallContext, Router
from tests.protocol.wire_harness import TrickleStream, call, notice, serving

FRAMINGS: list[Framing] = ["ndjson", "content-length"]


class Empty(msgspec.Struct, forbid_unknown_fields=True):
    pass


class Echo(msgspec.Struct, forbid_unknown_fields=True, rename="camel"):
    text: str
    repeat_count: Annotated[int, msgspec.Meta(ge=0)] = 1


class App:
    """A small application: a router plus what its handlers observed."""

    def __init__(self) -> None:
        self.router = Router()
        self.gate = trio.Event()
        self.calls: list[str] = []
        self.tasks: dict[str, list[object]] = {"inline": [], "spawned": []}
        self.cancelled: list[int | str | None] = []
        self.started = trio.Event()
        router = self.router

        @router.method("ping", Empty, inline=True)
        async def ping(params: Empty, ctx: CallContext) -> dict[str, Any]:
            self.tasks["inline"].append(trio.lowlevel.current_task())
            return {"pong": True}

        @router.method("nothing", Empty, inline=True)
        async def nothing(params: Empty, ctx: CallContext) -> None:
            return None

        @router.method("echo", Echo)
        async def echo(params: Echo, ctx: CallContext) -> dict[str, Any]:
            self.calls.append("echo")
            self.tasks["spawned"].append(trio.lowlevel.current_task())
            return {"text": params.text * params.repeat_count}

        @router.method("block", Empty)
        async def block(params: Empty, ctx: CallContext) -> dict[str, Any]:
            self.started.set()
            try:
                await self.gate.wait()
            except trio.Cancelled:
                self.cancelled.append(ctx.request_id)
                raise
            return {"released": True}

        @router.method("boom", Empty)
        async def boom(params: Empty, ctx: CallContext) -> None:
            raise ValueError("token sk-SECRET-123 leaked into a message")

        @router.method("busy", Empty, inline=True)
        async def busy(params: Empty, ctx: CallContext) -> None:
            raise SessionBusy("s1", "t9")

        @router.method("grouped", Empty)
        async def grouped(params: Empty, ctx: CallContext) -> None:
            async def fail() -> None:
                raise SessionNotFound("gone")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(fail)

        @router.method("unencodable", Empty, inline=True)
        async def unencodable(params: Empty, ctx: CallContext) -> Any:
            return {"x": object()}

        @router.method("remember", Echo, inline=True)
        async def remember(params: Echo, ctx: CallContext) -> dict[str, Any]:
            previous = ctx.state.get("text")
            ctx.state["text"] = params.text
            return {"previous": previous}

        @router.method("record", Empty, inline=True)
        async def record(params: Empty, ctx: CallContext) -> dict[str, Any]:
            self.calls.append(f"record:{ctx.request_id}")
            return {}


@pytest.fixture
def app() -> App:
    return App()


def error_of(reply: dict[str, Any]) -> dict[str, Any]:
    assert set(reply) == {"jsonrpc", "id", "error"}
    assert reply["jsonrpc"] == "2.0"
    error: dict[str, Any] = reply["error"]
    assert set(error) <= {"code", "message", "data"}
    return error


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_replies_use_the_framing_of_the_first_frame(app: App, framing: Framing) -> None:
    async with serving(app.router, framing=framing) as served:
        await served.client.send(call(1, "ping"))
        assert await served.client.receive() == {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {"pong": True},
        }
        assert served.client.received_framing == framing
        assert served.peer.framing == framing


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_null_result_is_carried(app: App, framing: Framing) -> None:
    async with serving(app.router, framing=framing) as served:
        await served.client.send(call("n", "nothing"))
        body = await served.client.receive_frame()
        assert body == b'{"jsonrpc":"2.0","id":"n","result":null}'


async def test_inline_runs_in_the_reader_and_spawned_gets_its_own_task(app: App) -> None:
    async with serving(app.router) as served:
        for request_id in range(4):
            method = "ping" if request_id % 2 else "echo"
            await served.client.send(
                call(request_id, method, {"text": "x"} if method == "echo" else None)
            )
        replies = [await served.client.receive() for _ in range(4)]
        assert sorted(r["id"] for r in replies) == [0, 1, 2, 3]
    inline, spawned = app.tasks["inline"], app.tasks["spawned"]
    assert len(inline) == 2
    assert inline[0] is inline[1]
    assert len(spawned) == 2
    assert spawned[0] is not spawned[1]
    assert inline[0] not in spawned


async def test_each_handler_knows_where_its_message_came_in_the_connections_order() -> None:
    """`CallContext.arrival` counts requests and notifications alike, from 1, in the order
    they were read, whatever order their handler tasks then run in."""
    router = Router()
    seen: list[tuple[str, int]] = []

    @router.method("spawned", Echo)
    async def spawned(params: Echo, ctx: CallContext) -> dict[str, Any]:
        seen.append((params.text, ctx.arrival))
        return {}

    @router.method("inline", Echo, inline=True)
    async def inline(params: Echo, ctx: CallContext) -> dict[str, Any]:
        seen.append((params.text, ctx.arrival))
        return {}

    async with serving(router) as served:
        await served.client.send(call(1, "spawned", {"text": "a"}))
        await served.client.send(notice("spawned", {"text": "b"}))
        await served.client.send(call(2, "inline", {"text": "c"}))
        await served.client.send(notice("inline", {"text": "d"}))
        await served.client.send(call(3, "spawned", {"text": "e"}))
        for _ in range(3):
            await served.client.receive()
        with trio.fail_after(10):
            while len(seen) < 5:
                await trio.sleep(0.01)
    assert sorted(seen) == [("a", 1), ("b", 2), ("c", 3), ("d", 4), ("e", 5)]


async def test_a_waiting_spawned_request_does_not_hold_up_others(app: App) -> None:
    async with serving(app.router) as served:
        await served.client.send(call(1, "block"))
        await served.client.send(call(2, "ping"))
        assert (await served.client.receive())["id"] == 2
        app.gate.set()
        assert await served.client.receive() == {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {"released": True},
        }


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_cancel_request_is_answered_at_once_and_stops_the_handler(
    app: App, framing: Framing
) -> None:
    """G-072: cancelling a request is answered -32800 at once, not when its work ends."""
    async with serving(app.router, framing=framing) as served:
        await served.client.send(call(7, "block"))
        await app.started.wait()
        await served.client.send(notice("$/cancelRequest", {"id": 7}))
        reply = await served.client.receive()
        assert reply["id"] == 7
        assert error_of(reply)["code"] == -32800
        assert app.cancelled == [7]
        assert not app.gate.is_set()
        await served.client.send(call(8, "ping"))  # the connection carries on
        assert (await served.client.receive())["id"] == 8


async def test_cancel_of_an_unknown_or_finished_request_is_ignored(app: App) -> None:
    async with serving(app.router) as served:
        await served.client.send(call(1, "ping"))
        assert (await served.client.receive())["id"] == 1
        for params in ({"id": 1}, {"id": 99}, {"id": True}, None, {"nope": 1}):
            await served.client.send(notice("$/cancelRequest", params))
        await served.client.send(call(2, "ping"))
        assert (await served.client.receive())["id"] == 2


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_handler_exception_is_internal_error_without_internals(
    app: App, framing: Framing, caplog: pytest.LogCaptureFixture
) -> None:
    async with serving(app.router, framing=framing) as served:
        with caplog.at_level(logging.ERROR, logger="protocol.peer"):
            await served.client.send(call(1, "boom"))
            body = await served.client.receive_frame()
        assert body is not None
        assert b"SECRET" not in body
        assert b"Traceback" not in body
        assert b"ValueError" not in body
        assert error_of(msgspec.json.decode(body)) == {"code": -32603, "message": "internal error"}
        assert any(record.name == "protocol.peer" for record in caplog.records)
        await served.client.send(call(2, "ping"))  # a handler failure never closes the connection
        assert (await served.client.receive())["id"] == 2


async def test_unencodable_result_is_an_internal_error(app: App) -> None:
    async with serving(app.router) as served:
        await served.client.send(call(1, "unencodable"))
        assert error_of(await served.client.receive())["code"] == -32603


async def test_rpc_errors_go_on_the_wire_as_themselves(app: App) -> None:
    async with serving(app.router) as served:
        await served.client.send(call(1, "busy"))
        error = error_of(await served.client.receive())
        assert error["code"] == -32001
        assert error["data"] == {"sessionId": "s1", "turnId": "t9"}
        await served.client.send(call(2, "grouped"))
        error = error_of(await served.client.receive())
        assert (error["code"], error["data"]) == (-32002, {"sessionId": "gone"})


async def test_invalid_params_list_every_issue(app: App) -> None:
    """G-215: -32602 lists every invalid parameter with its own path."""
    async with serving(app.router) as served:
        await served.client.send(call(1, "echo", {"text": 1, "repeatCount": -1, "bogus": 2}))
        error = error_of(await served.client.receive())
        assert error["code"] == -32602
        paths = sorted(issue["path"] for issue in error["data"]["issues"])
        assert paths == ["$.bogus", "$.repeatCount", "$.text"]
        assert app.calls == []


async def test_positional_params_are_invalid_params(app: App) -> None:
    async with serving(app.router) as served:
        await served.client.send(call(1, "echo", ["hello"]))
        error = error_of(await served.client.receive())
        assert error["code"] == -32602
        assert error["data"]["issues"][0]["path"] == "$"


async def test_absent_and_null_params_mean_empty_object(app: App) -> None:
    async with serving(app.router) as served:
        await served.client.send(call(1, "ping"))
        await served.client.send({"jsonrpc": "2.0", "id": 2, "method": "ping", "params": None})
        await served.client.send(call(3, "echo"))
        assert (await served.client.receive())["result"] == {"pong": True}
        assert (await served.client.receive())["result"] == {"pong": True}
        error = error_of(await served.client.receive())
        assert error["data"]["issues"] == [{"path": "$.text", "message": "missing required member"}]


async def test_unknown_methods_and_dollar_notifications(app: App) -> None:
    async with serving(app.router) as served:
        await served.client.send(notice("$/setTrace", {"value": "off"}))
        await served.client.send(notice("no/such", {}))
        await served.client.send(call(1, "no/such"))
        await served.client.send(call(2, "$/whatever"))
        await served.client.send(call(3, "$/cancelRequest", {"id": 1}))
        first = error_of(await served.client.receive())
        assert first["code"] == -32601
        assert error_of(await served.client.receive())["code"] == -32601
        # It exists, as a notification: sent with an id, it is an invalid request, not unknown.
        cancel = error_of(await served.client.receive())
        assert cancel["code"] == -32600
        assert "$/cancelRequest is a notification" in cancel["message"]


async def test_responses_nobody_awaits_are_ignored(app: App) -> None:
    async with serving(app.router) as served:
        await served.client.send({"jsonrpc": "2.0", "id": 5, "result": {"x": 1}})
        await served.client.send(
            {"jsonrpc": "2.0", "id": None, "error": {"code": 1, "message": "m"}}
        )
        await served.client.send({"jsonrpc": "2.0", "id": 6})
        await served.client.send(call(1, "ping"))
        assert (await served.client.receive())["id"] == 1


async def test_notification_naming_a_method_runs_it_unanswered(app: App) -> None:
    async with serving(app.router) as served:
        await served.client.send(notice("record"))
        await served.client.send(call(1, "ping"))
        assert (await served.client.receive())["id"] == 1
    assert app.calls == ["record:None"]


async def test_request_id_in_flight_twice_is_refused(app: App) -> None:
    async with serving(app.router) as served:
        await served.client.send(call("x", "block"))
        await served.client.send(call("x", "block"))
        error = error_of(await served.client.receive())
        assert error["code"] == -32600
        app.gate.set()
        assert (await served.client.receive())["result"] == {"released": True}


async def test_connection_state_is_per_connection(app: App) -> None:
    async with serving(app.router) as first, serving(app.router) as second:
        await first.client.send(call(1, "remember", {"text": "a"}))
        await first.client.send(call(2, "remember", {"text": "b"}))
        await second.client.send(call(1, "remember", {"text": "c"}))
        assert (await first.client.receive())["result"] == {"previous": None}
        assert (await first.client.receive())["result"] == {"previous": "a"}
        assert (await second.client.receive())["result"] == {"previous": None}


async def test_a_peer_that_chose_its_framing_answers_a_first_line_of_text_and_reads_on(
    app: App,
) -> None:
    """``robotactl acp`` reads its editor as NDJSON: a first line that is no JSON (a person
    trying it by hand) is a -32700 like any later one, not a framing that ends the
    connection."""
    async with serving(app.router, chosen="ndjson") as served:
        await served.client.send_bytes(b"hello\n")
        reply = await served.client.receive()
        assert (reply["id"], error_of(reply)["code"]) == (None, -32700)
        await served.client.send(call(1, "ping"))
        assert (await served.client.receive())["result"] == {"pong": True}


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_invalid_json_and_invalid_requests_are_answered(app: App, framing: Framing) -> None:
    async with serving(app.router, framing=framing) as served:
        await served.client.send(b'{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]')
        reply = await served.client.receive()
        assert (reply["id"], error_of(reply)["code"]) == (None, -32700)
        await served.client.send(b'{"jsonrpc": "2.0", "method": 1, "params": "bar"}')
        reply = await served.client.receive()
        assert (reply["id"], error_of(reply)["code"]) == (None, -32600)
        await served.client.send(b'{"jsonrpc": "2.0", "method": "ping", "id": true}')
        assert error_of(await served.client.receive())["code"] == -32600
        await served.client.send(call(1, "ping"))  # still serving
        assert (await served.client.receive())["id"] == 1


# -- batches ---------------------------------------------------------------------------------


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_mixed_batch_answers_requests_only_in_one_array(app: App, framing: Framing) -> None:
    batch = [
        call("1", "echo", {"text": "a", "repeatCount": 2}),
        notice("record"),
        call("2", "no/such"),
        {"foo": "boo"},
        call("3", "ping"),
        call("4", "block"),
    ]
    async with serving(app.router, framing=framing) as served:
        await served.client.send(batch)
        await app.started.wait()
        app.gate.set()
        replies = await served.client.receive()
    assert isinstance(replies, list)
    by_id = {reply["id"]: reply for reply in replies if reply["id"] is not None}
    assert by_id["1"]["result"] == {"text": "aa"}
    assert error_of(by_id["2"])["code"] == -32601
    assert by_id["3"]["result"] == {"pong": True}
    assert by_id["4"]["result"] == {"released": True}
    invalid = [reply for reply in replies if reply["id"] is None]
    assert [error_of(reply)["code"] for reply in invalid] == [-32600]
    assert len(replies) == 5
    assert app.calls.count("record:None") == 1


async def test_notification_only_batch_gets_no_reply(app: App) -> None:
    async with serving(app.router) as served:
        await served.client.send([notice("record"), notice("$/cancelRequest", {"id": 1})])
        await served.client.send(call(1, "ping"))
        assert await served.client.receive() == {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {"pong": True},
        }


async def test_empty_and_invalid_batches(app: App) -> None:
    async with serving(app.router) as served:
        await served.client.send(b"[]")
        reply = await served.client.receive()
        assert isinstance(reply, dict)
        assert (reply["id"], error_of(reply)["code"]) == (None, -32600)
        await served.client.send(b"[1,2,3]")
        replies = await served.client.receive()
        assert [error_of(r)["code"] for r in replies] == [-32600, -32600, -32600]
        await served.client.send(b"[" + b",".join([b"1"] * (MAX_BATCH + 1)) + b"]")
        reply = await served.client.receive()
        assert isinstance(reply, dict)  # one error, not an array of a thousand
        assert (error_of(reply)["code"], error_of(reply)["data"]) == (-32600, {"limit": MAX_BATCH})
        await served.client.send(call(7, "ping"))
        assert (await served.client.receive())["id"] == 7  # the connection goes on


async def test_cancel_inside_a_batch(app: App) -> None:
    async with serving(app.router) as served:
        await served.client.send([call(1, "block"), call(2, "ping")])
        await app.started.wait()
        await served.client.send(notice("$/cancelRequest", {"id": 1}))
        replies = await served.client.receive()
        by_id = {reply["id"]: reply for reply in replies}
        assert error_of(by_id[1])["code"] == -32800
        assert by_id[2]["result"] == {"pong": True}


# -- end of input, limits, framing violations ------------------------------------------------


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_half_close_answers_requests_already_read(app: App, framing: Framing) -> None:
    async with serving(app.router, framing=framing) as served:
        await served.client.send(call(1, "block"))
        await served.client.send(call(2, "ping"))
        await served.client.send(call(3, "echo", {"text": "z"}))
        await served.client.send_eof()
        early = [await served.client.receive() for _ in range(2)]
        assert sorted(reply["id"] for reply in early) == [2, 3]
        assert not served.finished.is_set()
        app.gate.set()
        assert (await served.client.receive())["id"] == 1
        await served.client.expect_eof()
        await served.finished.wait()


async def test_last_ndjson_line_without_newline_is_answered_at_eof(app: App) -> None:
    async with serving(app.router) as served:
        await served.client.send_bytes(b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
        await served.client.send_eof()
        assert (await served.client.receive())["id"] == 1
        await served.client.expect_eof()


@pytest.mark.parametrize(
    ("sent", "missing"),
    [
        (b'Content-Length: 45\r\n\r\n{"jsonrpc":"2.0","id":1,"method":"ping"}', "45 bytes, 40"),
        (b"Content-Length: 45\r\n", "header section"),
    ],
    ids=["short-body", "open-headers"],
)
async def test_a_content_length_frame_cut_short_by_eof_is_answered(
    app: App, sent: bytes, missing: str
) -> None:
    """The client half-closed inside a frame (a wrong Content-Length, a script's last
    write): it heard nothing and saw the connection end. It is told what was missing."""
    async with serving(app.router, framing="content-length") as served:
        await served.client.send_bytes(sent)
        await served.client.send_eof()
        reply = await served.client.receive()
        assert reply["id"] is None
        assert error_of(reply)["code"] == -32700
        assert missing in error_of(reply)["message"]
        await served.client.expect_eof()
    assert app.tasks == {"inline": [], "spawned": []}  # nothing of it ran


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_frame_over_the_limit_is_refused_then_closed(app: App, framing: Framing) -> None:
    async with serving(app.router, framing=framing, max_frame_bytes=256) as served:
        await served.client.send(call(1, "ping"))
        oversized = msgspec.json.encode(call(2, "echo", {"text": "a" * 300}))
        if framing == "ndjson":
            await served.client.send_bytes(oversized[:280])  # no newline yet: refused already
        else:
            await served.client.send_bytes(b"Content-Length: %d\r\n\r\n" % len(oversized))
        assert (await served.client.receive())["id"] == 1
        reply = await served.client.receive()
        assert reply["id"] is None
        error = error_of(reply)
        assert error["code"] == -32600
        assert error["data"] == {"limit": 256}
        await served.client.expect_eof()
        await served.finished.wait()
    assert app.calls == []  # nothing of it reached a handler


async def test_unknown_framing_is_a_parse_error_then_closed(app: App) -> None:
    async with serving(app.router) as served:
        await served.client.send_bytes(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        reply = await served.client.receive()
        assert (reply["id"], error_of(reply)["code"]) == (None, -32700)
        await served.client.expect_eof()


async def test_malformed_content_length_header_is_a_parse_error_then_closed(app: App) -> None:
    async with serving(app.router, framing="content-length") as served:
        await served.client.send_bytes(b"Content-Length: banana\r\n\r\n{}")
        assert error_of(await served.client.receive())["code"] == -32700
        await served.client.expect_eof()


# -- writes ----------------------------------------------------------------------------------


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_concurrent_writers_never_interleave_frames(app: App, framing: Framing) -> None:
    async with serving(app.router, framing=framing, wrap=TrickleStream) as served:
        await served.client.send(call(0, "ping"))  # fixes the framing
        assert (await served.client.receive())["id"] == 0

        async def shout(index: int) -> None:
            await served.peer.notify("note", {"index": index, "pad": str(index) * 200})

        async with trio.open_nursery() as nursery:
            for index in range(10):
                nursery.start_soon(shout, index)
            for request_id in range(1, 6):
                await served.client.send(call(request_id, "echo", {"text": "q" * 50}))
            seen = [await served.client.receive() for _ in range(15)]
    notes = sorted(m["params"]["index"] for m in seen if m.get("method") == "note")
    assert notes == list(range(10))
    assert all(m["params"]["pad"] == str(m["params"]["index"]) * 200 for m in seen if "method" in m)
    assert sorted(m["id"] for m in seen if "id" in m) == [1, 2, 3, 4, 5]


async def test_a_cancelled_writer_never_tears_its_frame(app: App) -> None:
    streams: list[TrickleStream] = []

    def wrap(stream: Any) -> TrickleStream:
        streams.append(TrickleStream(stream))
        return streams[0]

    async with serving(app.router, wrap=wrap) as served:
        scope = trio.CancelScope()

        async def writer() -> None:
            with scope:
                await served.peer.notify("big", {"pad": "y" * 500})

        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer)
            await streams[0].first_piece_sent.wait()
            scope.cancel()
        await served.peer.notify("after", {})
        first = await served.client.receive()
        assert first["params"] == {"pad": "y" * 500}
        assert (await served.client.receive())["method"] == "after"
