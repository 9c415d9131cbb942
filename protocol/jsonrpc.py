"""JSON-RPC 2.0 messages (PROTOCOL.md §2), sans-I/O.

`parse_frame` turns one frame body into the messages it carries, each classified as a
`Request`, `Notification`, `Response` or `Invalid` (an input that deserves an error reply).
The ``encode_*`` functions build the only envelopes this project sends: a reply holds exactly
``jsonrpc``, ``id`` and ``result`` or ``error``; a request ``jsonrpc``, ``id``, ``method`` and
``params``; a notification ``jsonrpc``, ``method`` and ``params``.

Classification follows the JSON-RPC 2.0 specification:

- a body that is not JSON (or not UTF-8) is one `Invalid` with `ParseError` (-32700, id null);
- an empty array is one `Invalid` with `InvalidRequest`, answered as a single object;
- a non-empty array is a batch: each element is classified on its own;
- an element that is not an object, lacks ``"jsonrpc": "2.0"``, has a non-string ``method``,
  an ``id`` that is not a string or an integer (booleans, floats, null and structures are
  refused), or ``params`` that are neither an object, an array nor null is `Invalid` with
  `InvalidRequest`; its id is echoed when it could be read;
- ``params`` as an array is structurally valid JSON-RPC; it is left to the dispatcher, which
  answers -32602 because every method of this protocol takes named parameters;
- an element with an ``id`` (or a ``result``/``error``) and no ``method`` is a `Response`.

Members beyond JSON-RPC's own are ignored on input (be lenient in what you accept) and never
produced on output.

A client's side of a call ends in `decode_result`, `ConnectionLost` or `MalformedResponse`;
they live here, free of any I/O library, so that the trio peer (`protocol.peer`) and the
blocking client (`protocol.blocking_client`) fail the same way.

Its size is one concept: what a JSON-RPC message is, both ways — every way a frame can be
read (batches and their limit, envelopes no value holds, nesting the stack must bound) and
the only envelopes written.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType

from protocol.errors import InvalidRequest, ParseError, RpcError
from protocol.validate import located

__all__ = [
    "JSONRPC_VERSION",
    "ConnectionLost",
    "Frame",
    "Invalid",
    "MalformedResponse",
    "Message",
    "Notification",
    "Request",
    "RequestId",
    "Response",
    "decode_result",
    "encode_batch",
    "encode_error",
    "encode_notification",
    "encode_request",
    "encode_result",
    "is_request_id",
    "params_kind",
    "parse_frame",
]

JSONRPC_VERSION: Final = "2.0"
#: The most messages one batch may hold. JSON-RPC sets none; without one, a frame of millions
#: of tiny members (``[1,1,…]`` fills 16 MiB with 8 million) made as many error replies, held
#: the event loop for tens of seconds and gigabytes of memory. A larger batch is one -32600
#: with ``data.limit``, and nothing of it runs.
MAX_BATCH: Final = 1_000

RequestId = int | str


def is_request_id(value: object) -> bool:
    """Whether `value` may be a request id here: a string or an integer, never a bool."""
    return type(value) is int or type(value) is str


class Request(Struct, frozen=True):
    """A call that expects a reply. `params` is None when absent or null (meaning ``{}``)."""

    id: RequestId
    method: str
    params: Raw | None


class Notification(Struct, frozen=True):
    """A call that is never answered, not even with an error."""

    method: str
    params: Raw | None


class Response(Struct, frozen=True):
    """A reply to one of our requests.

    Exactly one of `result` (possibly the JSON text ``null``), `error` and `problem` is set:
    `problem` says why the reply is unusable (no result nor error, both, a malformed error
    object). `id` is None when the peer sent null or an id of another type.
    """

    id: RequestId | None
    result: Raw | None = None
    error: RpcError | None = None
    problem: str | None = None


class Invalid(Struct, frozen=True):
    """An input that gets `error` as its reply, under `id` (None: the id could not be read)."""

    id: RequestId | None
    error: RpcError


Message = Request | Notification | Response | Invalid


class Frame(Struct, frozen=True):
    """The messages of one frame body. When `batch` is true, the replies to its requests (and
    to its invalid elements) go back together as one array, or not at all if there are none."""

    messages: list[Message]
    batch: bool


class _Envelope(Struct):
    """Any JSON object, with the JSON-RPC members picked out and left untyped for checking."""

    jsonrpc: Any = UNSET
    id: Any = UNSET
    method: Any = UNSET
    params: Raw | UnsetType = UNSET
    result: Raw | UnsetType = UNSET
    error: Any = UNSET


_envelope_decoder: Final = msgspec.json.Decoder(_Envelope)
_batch_decoder: Final = msgspec.json.Decoder(list[Raw])
_raw_decoder: Final = msgspec.json.Decoder(Raw)
_members_decoder: Final = msgspec.json.Decoder(dict[str, Raw])
_id_decoder: Final = msgspec.json.Decoder(int | str | None)


#: Stack frames a frame's decode leaves unused (see `parse_frame`).
DECODE_HEADROOM: Final = 256
#: Nesting that every decode reaches wherever it runs (well under the recursion limit less
#: the headroom): a frame with fewer opening brackets needs no headroom.
_SHALLOW: Final = 512


def parse_frame(body: bytes) -> Frame:
    """Classify every message of one frame body. Never raises for any input: a message
    nested deeper than the decoder allows is a parse error like any other unparseable one
    (PROTOCOL §10.2), so the connection goes on.

    How deep the decoder goes is bounded by Python's recursion limit, counted from where it
    runs; what a handler later does with the value (converting it, encoding it to save it)
    runs deeper in the stack and would hit the limit where the decode did not: a script
    nested 969 levels passed the wire and failed `session/create` with -32603. So a frame
    that could nest that deep is decoded `DECODE_HEADROOM` frames further down the stack than
    it is handled, and a message that gets through leaves every handler that much room. A
    frame with fewer than `_SHALLOW` opening brackets cannot (the usual case: two C-speed
    counts) and is decoded where it stands, with the same outcome. (Measured on CPython
    3.11, where the decoder's depth and Python calls share one recursion count; 3.12 counts
    C recursion apart, so there the headroom would not narrow the decoder: untested.)
    """
    try:
        if len(body) < 2 * _SHALLOW or body.count(b"{") + body.count(b"[") < _SHALLOW:
            return _parse_frame(body)  # (a level of nesting takes two bytes)
        return _deeper(DECODE_HEADROOM, body)
    except RecursionError:
        return _parse_error("nested too deeply")


def _deeper(frames: int, body: bytes) -> Frame:
    """`_parse_frame(body)`, called `frames` stack frames below this one."""
    return _deeper(frames - 1, body) if frames else _parse_frame(body)


def _parse_frame(body: bytes) -> Frame:
    if not body.isascii():
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            return _parse_error("frame is not valid UTF-8")
    if body.lstrip(b" \t\r\n")[:1] == b"[":
        try:
            elements = _batch_decoder.decode(body)
        except msgspec.DecodeError as exc:
            return _parse_error(_syntax_detail(exc))
        if not elements:
            return Frame([Invalid(None, InvalidRequest("invalid request: empty batch"))], False)
        if len(elements) > MAX_BATCH:
            refused = InvalidRequest(
                f"invalid request: a batch of {len(elements):,} messages; at most "
                f"{MAX_BATCH:,} are taken (send it as smaller batches)",
                {"limit": MAX_BATCH},
            )
            return Frame([Invalid(None, refused)], False)
        return Frame([m for element in elements for m in _classify_element(element)], True)
    try:
        envelope = _envelope_decoder.decode(body)
    except msgspec.ValidationError as refused:
        # Not an object, or one with a member no value holds — but is it JSON at all? A typed
        # decode can refuse the shape before it reaches a syntax error further on, so syntax
        # is checked on its own.
        try:
            _raw_decoder.decode(body)
        except msgspec.DecodeError as exc:
            return _parse_error(_syntax_detail(exc))
        return Frame(_unreadable_envelope(body, refused), False)
    except msgspec.DecodeError as exc:
        return _parse_error(_syntax_detail(exc))
    return Frame([_classify(envelope)], False)


def params_kind(params: Raw) -> str:
    """``"object"``, ``"array"``, ``"null"`` or ``"other"``, from the first byte of `params`."""
    first = bytes(params).lstrip(b" \t\r\n")[:1]
    return {b"{": "object", b"[": "array", b"n": "null"}.get(first, "other")


# -- classification -------------------------------------------------------------------------


def _parse_error(detail: str) -> Frame:
    return Frame([Invalid(None, ParseError(f"parse error: {detail}"))], False)


def _syntax_detail(exc: msgspec.DecodeError) -> str:
    return str(exc) or "malformed JSON"


def _not_an_object() -> Invalid:
    return Invalid(None, InvalidRequest("invalid request: a message must be a JSON object"))


def _classify_element(element: Raw) -> list[Message]:
    try:
        envelope = _envelope_decoder.decode(element)
    except msgspec.ValidationError as refused:  # the batch decode vouched for the syntax
        return _unreadable_envelope(element, refused)
    return [_classify(envelope)]


def _unreadable_envelope(data: bytes | Raw, refused: msgspec.ValidationError) -> list[Message]:
    """What a JSON value the envelope refused is: no object at all; a response (no
    ``method``, a ``result`` or ``error``) — unusable, and answered to whoever awaits its id
    when the id can be read, else ignored (nothing can await it, PROTOCOL §2); else a request
    refused where msgspec says (``1e400`` as an id: "number out of range at $.id")."""
    try:
        members = _members_decoder.decode(data)
    except msgspec.DecodeError:
        return [_not_an_object()]
    path, problem = located(refused)
    if "method" not in members and ("result" in members or "error" in members):
        try:
            request_id = _id_decoder.decode(members.get("id", b"null"))
        except msgspec.DecodeError:
            return []
        if request_id is None:
            return []
        return [Response(request_id, problem=f"response {problem} at {path}")]
    return [Invalid(None, InvalidRequest(f"invalid request: {problem} at {path}"))]


def _classify(envelope: _Envelope) -> Message:
    if envelope.method is UNSET:
        if envelope.id is UNSET and envelope.result is UNSET and envelope.error is UNSET:
            return Invalid(
                None, InvalidRequest("invalid request: neither a request nor a response")
            )
        return _response(envelope)

    has_id = envelope.id is not UNSET
    if has_id and not is_request_id(envelope.id):
        return Invalid(None, InvalidRequest("invalid request: id must be a string or an integer"))
    request_id: RequestId | None = envelope.id if has_id else None
    if envelope.jsonrpc != JSONRPC_VERSION:
        return Invalid(request_id, InvalidRequest('invalid request: "jsonrpc" must be "2.0"'))
    if not isinstance(envelope.method, str):
        return Invalid(request_id, InvalidRequest("invalid request: method must be a string"))

    params: Raw | None = None
    if not isinstance(envelope.params, UnsetType):
        kind = params_kind(envelope.params)
        if kind == "other":
            return Invalid(request_id, InvalidRequest("invalid request: params must be an object"))
        if kind != "null":
            params = envelope.params

    if request_id is None:
        return Notification(envelope.method, params)
    return Request(request_id, envelope.method, params)


def _response(envelope: _Envelope) -> Response:
    request_id = envelope.id if is_request_id(envelope.id) else None
    has_error = envelope.error is not UNSET
    if isinstance(envelope.result, Raw):
        if has_error:
            return Response(request_id, problem="response has both result and error")
        return Response(request_id, result=envelope.result)
    if not has_error:
        return Response(request_id, problem="response has neither result nor error")
    error = envelope.error
    if (
        not isinstance(error, dict)
        or type(error.get("code")) is not int
        or not isinstance(error.get("message"), str)
    ):
        return Response(request_id, problem="response error is not {code: integer, message}")
    return Response(request_id, error=RpcError.from_wire(error))


# -- encoding -------------------------------------------------------------------------------


class _Success(Struct):
    jsonrpc: str
    id: RequestId | None
    result: Raw


class _Failure(Struct):
    jsonrpc: str
    id: RequestId | None
    error: dict[str, Any]


class _Call(Struct):
    jsonrpc: str
    id: RequestId
    method: str
    params: Any = UNSET


class _Notice(Struct):
    jsonrpc: str
    method: str
    params: Any = UNSET


_encoder: Final = msgspec.json.Encoder()


def encode_result(request_id: RequestId | None, result: Any) -> bytes:
    """A success reply. `result` is anything msgspec encodes (a Struct, a dict, None → null).

    Raises `TypeError` (or `msgspec.EncodeError`) when `result` cannot be encoded; the caller
    decides what to answer instead.
    """
    raw = Raw(_encoder.encode(result))
    return _encoder.encode(_Success(JSONRPC_VERSION, request_id, raw))


def encode_error(request_id: RequestId | None, error: RpcError) -> bytes:
    """An error reply ``{code, message, data?}``. Never raises: `data` that cannot be encoded is
    dropped rather than losing the reply."""
    wire = error.to_wire()
    try:
        return _encoder.encode(_Failure(JSONRPC_VERSION, request_id, wire))
    except (TypeError, ValueError):
        wire.pop("data", None)
        return _encoder.encode(_Failure(JSONRPC_VERSION, request_id, wire))


def encode_request(request_id: RequestId, method: str, params: Any = None) -> bytes:
    """A request; `params` None leaves the member out (the receiver reads it as ``{}``)."""
    return _encoder.encode(
        _Call(JSONRPC_VERSION, request_id, method, UNSET if params is None else params)
    )


def encode_notification(method: str, params: Any = None) -> bytes:
    """A notification; `params` None leaves the member out."""
    return _encoder.encode(_Notice(JSONRPC_VERSION, method, UNSET if params is None else params))


def encode_batch(bodies: list[bytes]) -> bytes:
    """Join encoded messages into one batch array."""
    return b"[" + b",".join(bodies) + b"]"


# -- a client's outcome ---------------------------------------------------------------------


class ConnectionLost(ConnectionError):
    """The connection ended before a reply arrived, or a message could not be sent."""


class MalformedResponse(ValueError):
    """The remote's reply was not a usable JSON-RPC response, or its result had the wrong
    shape for the requested type."""


def decode_result(method: str, result: Raw, result_type: Any = None) -> Any:
    """The `result` of a successful reply to `method`, decoded as `result_type` (plain JSON
    values when None). Raises `MalformedResponse` when it does not have that shape."""
    try:
        if result_type is None:
            return msgspec.json.decode(result)
        return msgspec.json.decode(result, type=result_type)
    except msgspec.DecodeError as exc:
        raise MalformedResponse(f"result of {method} does not match: {exc}") from None
