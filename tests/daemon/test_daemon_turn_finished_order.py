"""``turn_finished`` goes out only once the session is free (PROTOCOL §6): a client that starts
the next ``session/run`` the moment it reads a turn's ``turn_finished`` is never refused with
SessionBusy. A raw line client sends the next run in the same step that reads the event, so
nothing on the client's side lets the daemon catch up (one daemon for the module)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from tests.daemon_helpers import IO_TIMEOUT, RunningDaemon, module_daemon

daemon = module_daemon()

#: Back-to-back turns per case: each is a chance for the old race to show.
TURNS = 40


class LineClient:
    """JSON-RPC over one Unix socket, a line at a time, nothing buffered between reads."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self._buffer = b""
        self._next_id = 0

    async def send(self, method: str, params: dict[str, Any]) -> int:
        self._next_id += 1
        request = {"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params}
        await self.stream.send_all(json.dumps(request).encode() + b"\n")
        return self._next_id

    async def message(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            chunk = await self.stream.receive_some(65536)
            assert chunk, "the daemon closed the connection"
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        decoded: dict[str, Any] = json.loads(line)
        return decoded

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        sent = await self.send(method, params)
        while True:
            answer = await self.message()
            if answer.get("id") == sent:
                assert "error" not in answer, answer
                return answer["result"]


async def back_to_back(daemon: RunningDaemon, cwd: Path, wait: bool) -> list[dict[str, Any]]:
    """Run `TURNS` turns, each sent as soon as the previous turn's ``turn_finished`` is read;
    the first error answer received, if any, ends the series."""
    stream = await trio.open_unix_socket(str(daemon.socket_path))
    async with stream:
        client = LineClient(stream)
        session_id = (await client.call("session/create", {"cwd": str(cwd)}))["sessionId"]
        await client.call("session/subscribe", {"sessionId": session_id})
        errors: list[dict[str, Any]] = []
        finished = 0
        run = {"sessionId": session_id, "prompt": "again", "wait": wait}
        await client.send("session/run", run)
        while finished < TURNS:
            message = await client.message()
            if "error" in message:  # no turn started: no turn_finished will come
                errors.append(message["error"])
                break
            params = message.get("params") or {}
            if message.get("method") == "session/event" and params["type"] == "turn_finished":
                finished += 1
                assert params["status"] == "completed", params
                if finished < TURNS:
                    await client.send("session/run", run)
        return errors


async def test_a_run_started_on_turn_finished_is_never_refused_as_busy(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """The next run, sent the moment turn_finished is read, is accepted every time — with
    the previous run's requester still waiting for its answer or not."""
    with trio.fail_after(IO_TIMEOUT * 3):
        for wait in (False, True):
            errors = await back_to_back(daemon, tmp_path, wait)
            assert errors == [], f"wait={wait}: {errors[:3]}"
