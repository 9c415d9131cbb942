"""protocol.blocking_client: the trio-free client of robotactl's one-shot commands.

Framing and message edge cases run against the other end of a socketpair: what "the daemon"
sends is written before the request goes out (request ids are predictable), so every case is
deterministic without a thread or a sleep. Error mapping, subscribed connections and imports
are checked against a real robotad.
"""

from __future__ import annotations

import errno
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import jsonrpc
from protocol.blocking_client import (
    BlockingClient,
    RequestTimeout,
    open_blocking_connection,
)
from protocol.client import open_connection
from protocol.errors import CODES, InvalidRequest, RpcError, SessionBusy
from protocol.framing import FrameDecoder, Framing, encode_frame
from protocol.jsonrpc import ConnectionLost, MalformedResponse, Notification, Request
from protocol.methods import DaemonStatus, SessionList

from .conftest import PROCESS_TIMEOUT, REPO, RunningDaemon, child_environment


@pytest.fixture
def pair() -> Iterator[tuple[BlockingClient, socket.socket]]:
    """A client on one end of a socketpair, and the other end (standing for the daemon)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    theirs.settimeout(PROCESS_TIMEOUT)
    client = BlockingClient(ours, timeout=PROCESS_TIMEOUT)
    try:
        yield client, theirs
    finally:
        client.close()
        theirs.close()


def result_frame(request_id: int | str | None, result: Any, framing: Framing = "ndjson") -> bytes:
    return encode_frame(jsonrpc.encode_result(request_id, result), framing)


def event_frame(seq: int, framing: Framing = "ndjson") -> bytes:
    body = jsonrpc.encode_notification("session/event", {"sessionId": "s", "seq": seq})
    return encode_frame(body, framing)


def sent_by_client(theirs: socket.socket) -> list[jsonrpc.Message]:
    """Every message the client has written so far, in order."""
    theirs.setblocking(False)
    data = b""
    try:
        while chunk := theirs.recv(65536):
            data += chunk
    except BlockingIOError:
        pass
    finally:
        theirs.settimeout(PROCESS_TIMEOUT)
    return [
        message
        for body in FrameDecoder().feed(data)
        for message in jsonrpc.parse_frame(body).messages
    ]


# -- replies as they may arrive -----------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(
    framing=st.sampled_from(["ndjson", "content-length"]),
    receive_size=st.integers(min_value=1, max_value=40),
    events=st.integers(min_value=0, max_value=3),
    late_reply=st.booleans(),
    result=st.dictionaries(st.text(max_size=6), st.integers() | st.text(max_size=10), max_size=4),
)
def test_a_reply_cut_anywhere_and_preceded_by_anything_is_read_whole(
    framing: Framing, receive_size: int, events: int, late_reply: bool, result: dict[str, Any]
) -> None:
    """Whatever the chunking (down to one byte per read) and the framing, events before the
    reply reach the callback in order, a reply to another id is skipped, and the result is
    exactly what was sent."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    seen: list[tuple[str, Any]] = []
    client = BlockingClient(
        ours,
        timeout=PROCESS_TIMEOUT,
        receive_size=receive_size,
        on_notification=lambda method, params: seen.append((method, msgspec.json.decode(params))),
    )
    with client, theirs:
        stream = b"".join(event_frame(seq, framing) for seq in range(events))
        if late_reply:
            stream += result_frame(99, "stale", framing)
        theirs.sendall(stream + result_frame(1, result, framing))
        assert client.request("session/get", {"sessionId": "s"}) == result
        assert seen == [("session/event", {"sessionId": "s", "seq": seq}) for seq in range(events)]
        (request,) = sent_by_client(theirs)
    assert isinstance(request, Request)
    assert (request.id, request.method) == (1, "session/get")
    assert request.params is not None
    assert msgspec.json.decode(request.params) == {"sessionId": "s"}


def test_a_content_length_client_frames_its_requests_so(
    pair: tuple[BlockingClient, socket.socket],
) -> None:
    client, theirs = pair
    client.framing = "content-length"
    theirs.sendall(result_frame(1, {"ok": True}))  # replies may come in either framing
    assert client.request("daemon/status") == {"ok": True}
    data = theirs.recv(65536)
    assert data.startswith(b"Content-Length: ")
    decoder = FrameDecoder()
    (body,) = decoder.feed(data)
    assert decoder.framing == "content-length"
    (request,) = jsonrpc.parse_frame(body).messages
    assert isinstance(request, Request)
    assert request.params is None  # no params: the member is left out, read as {}


