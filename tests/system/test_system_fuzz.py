"""Untrusted input against a REAL robotad process: every method's params, and the envelopes.

One daemon subprocess serves the whole module (its own private state, offline scripted
provider). Each example opens a raw connection, sends its frames in the drawn framing (NDJSON
or Content-Length) cut into arbitrary chunks, half-closes and reads every reply; then a fresh
connection must still be served. Afterwards the daemon must be alive and its log free of
handler failures. Budgets are fixed (``max_examples``) so the run time is bounded.

Params come from `param_strategies`: random JSON objects, and near-valid params type-directed
from the method's params Struct in `protocol.methods.METHODS`. msgspec, with the params type
the daemon decodes with (`ORACLE`), is the oracle:
- params it refuses are answered -32602 whose ``data.issues`` names every drawn defect at its
  path (G-215), every issue a ``{path, message}`` pair;
- params it accepts are answered with a result of the method's result type, or an application
  error (-32001…-32014) or a semantic -32602 — never -32601 (every method is served),
  -32603, -32600 or -32700.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
import trio
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from protocol.framing import Framing, encode_frame
from protocol.methods import METHODS
from robotad.server.daemon_methods import InitializeParams as LenientInitializeParams
from tests.server.server_harness import RawClient, assert_response
from tests.system.daemon_process import DaemonProcess, daemon_home, running_daemon
from tests.system.param_strategies import (
    KNOWN_SESSION_IDS,
    ParamsCase,
    arbitrary_json,
    is_valid,
    near_valid_params,
    random_params,
)

#: Absolute bound on one example's socket I/O.
EXAMPLE_TIMEOUT = 30.0

FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)

APPLICATION_CODES = frozenset(range(-32014, -32000))
#: The params type the daemon decodes with, where it is deliberately not METHODS' own:
#: ``initialize`` accepts LSP editors' extra members (robotad/server/daemon_methods.py).
ORACLE: dict[str, type[msgspec.Struct]] = {name: params for name, (params, _) in METHODS.items()}
ORACLE["initialize"] = LenientInitializeParams
_RESULT_DECODERS = {name: msgspec.json.Decoder(result) for name, (_, result) in METHODS.items()}
_methods = st.sampled_from(sorted(METHODS))
_framings = st.sampled_from(["ndjson", "content-length"])


@pytest.fixture(scope="module")
def fuzz_daemon() -> Iterator[DaemonProcess]:
    """One daemon for the module, holding the sessions `KNOWN_SESSION_IDS` names."""
    with daemon_home() as home, running_daemon(home) as daemon:
        trio.run(_create_known_sessions, daemon, str(home.workspace("fuzz")))
        yield daemon
        assert daemon.alive(), f"robotad died under fuzzing:\n{daemon.output()[-4000:]}"
        assert "Traceback" not in daemon.output(), daemon.output()[-4000:]


async def _create_known_sessions(daemon: DaemonProcess, cwd: str) -> None:
    creates = [
        {
            "jsonrpc": "2.0",
            "id": sid,
            "method": "session/create",
            "params": {"cwd": cwd, "sessionId": sid},
        }
        for sid in KNOWN_SESSION_IDS
    ]
    with trio.fail_after(EXAMPLE_TIMEOUT):
        replies = await exchange(daemon, "ndjson", creates, [])
    assert all("result" in reply for reply in replies), replies


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({cut % (len(data) + 1) for cut in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges) if b > a]


async def exchange(
    daemon: DaemonProcess, framing: Framing, messages: list[Any], cuts: list[int]
) -> list[Any]:
    """Send `messages` as frames cut at `cuts`, half-close, and return every reply (the
    ``session/event`` notifications a run's caller gets are checked and left out)."""
    client = await RawClient.connect(daemon.socket_path, framing)
    try:
        data = b"".join(encode_frame(json.dumps(m).encode(), framing) for m in messages)
        for piece in chunked(data, cuts):
            await client.send_raw(piece)
        await client.half_close()
        received = await client.receive_all()
    finally:
        await client.aclose()
    notifications = [m for m in received if isinstance(m, dict) and "method" in m]
    assert all(n["method"] == "session/event" and "id" not in n for n in notifications), received
    return [m for m in received if not (isinstance(m, dict) and "method" in m)]


async def assert_still_served(daemon: DaemonProcess, framing: Framing) -> None:
    """A fresh connection gets a daemon/status answer."""
    probe = {"jsonrpc": "2.0", "id": "probe", "method": "daemon/status"}
    (reply,) = await exchange(daemon, framing, [probe], [])
    assert reply["id"] == "probe", reply
    assert reply["result"]["pid"] == daemon.pid, reply


def assert_located_refusal(reply: dict[str, Any], case: ParamsCase | None) -> None:
    """-32602 listing issues as ``{path, message}``; every drawn defect among them."""
    error = reply.get("error")
    assert error is not None, reply
    assert error["code"] == -32602, reply
    issues = error.get("data", {}).get("issues")
    assert isinstance(issues, list), reply
    assert issues, reply
    for issue in issues:
        assert set(issue) == {"path", "message"}, issue
        assert issue["path"].startswith("$"), issue
        assert isinstance(issue["message"], str), issue
    for defect in case.defects if case else ():
        assert any(defect.named_by(issue["path"]) for issue in issues), (defect, issues)


def assert_accepted_answer(method: str, reply: dict[str, Any]) -> None:
    """A result of the method's result type, or an application or semantic refusal."""
    if "result" in reply:
        _RESULT_DECODERS[method].decode(json.dumps(reply["result"]).encode())
        return
    code = reply["error"]["code"]
    assert code != -32601, f"{method} is not served: {reply}"
    assert code in APPLICATION_CODES or code == -32602, reply
    if code == -32602:
        assert_located_refusal(reply, None)


def _deliverable(method: str, case: ParamsCase) -> bool:
    """daemon/shutdown is only ever sent with params it refuses (it would end the run)."""
    return method != "daemon/shutdown" or not is_valid(ORACLE[method], case.params)


@FUZZ
@given(
    data=st.data(),
    framing=_framings,
    count=st.integers(1, 4),
    cuts=st.lists(st.integers(min_value=0), max_size=4),
)
async def test_every_method_answers_near_valid_params_exactly(
    fuzz_daemon: DaemonProcess, data: st.DataObject, framing: Framing, count: int, cuts: list[int]
) -> None:
    """G-215: each refused params object is -32602 naming every defect at its own path; each
    accepted one gets a typed result or an application error; the daemon serves on."""
    cases: list[tuple[str, ParamsCase]] = []
    for _ in range(count):
        method = data.draw(_methods, label="method")
        strategy = near_valid_params(METHODS[method][0]) | random_params(ORACLE[method])
        case = data.draw(strategy, label="params")
        assume(_deliverable(method, case))
        cases.append((method, case))
    messages = [
        {"jsonrpc": "2.0", "id": index, "method": method, "params": case.params}
        for index, (method, case) in enumerate(cases)
    ]
    with trio.fail_after(EXAMPLE_TIMEOUT):
        replies = await exchange(fuzz_daemon, framing, messages, cuts)
        by_id = {reply["id"]: reply for reply in replies}
        assert sorted(by_id) == list(range(len(cases))), replies
        for index, (method, case) in enumerate(cases):
            reply = by_id[index]
            assert_response(reply)
            code = reply["error"]["code"] if "error" in reply else "result"
            event(f"{'valid' if is_valid(ORACLE[method], case.params) else 'defective'} → {code}")
            if is_valid(ORACLE[method], case.params):
                assert_accepted_answer(method, reply)
            else:
                assert_located_refusal(reply, case)
        await assert_still_served(fuzz_daemon, framing)


# -- envelopes --------------------------------------------------------------------------------

_ABSENT = object()
_bad_ids = st.sampled_from([True, False, 1.5, [], {}, [1], {"a": 1}, None])
_good_ids = st.integers(-(2**53), 2**53) | st.text(max_size=8)


@st.composite
def envelopes(draw: st.DrawFn) -> tuple[dict[str, Any], int | None]:
    """A message around a real method and the code it must get (None: no reply at all)."""
    method = draw(_methods.filter(lambda m: m != "daemon/shutdown"))
    variant = draw(
        st.sampled_from(
            [
                "bad_version",
                "bad_id",
                "bad_method",
                "scalar_params",
                "array_params",
                "unknown_method",
                "notification",
                "bad_notification",
            ]
        )
    )
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if variant not in ("notification", "bad_notification"):
        message["id"] = draw(_good_ids)
    params = draw(st.dictionaries(st.text(max_size=6), arbitrary_json, max_size=2))
    message["params"] = params
    expected: int | None
    if variant == "bad_version":
        message["jsonrpc"] = draw(st.sampled_from([_ABSENT, "1.0", 2.0, None, "2.0 "]))
        expected = -32600
    elif variant == "bad_id":
        message["id"] = draw(_bad_ids)
        expected = -32600
    elif variant == "bad_method":
        message["method"] = draw(st.sampled_from([1, None, [], {"m": method}, True]))
        expected = -32600
    elif variant == "scalar_params":
        message["params"] = draw(st.sampled_from([1, "x", True, 2.5]))
        expected = -32600
    elif variant == "array_params":
        message["params"] = draw(st.lists(arbitrary_json, max_size=3))
        expected = -32602
    elif variant == "unknown_method":
        message["method"] = draw(st.sampled_from(["session/nope", "daemon/", "Session/get", ""]))
        expected = -32601
    elif variant == "notification":
        expected = None  # a well-formed notification is never answered, whatever its params
    else:
        message["jsonrpc"] = "1.0"
        expected = -32600  # an invalid message without an id is answered with id null
    return {k: v for k, v in message.items() if v is not _ABSENT}, expected


@FUZZ
@given(
    cases=st.lists(envelopes(), min_size=1, max_size=5),
    framing=_framings,
    batch=st.booleans(),
    cuts=st.lists(st.integers(min_value=0), max_size=4),
)
async def test_envelopes_get_the_code_json_rpc_prescribes(
    fuzz_daemon: DaemonProcess,
    cases: list[tuple[dict[str, Any], int | None]],
    framing: Framing,
    batch: bool,
    cuts: list[int],
) -> None:
    """Invalid requests -32600 (id echoed when readable), array params -32602, unknown methods
    -32601, notifications unanswered, in single frames and in batches, both framings."""
    probe = {"jsonrpc": "2.0", "id": "last", "method": "daemon/status"}
    cases = [(_unique_id(message, index), code) for index, (message, code) in enumerate(cases)]
    messages = [message for message, _ in cases]
    frames: list[Any] = [messages, probe] if batch else [*messages, probe]
    with trio.fail_after(EXAMPLE_TIMEOUT):
        replies = await exchange(fuzz_daemon, framing, frames, cuts)
    flat: list[Any] = []
    for reply in replies:
        flat.extend(reply if isinstance(reply, list) else [reply])
    for reply in flat:
        assert_response(reply)
    probes = [r for r in flat if r["id"] == "last" and "result" in r]
    assert len(probes) == 1, replies  # replies may come in any order (JSON-RPC 2.0)
    got = sorted((json.dumps(r["id"]), r["error"]["code"]) for r in flat if r not in probes)
    wanted = sorted(
        (json.dumps(_echoed_id(message)), code) for message, code in cases if code is not None
    )
    assert got == wanted, (cases, replies)
    await assert_still_served(fuzz_daemon, framing)


def _unique_id(message: dict[str, Any], index: int) -> dict[str, Any]:
    """`message` with a readable id made unique on its connection (a second request under an
    id still in flight is refused -32600 by design)."""
    value = message.get("id")
    if type(value) is int:
        return {**message, "id": index}
    if type(value) is str:
        return {**message, "id": f"{value}#{index}"}
    return message


def _echoed_id(message: dict[str, Any]) -> Any:
    """The id a reply to an invalid or refused message carries: its id when it is a string or
    an integer, else null."""
    value = message.get("id")
    return value if type(value) in (int, str) else None


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(garbage=st.binary(min_size=1, max_size=200), framing=_framings)
async def test_garbage_frames_are_parse_errors_and_the_daemon_serves_on(
    fuzz_daemon: DaemonProcess, garbage: bytes, framing: Framing
) -> None:
    """A frame that is not JSON is -32700 with id null (or -32600 for JSON that is no
    request); the connection and the daemon keep serving."""
    body = b"\x00" + garbage  # never valid JSON
    if framing == "ndjson":
        body = body.replace(b"\n", b" ")
    frames = [
        encode_frame(json.dumps(_probe(name)).encode(), framing) for name in ("before", "after")
    ]
    data = frames[0] + encode_frame(body, framing) + frames[1]
    with trio.fail_after(EXAMPLE_TIMEOUT):
        client = await RawClient.connect(fuzz_daemon.socket_path, framing)
        try:
            await client.send_raw(data)
            await client.half_close()
            replies = await client.receive_all()
        finally:
            await client.aclose()
    for reply in replies:
        assert_response(reply)
    assert [r["id"] for r in replies] == ["before", None, "after"], replies
    assert replies[1]["error"]["code"] == -32700, replies
    await assert_still_served(fuzz_daemon, framing)


def _probe(request_id: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "daemon/status"}


async def test_a_cross_member_defect_is_listed_beside_the_others(
    fuzz_daemon: DaemonProcess,
) -> None:
    """G-215: a script step that is both a summary and a reply step is refused at its own path
    even when another parameter is invalid too (the generator above never draws this
    cross-member defect, so it is pinned here)."""
    params = {"cwd": 1, "script": [{"summary": "s", "text": "t"}]}
    message = {"jsonrpc": "2.0", "id": 1, "method": "session/create", "params": params}
    with trio.fail_after(EXAMPLE_TIMEOUT):
        (reply,) = await exchange(fuzz_daemon, "ndjson", [message], [])
    paths = {issue["path"] for issue in reply["error"]["data"]["issues"]}
    assert paths == {"$.cwd", "$.script[0]"}, reply
