"""An ACP editor on the official Python SDK (``agent-client-protocol``, import ``acp``).

Usage: python editor_py.py AGENT_COMMAND [ARGS...]. The same line protocol as
editor_ts.mjs (see tests/acp/editors.py): one JSON command per line on stdin, one JSON reply
per line on stdout. Requests go through the SDK's typed request models and every response is
validated against the SDK's response model (the Python SDK is the stricter client); updates
reach `session_update` only after the SDK validated them.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import acp
from acp import schema
from acp.client.connection import ClientSideConnection
from acp.utils import request_model_from_dict

#: ACP method → (request model, response model) for the plain requests.
REQUESTS: dict[str, tuple[type[Any], type[Any]]] = {
    "initialize": (schema.InitializeRequest, schema.InitializeResponse),
    "session/new": (schema.NewSessionRequest, schema.NewSessionResponse),
    "session/load": (schema.LoadSessionRequest, schema.LoadSessionResponse),
    "session/resume": (schema.ResumeSessionRequest, schema.ResumeSessionResponse),
    "session/close": (schema.CloseSessionRequest, schema.CloseSessionResponse),
    "session/list": (schema.ListSessionsRequest, schema.ListSessionsResponse),
    "session/set_mode": (schema.SetSessionModeRequest, schema.SetSessionModeResponse),
}


def dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def out(value: Any) -> None:
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


class Editor:
    """The client side: records updates, answers permission requests from a queue."""

    def __init__(self) -> None:
        self.received: list[Any] = []
        self.pending: list[Any] = []
        self.answers: list[str] = []
        self.permissions: list[Any] = []
        self.on_chunk: Any = None

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> schema.RequestPermissionResponse:
        request = {
            "sessionId": session_id,
            "toolCall": dump(tool_call),
            "options": [dump(option) for option in options],
        }
        self.permissions.append(request)
        answer = self.answers.pop(0) if self.answers else "reject_once"
        if answer == "hold":
            out({"event": "held", "request": request})
            await asyncio.Event().wait()
        if answer == "error":  # an editor that fails to answer
            raise RuntimeError("this editor cannot show the question")
        if answer == "cancelled":
            outcome: Any = schema.DeniedOutcome(outcome="cancelled")
        else:
            outcome = schema.AllowedOutcome(outcome="selected", option_id=answer)
        return schema.RequestPermissionResponse(outcome=outcome)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        params = {"sessionId": session_id, "update": dump(update)}
        self.received.append(params)
        self.pending.append(params)
        if self.on_chunk is not None and params["update"]["sessionUpdate"] == "agent_message_chunk":
            self.on_chunk()


async def tee(source: asyncio.StreamReader, target: asyncio.StreamReader, sent: list[Any]) -> None:
    """Copy the agent's stdout to the SDK, noting every session/update it carries."""
    while line := await source.readline():
        if line.strip():
            message = json.loads(line)
            if message.get("method") == "session/update":
                sent.append(message["params"])
        target.feed_data(line)
    target.feed_eof()


async def main(argv: list[str]) -> None:
    process = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=2**24
    )
    assert process.stdin is not None
    assert process.stdout is not None
    sent: list[Any] = []
    agent_output = asyncio.StreamReader(limit=2**24)
    copier = asyncio.create_task(tee(process.stdout, agent_output, sent))
    editor = Editor()
    connection = acp.connect_to_agent(editor, process.stdin, agent_output)
    assert isinstance(connection, ClientSideConnection)
    loop = asyncio.get_running_loop()
    commands = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(commands), sys.stdin)
    while line := await commands.readline():
        if not line.strip():
            continue
        command = json.loads(line)
        try:
            out(await handle(command, connection, editor, process, sent))
        except acp.RequestError as error:
            out({"error": {"code": error.code, "message": str(error), "data": error.data}})
        except Exception as error:  # reported to the test, which fails on it
            out({"error": {"code": None, "message": f"{type(error).__name__}: {error}"}})
    process.stdin.close()
    await process.wait()
    copier.cancel()


async def handle(
    command: dict[str, Any],
    connection: ClientSideConnection,
    editor: Editor,
    process: asyncio.subprocess.Process,
    sent: list[Any],
) -> Any:
    op = command["op"]
    if op == "pid":
        return {"pid": process.pid}
    if op == "updates":
        updates, editor.pending = editor.pending, []
        return {"updates": updates}
    if op == "audit":
        return {"sent": sent, "received": editor.received}
    if op == "request":
        request_type, response_type = REQUESTS[command["method"]]
        params = request_type.model_validate(command["params"])
        response = await request_model_from_dict(
            connection._conn, command["method"], params, response_type
        )
        return {"result": dump(response)}
    if op == "prompt":
        editor.answers = list(command.get("answers", []))
        editor.permissions = []
        session_id = command["params"]["sessionId"]
        chunks = 0
        cancels: list[asyncio.Task[None]] = []

        def on_chunk() -> None:
            nonlocal chunks
            chunks += 1
            if chunks == command.get("cancelAfterChunks"):
                cancels.append(asyncio.create_task(connection.cancel(session_id=session_id)))

        editor.on_chunk = on_chunk
        try:
            request = schema.PromptRequest.model_validate(command["params"])
            if command.get("cancelFirst"):  # session/cancel right before session/prompt
                await connection.cancel(session_id=session_id)
            prompting = asyncio.create_task(
                connection.prompt(session_id=session_id, prompt=request.prompt)
            )
            if command.get("cancelAtOnce"):  # session/cancel right behind session/prompt
                await asyncio.sleep(0)
                await connection.cancel(session_id=session_id)
            response = await prompting
        finally:
            editor.on_chunk = None
        return {"result": dump(response), "permissions": editor.permissions}
    raise ValueError(f"unknown op {op}")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