def test_sequential_requests_take_increasing_ids(
    pair: tuple[BlockingClient, socket.socket],
) -> None:
    client, theirs = pair
    answers = []
    for request_id, answer in enumerate(["one", "two", "three"], start=1):
        theirs.sendall(result_frame(request_id, answer))
        answers.append(client.request("m"))
    assert answers == ["one", "two", "three"]
    assert [getattr(m, "id", None) for m in sent_by_client(theirs)] == [1, 2, 3]


def test_without_a_callback_events_are_skipped(
    pair: tuple[BlockingClient, socket.socket],
) -> None:
    client, theirs = pair
    theirs.sendall(event_frame(0) + event_frame(1) + result_frame(1, 1))
    assert client.request("m") == 1


def test_dollar_notifications_never_reach_the_callback() -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    seen: list[str] = []
    client = BlockingClient(ours, on_notification=lambda method, _params: seen.append(method))
    with client, theirs:
        progress = encode_frame(jsonrpc.encode_notification("$/progress", {}), "ndjson")
        theirs.sendall(progress + event_frame(1) + result_frame(1, 2))
        assert client.request("m") == 2
    assert seen == ["session/event"]


def test_a_last_reply_without_a_newline_is_read_at_end_of_stream(
    pair: tuple[BlockingClient, socket.socket],
) -> None:
    client, theirs = pair
    theirs.sendall(result_frame(1, {"last": True}).rstrip(b"\n"))
    theirs.shutdown(socket.SHUT_WR)
    assert client.request("m") == {"last": True}
    assert client.closed  # nothing more can come


def test_a_request_from_the_daemon_is_answered_method_not_found(
    pair: tuple[BlockingClient, socket.socket],
) -> None:
    client, theirs = pair
    ping = encode_frame(jsonrpc.encode_request("srv-1", "client/ping", {}), "ndjson")
    theirs.sendall(ping + result_frame(1, "pong"))
    assert client.request("m") == "pong"
    ours, refusal = sent_by_client(theirs)
    assert isinstance(ours, Request)
    assert isinstance(refusal, jsonrpc.Response)
    assert refusal.id == "srv-1"
    assert refusal.error is not None
    assert refusal.error.code == -32601


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", sorted(CODES))
def test_every_error_code_comes_back_as_its_class(
    pair: tuple[BlockingClient, socket.socket], code: int
) -> None:
    client, theirs = pair
    data = {"sessionId": "s1", "turnId": "t1"}
    failure = {"jsonrpc": "2.0", "id": 1, "error": {"code": code, "message": "m", "data": data}}
    theirs.sendall(json.dumps(failure).encode() + b"\n")
    with pytest.raises(RpcError) as caught:
        client.request("m")
    assert type(caught.value) is CODES[code]
    assert (caught.value.code, caught.value.message, caught.value.data) == (code, "m", data)


def test_an_unknown_code_keeps_its_number(pair: tuple[BlockingClient, socket.socket]) -> None:
    client, theirs = pair
    theirs.sendall(b'{"jsonrpc":"2.0","id":1,"error":{"code":-32099,"message":"new"}}\n')
    with pytest.raises(RpcError) as caught:
        client.request("m")
    assert type(caught.value) is RpcError
    assert caught.value.code == -32099
    theirs.sendall(result_frame(2, "still usable"))
    assert client.request("m") == "still usable"


def test_an_error_with_a_null_id_fails_the_waiting_request(
    pair: tuple[BlockingClient, socket.socket],
) -> None:
    """What the daemon answers to a frame it could not read is about our request."""
    client, theirs = pair
    refusal = InvalidRequest("invalid request: frame larger than 10 bytes", {"limit": 10})
    theirs.sendall(encode_frame(jsonrpc.encode_error(None, refusal), "ndjson"))
    with pytest.raises(InvalidRequest) as caught:
        client.request("m", {"big": "x" * 20})
    assert caught.value.data == {"limit": 10}


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (b'{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"m"}}', "both"),
        (b'{"jsonrpc":"2.0","id":1}', "neither result nor error"),
        (b'{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"m"}}', "code: integer"),
        (b'{"jsonrpc":"2.0","id":1,"result":', "not JSON-RPC: parse error"),
        (b"[]", "not JSON-RPC: invalid request: empty batch"),
    ],
)
def test_unusable_replies_are_malformed(
    pair: tuple[BlockingClient, socket.socket], reply: bytes, reason: str
) -> None:
    client, theirs = pair
    theirs.sendall(reply + b"\n")
    with pytest.raises(MalformedResponse, match=reason):
        client.request("m")
    assert not client.closed  # the framing held: the connection goes on


