"""Untrusted input against a running daemon (PROTOCOL.md §1–§2), property-based.

For arbitrary bytes, and for arbitrary JSON shaped more or less like JSON-RPC, sent in either
framing and cut into arbitrary chunks: the daemon never crashes, another connection is served
throughout, every reply is a well-formed JSON-RPC response with no extra members, and every
complete frame gets exactly the reply JSON-RPC 2.0 prescribes — one object, one array with a
reply per request or invalid element, or nothing for notifications and responses.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.framing import Framing, encode_frame
from tests.server.server_harness import RawClient, assert_response, running_daemon

FUZZ_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

_text = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=10)
_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _text
_json = st.recursive(
    _scalars.filter(lambda v: v not in (float("inf"), float("-inf"))),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)

#: Methods a fuzzed request may name. Never daemon/shutdown (it would end the run on purpose)
#: nor test/wait (it waits for the test, which sends nothing more).
_methods = st.sampled_from(
    [
        "daemon/status",
        "initialize",
        "test/echo",
        "test/null",
        "test/boom",
        "subtract",
        "get_data",
        "update",
        "no/such",
        "$/cancelRequest",
        "$/progress",
    ]
) | _text.filter(lambda m: m not in ("daemon/shutdown", "test/wait"))

_ids: st.SearchStrategy[Any] = (
    st.integers(-(2**63), 2**63 - 1) | _text | st.sampled_from([None, True, 1.5, [], {}])
)
_params = (
    st.fixed_dictionaries({}, optional={"value": _json, "minuend": _json, "subtrahend": _json})
    | st.fixed_dictionaries({"id": _ids})
    | _json
)
_message = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.just("2.0") | _json,
        "id": _ids,
        "method": _methods | _json,
        "params": _params,
        "result": _json,
        "error": _json,
    },
)
_frame_value = _message | st.lists(_message | _json, max_size=4) | _json


def expects_reply(element: Any) -> bool:
    """Whether one message (not a batch) gets a reply, per JSON-RPC 2.0 as PROTOCOL.md §2 has it."""
    if not isinstance(element, dict):
        return True
    if "method" not in element:  # a response (ignored) unless it is neither
        return not ({"id", "result", "error"} & set(element))
    if "id" in element:
        return True  # a request, or an invalid one with its id
    valid_notification = (
        element.get("jsonrpc") == "2.0"
        and isinstance(element["method"], str)
        and (element.get("params") is None or isinstance(element["params"], dict | list))
    )
    return not valid_notification


def expected_shape(value: Any) -> str | None:
    """``"object"``, ``"array:<n>"`` or None (no reply) for one frame's JSON value."""
    if isinstance(value, list):
        if not value:
            return "object"
        replies = sum(expects_reply(element) for element in value)
        return f"array:{replies}" if replies else None
    return "object" if expects_reply(value) else None


def reply_shape(reply: Any) -> str:
    if isinstance(reply, list):
        for element in reply:
            assert_response(element)
        return f"array:{len(reply)}"
    assert_response(reply)
    return "object"


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({cut % (len(data) + 1) for cut in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges) if b > a]


PROBE = {"jsonrpc": "2.0", "id": "probe", "method": "daemon/status"}


async def _control_still_served(control: RawClient, request_id: str) -> None:
    reply = await control.call("daemon/status", request_id=request_id)
    assert reply["id"] == request_id
    assert "result" in reply


@FUZZ_SETTINGS
@given(
    framing=st.sampled_from(["ndjson", "content-length"]),
    values=st.lists(_frame_value, min_size=1, max_size=5),
    ascii_only=st.booleans(),
    cuts=st.lists(st.integers(min_value=0), max_size=4),
)
async def test_arbitrary_json_gets_exactly_the_prescribed_replies(
    framing: Framing, values: list[Any], ascii_only: bool, cuts: list[int]
) -> None:
    async with running_daemon() as daemon:
        control = await RawClient.connect(daemon.socket_path, framing)
        await _control_still_served(control, "before")
        client = await RawClient.connect(daemon.socket_path, framing)
        # The probe goes first so the connection's framing is fixed by a well-formed frame.
        frames = [PROBE, *values]
        data = b"".join(
            encode_frame(json.dumps(v, ensure_ascii=ascii_only).encode(), framing) for v in frames
        )
        for piece in chunked(data, cuts):
            await client.send_raw(piece)
        await client.half_close()
        replies = await client.receive_all()
        expected = Counter(shape for v in frames if (shape := expected_shape(v)) is not None)
        assert Counter(reply_shape(r) for r in replies) == expected
        await _control_still_served(control, "after")


@FUZZ_SETTINGS
@given(
    framing=st.sampled_from(["ndjson", "content-length"]),
    garbage=st.binary(max_size=300),
    prefix=st.sampled_from([b"", b"{", b"[", b"Content-Length: 5\r\n\r\n", b"C", b"\n\n"]),
)
async def test_arbitrary_bytes_never_break_the_daemon(
    framing: Framing, garbage: bytes, prefix: bytes
) -> None:
    async with running_daemon(max_message_bytes=256) as daemon:
        control = await RawClient.connect(daemon.socket_path, framing)
        await _control_still_served(control, "before")
        client = await RawClient.connect(daemon.socket_path, framing)
        await client.send_raw(prefix + garbage)
        await client.half_close()
        for reply in await client.receive_all():
            reply_shape(reply)
        await _control_still_served(control, "after")
        fresh = await RawClient.connect(daemon.socket_path, framing)
        await _control_still_served(fresh, "fresh")


def _nested(depth: int, kind: str) -> bytes:
    """A JSON value nested `depth` levels deep: arrays or objects."""
    if kind == "array":
        return b"[" * depth + b"1" + b"]" * depth
    return b'{"a":' * depth + b"1" + b"}" * depth


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    framing=st.sampled_from(["ndjson", "content-length"]),
    depth=st.integers(min_value=5_000, max_value=50_000),
    kind=st.sampled_from(["array", "object"]),
    where=st.sampled_from(["top", "params", "batch"]),
)
async def test_deep_nesting_is_a_parse_error_and_the_connection_goes_on(
    framing: Framing, depth: int, kind: str, where: str
) -> None:
    """PROTOCOL §10.2: a message nested deeper than the decoder allows is answered -32700
    (id null) like any unparseable message, and the same connection is served after it."""
    deep = _nested(depth, kind)
    body = {
        "top": deep,
        "params": b'{"jsonrpc":"2.0","id":7,"method":"test/echo","params":{"value":' + deep + b"}}",
        "batch": b"[" + deep + b"]",
    }[where]
    async with running_daemon() as daemon:
        client = await RawClient.connect(daemon.socket_path, framing)
        await _control_still_served(client, "before")
        await client.send_raw(encode_frame(body, framing))
        reply = await client.receive()
        assert_response(reply)
        assert reply["id"] is None
        assert reply["error"]["code"] == -32700
        await _control_still_served(client, "after")
