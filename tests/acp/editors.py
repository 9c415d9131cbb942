"""ACP editors for the tests: the official TypeScript and Python SDKs, each as a small driver
process that starts ``robotactl acp`` itself and is steered by a line protocol.

`open_editor(kind, agent_argv, log)` starts ``editor_ts.mjs`` (kind ``"ts"``) or
``editor_py.py`` (``"py"``); `Editor.call` sends one command and returns its reply. Every wait
is bounded by `EDITOR_TIMEOUT`; an editor left running is killed on exit. The agent's stderr
(its log) and the driver's own go to `log`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import trio

from tests.robotad_process import REPO, child_environment

__all__ = ["EDITOR_TIMEOUT", "Editor", "EditorError", "open_editor"]

#: Absolute bound on one command to an editor (and on its exit).
EDITOR_TIMEOUT: Final = 60.0
HERE: Final = Path(__file__).resolve().parent


class EditorError(Exception):
    """The agent answered a request with a JSON-RPC error (or the SDK refused its reply)."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code = error.get("code")
        self.message = str(error.get("message"))
        self.data = error.get("data")


class Editor:
    """One running editor driver."""

    def __init__(self, kind: str, process: trio.Process) -> None:
        self.kind = kind
        self.process = process
        self._buffer = bytearray()
        self.events: list[dict[str, Any]] = []

    async def _line(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        while (end := self._buffer.find(b"\n")) < 0:
            data = await self.process.stdout.receive_some(65536)
            if not data:
                raise EOFError(f"the {self.kind} editor exited")
            self._buffer += data
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 1]
        value: dict[str, Any] = json.loads(line)
        return value

    async def call(self, **command: Any) -> dict[str, Any]:
        """Send `command`; its reply (events met on the way are kept in `events`)."""
        assert self.process.stdin is not None
        with trio.fail_after(EDITOR_TIMEOUT):
            await self.process.stdin.send_all(json.dumps(command).encode() + b"\n")
            while "event" in (reply := await self._line()):
                self.events.append(reply)
        return reply

    async def reply(self) -> dict[str, Any]:
        """The reply to a command sent with `send` (events met on the way are kept)."""
        with trio.fail_after(EDITOR_TIMEOUT):
            while "event" in (reply := await self._line()):
                self.events.append(reply)
        return reply

    async def next_event(self) -> dict[str, Any]:
        """The next asynchronous event (a held permission request)."""
        if self.events:
            return self.events.pop(0)
        with trio.fail_after(EDITOR_TIMEOUT):
            return await self._line()

    async def send(self, **command: Any) -> None:
        """Send `command` without waiting for its reply (read it later with `reply`)."""
        assert self.process.stdin is not None
        await self.process.stdin.send_all(json.dumps(command).encode() + b"\n")

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """The agent's result for `method`, or `EditorError`."""
        reply = await self.call(op="request", method=method, params=params)
        if "error" in reply:
            raise EditorError(reply["error"])
        return reply["result"]

    async def initialize(self) -> Any:
        return await self.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})

    async def new_session(self, cwd: Path, **extra: Any) -> str:
        params = {"cwd": str(cwd), "mcpServers": [], **extra}
        result = await self.request("session/new", params)
        session_id: str = result["sessionId"]
        return session_id

    async def prompt(
        self,
        session_id: str,
        text: str,
        answers: Sequence[str] = (),
        cancel_after_chunks: int | None = None,
        cancel_at_once: bool = False,
        cancel_first: bool = False,
    ) -> dict[str, Any]:
        """Run a prompt; the reply holds `result` (or `error`) and the `permissions` asked.
        `cancel_at_once` sends session/cancel right behind the prompt, `cancel_first` right
        before it."""
        command: dict[str, Any] = {
            "op": "prompt",
            "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]},
            "answers": list(answers),
        }
        if cancel_after_chunks is not None:
            command["cancelAfterChunks"] = cancel_after_chunks
        if cancel_at_once:
            command["cancelAtOnce"] = True
        if cancel_first:
            command["cancelFirst"] = True
        return await self.call(**command)

    async def updates(self) -> list[dict[str, Any]]:
        """The session/update params received since the last call."""
        reply = await self.call(op="updates")
        updates: list[dict[str, Any]] = reply["updates"]
        return updates

    async def audit(self) -> tuple[list[Any], list[Any]]:
        """(every session/update the agent wrote, every one the SDK delivered)."""
        reply = await self.call(op="audit")
        return reply["sent"], reply["received"]

    async def agent_pid(self) -> int:
        pid: int = (await self.call(op="pid"))["pid"]
        return pid


def driver_argv(kind: str, agent_argv: Sequence[str], ts_sdk: Path | None) -> list[str]:
    if kind == "ts":
        assert ts_sdk is not None
        return ["node", str(HERE / "editor_ts.mjs"), str(ts_sdk), *agent_argv]
    return [sys.executable, str(HERE / "editor_py.py"), *agent_argv]


@asynccontextmanager
async def open_editor(
    kind: str, agent_argv: Sequence[str], log: Path, ts_sdk: Path | None = None
) -> AsyncIterator[Editor]:
    """A running editor of `kind` whose agent is `agent_argv`; closed (or killed) on exit."""
    with open(log, "ab") as log_file:
        process = await trio.lowlevel.open_process(
            driver_argv(kind, agent_argv, ts_sdk),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log_file,
            env=child_environment(),
            cwd=REPO,
        )
    editor = Editor(kind, process)
    try:
        yield editor
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(EDITOR_TIMEOUT) as waited:
            if process.stdin is not None:
                await process.stdin.aclose()
            await process.wait()
        if waited.cancelled_caught:
            process.kill()
            await process.wait()