def test_a_result_of_the_wrong_shape_is_malformed(
    pair: tuple[BlockingClient, socket.socket],
) -> None:
    client, theirs = pair
    theirs.sendall(result_frame(1, {"sessions": "not a list"}))
    with pytest.raises(MalformedResponse, match="result of session/list does not match"):
        client.request("session/list", result_type=SessionList)


@pytest.mark.parametrize(
    ("stream", "max_frame_bytes", "reason"),
    [
        (b"garbage\n", 1024, "unknown framing"),
        (b"Content-Length: x\r\n\r\n{}", 1024, "not a non-negative integer"),
        (b'{"jsonrpc":"2.0","id":1,"result":"' + b"x" * 64 + b'"}\n', 32, "larger than 32"),
    ],
)
def test_a_broken_framing_is_malformed_and_closes_the_client(
    stream: bytes, max_frame_bytes: int, reason: str
) -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    client = BlockingClient(ours, timeout=PROCESS_TIMEOUT, max_frame_bytes=max_frame_bytes)
    with client, theirs:
        theirs.sendall(stream)
        with pytest.raises(MalformedResponse, match=reason):
            client.request("m")
        assert client.closed
        with pytest.raises(ConnectionLost):
            client.request("m")


def test_a_reply_before_a_framing_violation_is_still_returned() -> None:
    """The frames completed before an oversized one are intact; the client then closes."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    client = BlockingClient(ours, timeout=PROCESS_TIMEOUT, max_frame_bytes=48)
    with client, theirs:
        theirs.sendall(result_frame(1, "intact") + b'{"jsonrpc":"2.0","method":"' + b"x" * 64)
        assert client.request("m") == "intact"
        assert client.closed


def test_end_of_stream_before_the_reply_is_connection_lost(
    pair: tuple[BlockingClient, socket.socket],
) -> None:
    client, theirs = pair
    theirs.sendall(event_frame(0))
    theirs.shutdown(socket.SHUT_WR)
    with pytest.raises(ConnectionLost, match="closed before the reply arrived"):
        client.request("m")
    assert client.closed
    with pytest.raises(ConnectionLost, match="connection closed"):
        client.request("m")


def test_a_write_the_daemon_refuses_is_connection_lost(
    pair: tuple[BlockingClient, socket.socket],
) -> None:
    client, theirs = pair
    theirs.close()
    with pytest.raises(ConnectionLost, match="closed by the remote"):
        client.request("m")
    assert client.closed


def test_a_refusal_sent_before_the_daemon_closed_mid_write_is_that_error(
    pair: tuple[BlockingClient, socket.socket],
) -> None:
    """A request over the daemon's size limit gets -32600 and the connection closes while
    the request is still being written: the write fails, and that was ConnectionLost (which
    robotactl said as "robotad is shutting down or restarting") though the reason had come."""
    client, theirs = pair
    refusal = InvalidRequest("invalid request: frame larger than 10 bytes", {"limit": 10})
    theirs.sendall(encode_frame(jsonrpc.encode_error(None, refusal), "ndjson"))
    theirs.close()
    with pytest.raises(InvalidRequest) as caught:
        client.request("m", {"big": "x" * 20})
    assert caught.value.data == {"limit": 10}
    assert client.closed


@pytest.mark.parametrize(
    ("command", "field"),
    [
        (["call", "history/search", "-"], "query"),  # the blocking client
        (["run", "-s", "big", "-"], None),  # the trio client: the prompt is standard input
    ],
    ids=["call", "run"],
)
def test_a_request_over_a_real_daemons_limit_is_said_with_its_limit(
    tmp_path: Path, socket_dir: Path, command: list[str], field: str | None
) -> None:
    from robotactl.exit_codes import ExitCode
    from tests.robotad_process import start_robotad, stop_robotad

    daemon = start_robotad(
        socket_dir / "robotad.sock", tmp_path / "robotad.log", "--max-message-bytes", "4096"
    )
    try:
        too_big = "x" * 4_000_000  # more than the socket buffers hold
        if field is not None:
            too_big = json.dumps({field: too_big})
        argv = ["--socket", str(daemon.socket_path), *command]
        with open_blocking_connection(daemon.socket_path) as client:
            client.request("session/create", {"cwd": str(tmp_path), "sessionId": "big"})
        result = subprocess.run(
            [sys.executable, "-m", "robotactl", *argv],
            input=too_big,
            capture_output=True,
            text=True,
            env=child_environment(ROBOTA_NO_AUTOSTART="1"),
            cwd=REPO,
            timeout=PROCESS_TIMEOUT,
            check=False,
        )
    finally:
        stop_robotad(daemon)
    assert result.returncode == ExitCode.ERROR, result.stderr
    assert result.stderr.startswith("robotactl: error -32600: ")
    assert "at most 4,096 bytes per message" in result.stderr
    assert "shutting down" not in result.stderr


# -- timeouts ----------------------------------------------------------------------------------


def test_a_silent_daemon_times_out_and_the_request_is_cancelled(
    pair: tuple[BlockingClient, socket.socket],
) -> None:
    """The timed-out request is cancelled on the daemon; its late reply is skipped, and the
    next request gets its own reply."""
    client, theirs = pair
    with pytest.raises(RequestTimeout) as caught:
        client.request("session/compact", {"sessionId": "s"}, timeout=0.01)
    assert (caught.value.method, caught.value.timeout) == ("session/compact", 0.01)
    assert isinstance(caught.value, TimeoutError)
    request, cancel = sent_by_client(theirs)
    assert isinstance(request, Request)
    assert isinstance(cancel, Notification)
    assert cancel.method == "$/cancelRequest"
    assert cancel.params is not None
    assert msgspec.json.decode(cancel.params) == {"id": request.id}
    assert not client.closed
    theirs.sendall(result_frame(1, "late") + result_frame(2, "fresh"))
    assert client.request("daemon/status") == "fresh"


def test_the_client_timeout_applies_unless_the_request_names_one(
    pair: tuple[BlockingClient, socket.socket],
) -> None:
    client, theirs = pair
    client.timeout = 0.01
    with pytest.raises(RequestTimeout) as caught:
        client.request("m")
    assert caught.value.timeout == 0.01
    theirs.sendall(result_frame(2, "waited"))
    assert client.request("m", timeout=None) == "waited"


def test_a_request_the_daemon_never_reads_times_out_and_closes(
    pair: tuple[BlockingClient, socket.socket],
) -> None:
    """A frame stuck half-written cannot be finished later: the client closes."""
    client, _ = pair
    with pytest.raises(RequestTimeout):
        client.request("session/import", {"artifact": "x" * (8 << 20)}, timeout=0.05)
    assert client.closed


# -- watching a wait ---------------------------------------------------------------------------


class Watcher:
    """A `WaitWatcher` that records its calls and asks to be called again after `delay`; on
    its call number `act_on` it runs `act` (which may answer, or raise)."""

    def __init__(self, delay: float | None, act_on: int = -1, act: Any = None) -> None:
        self.delay = delay
        self.act_on = act_on
        self.act = act
        self.calls: list[tuple[str, float]] = []
        self.ends = 0

    def waiting(self, method: str, waited: float) -> float | None:
        self.calls.append((method, waited))
        if len(self.calls) == self.act_on:
            self.act()
        return self.delay

    def ended(self) -> None:
        self.ends += 1


def test_a_watcher_is_told_of_the_wait_until_the_reply_comes(
    pair: tuple[BlockingClient, socket.socket],
) -> None:
    """Told at once (0 s waited), then after each delay it asks for, with the time waited;
    the reply that comes meanwhile ends the wait, and the watcher is told so."""
    client, theirs = pair
    watcher = Watcher(0.001, act_on=3, act=lambda: theirs.sendall(result_frame(1, "late")))
    client.watcher = watcher
    assert client.request("session/list") == "late"
    assert [method for method, _ in watcher.calls] == ["session/list"] * 3
    waited = [seconds for _, seconds in watcher.calls]
    assert waited[0] == 0.0
    assert waited == sorted(waited)
    assert waited[2] > 0
    assert watcher.ends == 1


def test_a_reply_already_there_tells_the_watcher_only_the_start(
    pair: tuple[BlockingClient, socket.socket],
) -> None:
    client, theirs = pair
    watcher = Watcher(None)
    client.watcher = watcher
    theirs.sendall(result_frame(1, "at once"))
    assert client.request("daemon/status") == "at once"
    assert watcher.calls == [("daemon/status", 0.0)]
    assert watcher.ends == 1


class GiveUp(Exception):
    pass


def test_what_the_watcher_raises_ends_the_request(
    pair: tuple[BlockingClient, socket.socket],
) -> None:
    """The exception propagates (no $/cancelRequest: the caller gave up on the daemon); the
    watcher is still told the wait ended."""
    client, theirs = pair

    def give_up() -> None:
        raise GiveUp

    watcher = Watcher(0.001, act_on=2, act=give_up)
    client.watcher = watcher
    with pytest.raises(GiveUp):
        client.request("session/get", {"sessionId": "s"})
    assert watcher.ends == 1
    assert [type(message) for message in sent_by_client(theirs)] == [Request]


def test_the_request_timeout_still_applies_under_a_watcher(
    pair: tuple[BlockingClient, socket.socket],
) -> None:
    client, _ = pair
    watcher = Watcher(60.0)
    client.watcher = watcher
    with pytest.raises(RequestTimeout):
        client.request("m", timeout=0.01)
    assert watcher.calls == [("m", 0.0)]
    assert watcher.ends == 1


# -- connecting --------------------------------------------------------------------------------


def test_a_missing_socket_is_file_not_found(socket_dir: Path) -> None:
    with pytest.raises(FileNotFoundError):
        open_blocking_connection(socket_dir / "robotad.sock")


def test_a_socket_nobody_listens_on_refuses(socket_dir: Path) -> None:
    path = socket_dir / "robotad.sock"
    with socket.socket(socket.AF_UNIX) as orphan:
        orphan.bind(str(path))
        with pytest.raises(ConnectionRefusedError):
            open_blocking_connection(path)


def test_a_full_backlog_times_out_the_connect(socket_dir: Path) -> None:
    """A listener that accepts nothing: the connect waits for room, up to its bound."""
    path = socket_dir / "busy.sock"
    with socket.socket(socket.AF_UNIX) as listener, socket.socket(socket.AF_UNIX) as queued:
        listener.bind(str(path))
        listener.listen(0)
        queued.setblocking(False)
        queued.connect(str(path))  # takes the only place in the backlog
        with pytest.raises(TimeoutError) as caught:
            open_blocking_connection(path, connect_timeout=0.05)
    assert caught.value.errno == errno.ETIMEDOUT
    assert "accepted no connection within 0.05 s" in str(caught.value)


# -- against robotad ---------------------------------------------------------------------------


def test_a_real_daemon_answers_in_sequence(robotad: RunningDaemon) -> None:
    with open_blocking_connection(robotad.socket_path) as client:
        status = client.request("daemon/status", result_type=DaemonStatus)
        assert status.pid == robotad.pid
        assert client.request("session/list", {}, result_type=SessionList).sessions == []
        assert client.request("daemon/status")["pid"] == robotad.pid


def test_errors_are_the_ones_the_trio_peer_raises(robotad: RunningDaemon, tmp_path: Path) -> None:
    """The same bad calls through both clients fail with the same class, message and data."""
    calls: list[tuple[str, dict[str, Any]]] = [
        ("no/such-method", {}),
        ("session/get", {"sessionId": "missing"}),
        ("session/create", {"cwd": "relative/dir", "permissionMode": "sideways"}),
        ("session/run", {"sessionId": "missing", "prompt": "hi"}),
    ]

    def blocking() -> list[RpcError]:
        caught = []
        with open_blocking_connection(robotad.socket_path) as client:
            for method, params in calls:
                with pytest.raises(RpcError) as failure:
                    client.request(method, params)
                caught.append(failure.value)
        return caught

    async def streaming() -> list[RpcError]:
        caught = []
        with trio.fail_after(PROCESS_TIMEOUT):
            async with open_connection(robotad.socket_path) as peer:
                for method, params in calls:
                    with pytest.raises(RpcError) as failure:
                        await peer.request(method, params)
                    caught.append(failure.value)
        return caught

    def described(errors: list[RpcError]) -> list[tuple[type[RpcError], str, Any]]:
        return [(type(e), e.message, e.data) for e in errors]

    ours = blocking()
    assert described(ours) == described(trio.run(streaming))
    assert [e.code for e in ours] == [-32601, -32002, -32602, -32002]


def test_events_before_the_reply_reach_the_callback(robotad: RunningDaemon, work: Path) -> None:
    """session/run subscribes the connection: its events arrive before its reply, in order,
    and the connection serves further requests afterwards."""
    events: list[dict[str, Any]] = []

    def on_event(method: str, params: msgspec.Raw) -> None:
        assert method == "session/event"
        events.append(msgspec.json.decode(params))

    with open_blocking_connection(robotad.socket_path, on_notification=on_event) as client:
        script = [{"text": "hello from the script", "chunks": 3}]
        info = client.request("session/create", {"cwd": str(work), "script": script})
        run = {"sessionId": info["sessionId"], "prompt": "go"}
        result = client.request("session/run", run)
        assert (result["status"], result["response"]) == ("completed", "hello from the script")
        types = [event["type"] for event in events]
        assert types[0] == "turn_started"
        assert types.count("text_delta") == 3
        seqs = [event["seq"] for event in events]
        assert seqs == sorted(set(seqs))
        history = client.request("session/history", {"sessionId": info["sessionId"]})
        assert history["total"] == 2


def test_without_a_callback_a_subscribed_connection_still_works(
    robotad: RunningDaemon, work: Path
) -> None:
    with open_blocking_connection(robotad.socket_path) as client:
        info = client.request("session/create", {"cwd": str(work)})
        run = {"sessionId": info["sessionId"], "prompt": "ping"}
        assert client.request("session/run", run)["response"] == "echo: ping"
        compacted = client.request("session/compact", {"sessionId": info["sessionId"]})
        assert set(compacted) == {"compacted", "before", "after"}
        again = client.request("session/get", {"sessionId": info["sessionId"]})
        assert again["sessionId"] == info["sessionId"]


def test_a_busy_session_is_session_busy_with_its_holder(robotad: RunningDaemon, work: Path) -> None:
    with (
        open_blocking_connection(robotad.socket_path) as first,
        open_blocking_connection(robotad.socket_path) as second,
    ):
        script = [{"text": "slow reply", "chunks": 2, "delayMs": 5000}]
        info = first.request("session/create", {"cwd": str(work), "script": script})
        sid = info["sessionId"]
        started = first.request("session/run", {"sessionId": sid, "prompt": "a", "wait": False})
        with pytest.raises(SessionBusy) as busy:
            second.request("session/run", {"sessionId": sid, "prompt": "b"})
        assert busy.value.data == {"sessionId": sid, "turnId": started["turnId"]}
        assert second.request("session/abort", {"sessionId": sid}) == {"aborted": True}


# -- imports -----------------------------------------------------------------------------------

_IMPORT_PROBE = """
import json, sys
from protocol.blocking_client import open_blocking_connection
with open_blocking_connection(sys.argv[1]) as client:
    assert client.request("daemon/status")["pid"] > 0
if len(sys.argv) > 2:
    __import__(sys.argv[2])
print(json.dumps(sorted(sys.modules)))
"""


def loaded_modules(robotad: RunningDaemon, *extra: str) -> list[str]:
    completed = subprocess.run(
        [sys.executable, "-c", _IMPORT_PROBE, str(robotad.socket_path), *extra],
        capture_output=True,
        text=True,
        env=child_environment(),
        cwd=REPO,
        timeout=PROCESS_TIMEOUT,
        check=True,
    )
    modules: list[str] = json.loads(completed.stdout)
    return modules


def trio_side(modules: list[str]) -> list[str]:
    return [
        m for m in modules if m.split(".")[0] == "trio" or m in ("protocol.peer", "protocol.client")
    ]


def test_the_blocking_client_never_imports_trio(robotad: RunningDaemon) -> None:
    assert trio_side(loaded_modules(robotad)) == []
    # The probe does see trio when something loads it.
    assert {"trio", "protocol.peer"} <= set(trio_side(loaded_modules(robotad, "protocol.client")))


@pytest.fixture
def work(tmp_path: Path) -> Path:
    directory = tmp_path / "work"
    directory.mkdir()
    return directory
