"""JSON-RPC 2.0 classification and encoding (PROTOCOL.md §2), sans-I/O.

The cases follow the examples of the JSON-RPC 2.0 specification, written from its rules."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import InternalError, InvalidRequest, ParseError, RpcError, SessionBusy
from protocol.jsonrpc import (
    MAX_BATCH,
    Frame,
    Invalid,
    Notification,
    Request,
    Response,
    encode_batch,
    encode_error,
    encode_notification,
    encode_request,
    encode_result,
    parse_frame,
)


def only(frame: Frame) -> Any:
    assert not frame.batch
    assert len(frame.messages) == 1
    return frame.messages[0]


def invalid(body: bytes, error: type[RpcError]) -> Invalid:
    """The one message `body` parses to: an `Invalid` whose error is an `error`."""
    message = only(parse_frame(body))
    assert isinstance(message, Invalid)
    assert isinstance(message.error, error)
    return message


def raw_json(raw: msgspec.Raw | None) -> Any:
    assert raw is not None
    return msgspec.json.decode(raw)


def test_call_with_positional_params_keeps_the_array_for_the_dispatcher() -> None:
    message = only(
        parse_frame(b'{"jsonrpc": "2.0", "method": "subtract", "params": [42, 23], "id": 1}')
    )
    assert isinstance(message, Request)
    assert (message.id, message.method, raw_json(message.params)) == (1, "subtract", [42, 23])


def test_call_with_named_params_and_string_id() -> None:
    body = b'{"jsonrpc": "2.0", "method": "subtract", "params": {"subtrahend": 23}, "id": "3"}'
    message = only(parse_frame(body))
    assert isinstance(message, Request)
    assert message.id == "3"
    assert raw_json(message.params) == {"subtrahend": 23}


@pytest.mark.parametrize("params", [b"", b', "params": null'])
def test_absent_or_null_params_read_as_none(params: bytes) -> None:
    message = only(parse_frame(b'{"jsonrpc":"2.0","method":"m","id":0' + params + b"}"))
    assert isinstance(message, Request)
    assert message.params is None


def test_notification_has_no_id() -> None:
    message = only(parse_frame(b'{"jsonrpc": "2.0", "method": "update", "params": [1,2,3,4,5]}'))
    assert isinstance(message, Notification)
    assert message.method == "update"


def test_extra_members_are_tolerated_on_input() -> None:
    message = only(parse_frame(b'{"jsonrpc":"2.0","method":"m","id":1,"extra":{"x":[1]}}'))
    assert isinstance(message, Request)


@pytest.mark.parametrize(
    "body",
    [
        b'{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]',
        b"",
        b"   ",
        b'"unterminated',
        b'"a string" and then garbage',
        b'{"jsonrpc":"2.0","method":"m","id":1} {}',
        b'{"jsonrpc":"2.0","method":"m","params":{"a":"\xff"},"id":1}',
        b"\xef\xbb\xbf{}",
    ],
)
def test_invalid_json_is_one_parse_error_with_null_id(body: bytes) -> None:
    message = invalid(body, ParseError)
    assert message.error.code == -32700
    assert message.id is None


def test_invalid_request_object() -> None:
    message = invalid(b'{"jsonrpc": "2.0", "method": 1, "params": "bar"}', InvalidRequest)
    assert message.id is None


@pytest.mark.parametrize("bad_id", [b"true", b"1.5", b"null", b"{}", b"[1]", b"1e3"])
def test_ids_must_be_strings_or_integers(bad_id: bytes) -> None:
    message = invalid(b'{"jsonrpc":"2.0","method":"m","id":' + bad_id + b"}", InvalidRequest)
    assert message.id is None


@pytest.mark.parametrize(
    "body",
    [
        b'{"jsonrpc":"1.0","method":"m","id":5}',
        b'{"method":"m","id":5}',
        b'{"jsonrpc":2.0,"method":"m","id":5}',
        b'{"jsonrpc":"2.0","method":["m"],"id":5}',
        b'{"jsonrpc":"2.0","method":"m","params":"bar","id":5}',
        b'{"jsonrpc":"2.0","method":"m","params":7,"id":5}',
    ],
)
def test_invalid_request_echoes_a_readable_id(body: bytes) -> None:
    message = invalid(body, InvalidRequest)
    assert message.id == 5


@pytest.mark.parametrize("body", [b"1", b'"x"', b"null", b"true", b'{"foo": "boo"}'])
def test_non_message_values_are_invalid_requests(body: bytes) -> None:
    message = invalid(body, InvalidRequest)
    assert message.id is None


def test_batch_with_invalid_json_is_one_parse_error() -> None:
    body = (
        b'[{"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},'
        b'{"jsonrpc": "2.0", "method"]'
    )
    invalid(body, ParseError)


def test_empty_batch_is_one_invalid_request_not_an_array() -> None:
    message = invalid(b" [ ] ", InvalidRequest)
    assert message.id is None


def test_a_member_no_value_holds_is_located_and_an_unreadable_response_ignored() -> None:
    """JSON that parses but holds a number no value can (``1e400``) in the envelope: as a
    request's id it is -32600 saying so where it stands (it was "a message must be a JSON
    object", which it is); in a response whose id can be read it is an unusable response
    (its waiter is told, not left hanging), and one whose id cannot be read nothing can
    await, so it is ignored (PROTOCOL §2), alone or in a batch."""
    message = invalid(b'{"jsonrpc": "2.0", "id": 1e400, "method": "x"}', InvalidRequest)
    assert str(message.error) == "invalid request: number out of range at $.id"
    [unusable] = parse_frame(b'{"jsonrpc": "2.0", "id": 5, "error": {"code": 1e400}}').messages
    assert isinstance(unusable, Response)
    assert unusable.id == 5
    assert unusable.problem is not None
    assert "number out of range" in unusable.problem
    assert parse_frame(b'{"jsonrpc": "2.0", "id": 1e400, "error": 1}').messages == []
    batch = parse_frame(b'[{"jsonrpc": "2.0", "id": 1e400, "result": 1}, 1]')
    assert batch.batch
    [not_an_object] = batch.messages
    assert isinstance(not_an_object, Invalid)
    assert "must be a JSON object" in str(not_an_object.error)


def test_a_batch_over_the_limit_is_one_invalid_request_naming_it() -> None:
    """A batch of millions of tiny members once made as many replies (gigabytes, the event
    loop held for tens of seconds): past `MAX_BATCH` messages it is one -32600 with
    ``data.limit``, and none of it is classified; at the limit it is taken."""
    ping = b'{"jsonrpc": "2.0", "method": "ping", "id": 1}'
    taken = parse_frame(b"[" + b",".join([ping] * MAX_BATCH) + b"]")
    assert taken.batch
    assert len(taken.messages) == MAX_BATCH
    message = invalid(b"[" + b",".join([b"1"] * (MAX_BATCH + 1)) + b"]", InvalidRequest)
    assert message.id is None
    assert message.error.data == {"limit": MAX_BATCH}
    assert "at most 1,000" in str(message.error)


@pytest.mark.parametrize(("body", "count"), [(b"[1]", 1), (b"[1,2,3]", 3)])
def test_invalid_non_empty_batch_gets_one_error_per_element(body: bytes, count: int) -> None:
    frame = parse_frame(body)
    assert frame.batch
    assert len(frame.messages) == count
    assert all(
        isinstance(m, Invalid) and isinstance(m.error, InvalidRequest) for m in frame.messages
    )


def test_mixed_batch_is_classified_element_by_element() -> None:
    body = b"""[
        {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
        {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]},
        {"jsonrpc": "2.0", "method": "subtract", "params": [42,23], "id": "2"},
        {"foo": "boo"},
        {"jsonrpc": "2.0", "method": "foo.get", "params": {"name": "myself"}, "id": "5"},
        {"jsonrpc": "2.0", "method": "get_data", "id": "9"}
    ]"""
    frame = parse_frame(body)
    assert frame.batch
    kinds = [type(m).__name__ for m in frame.messages]
    assert kinds == ["Request", "Notification", "Request", "Invalid", "Request", "Request"]
    assert [m.id for m in frame.messages if isinstance(m, Request)] == ["1", "2", "5", "9"]


def test_notification_only_batch_has_nothing_to_answer() -> None:
    frame = parse_frame(
        b'[{"jsonrpc": "2.0", "method": "notify_sum", "params": [1,2,4]},'
        b' {"jsonrpc": "2.0", "method": "notify_hello", "params": [7]}]'
    )
    assert frame.batch
    assert all(isinstance(m, Notification) for m in frame.messages)


def test_responses_are_classified_not_answered() -> None:
    ok = only(parse_frame(b'{"jsonrpc":"2.0","id":3,"result":null}'))
    assert isinstance(ok, Response)
    assert ok.id == 3
    assert raw_json(ok.result) is None
    failed = only(
        parse_frame(
            b'{"jsonrpc":"2.0","id":"a","error":{"code":-32001,"message":"busy",'
            b'"data":{"sessionId":"s","turnId":"t"}}}'
        )
    )
    assert isinstance(failed, Response)
    assert isinstance(failed.error, SessionBusy)
    assert failed.error.data == {"sessionId": "s", "turnId": "t"}


@pytest.mark.parametrize(
    "body",
    [
        b'{"jsonrpc":"2.0","id":3}',
        b'{"jsonrpc":"2.0","id":3,"result":1,"error":{"code":1,"message":"x"}}',
        b'{"jsonrpc":"2.0","id":3,"error":"nope"}',
        b'{"jsonrpc":"2.0","id":3,"error":{"code":true,"message":"x"}}',
        b'{"jsonrpc":"2.0","id":3,"error":{"code":1}}',
    ],
)
def test_unusable_responses_carry_a_problem(body: bytes) -> None:
    message = only(parse_frame(body))
    assert isinstance(message, Response)
    assert message.problem
    assert message.id == 3


def test_replies_hold_exactly_the_json_rpc_members() -> None:
    assert msgspec.json.decode(encode_result(1, None)) == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": None,
    }
    error = msgspec.json.decode(encode_error("x", SessionBusy("s", "t")))
    assert error == {
        "jsonrpc": "2.0",
        "id": "x",
        "error": {
            "code": -32001,
            "message": error["error"]["message"],
            "data": {"sessionId": "s", "turnId": "t"},
        },
    }
    plain = msgspec.json.decode(encode_error(None, InternalError()))
    assert plain == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32603, "message": "internal error"},
    }


def test_error_with_unencodable_data_still_gets_out() -> None:
    error = InternalError("boom", {"thing": object()})
    assert msgspec.json.decode(encode_error(1, error))["error"] == {
        "code": -32603,
        "message": "boom",
    }


def test_unencodable_result_raises_for_the_caller_to_handle() -> None:
    with pytest.raises(TypeError):
        encode_result(1, {"thing": object()})


def test_requests_and_notifications_omit_absent_params() -> None:
    assert msgspec.json.decode(encode_request(4, "daemon/status")) == {
        "jsonrpc": "2.0",
        "id": 4,
        "method": "daemon/status",
    }
    assert msgspec.json.decode(encode_notification("$/cancelRequest", {"id": 4})) == {
        "jsonrpc": "2.0",
        "method": "$/cancelRequest",
        "params": {"id": 4},
    }


def test_batch_encoding_round_trips() -> None:
    body = encode_batch([encode_result(1, 1), encode_error(2, InternalError())])
    frame = parse_frame(body)
    assert frame.batch
    assert all(isinstance(m, Response) for m in frame.messages)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_raise(body: bytes) -> None:
    frame = parse_frame(body)
    assert frame.messages


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
ENVELOPE_KEYS = st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.dictionaries(ENVELOPE_KEYS, JSON, max_size=6), max_size=4) | JSON)
def test_arbitrary_json_is_classified_without_raising(value: Any) -> None:
    frame = parse_frame(msgspec.json.encode(value))
    assert frame.messages
    for message in frame.messages:
        if isinstance(message, Request | Invalid):
            assert message.id is None or type(message.id) in (int, str)
