"""Shared helpers for the Session tests: scripted sessions, recording ports, real hook scripts."""

from __future__ import annotations

import dataclasses
import errno
import json
import shlex
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, ClassVar

import msgspec
import trio
from msgspec import Struct

from protocol.events import SessionEvent
from protocol.methods import ApprovalResponse
from robotad.agent.provider import ModelReply, ModelRequest, Provider, StreamObserver
from robotad.agent.tool import ToolContext, ToolProfile, ToolResult, TypedTool
from robotad.providers.scripted import ScriptedProvider, decode_script
from robotad.session.hooks.config import parse_hooks_config
from robotad.session.hooks.runner import HookRunner
from robotad.session.ports import SessionSnapshot
from robotad.session.session import Session
from robotad.session.settings import SessionOptions, SessionServices
from robotad.storage.failure import StorageError
from robotad.storage.journal import JournalRecord
from robotad.storage.log_files import FileLogSink, FileLogSource
from robotad.storage.session_log import LogEntry, SessionLogger, decode_log

LIMIT = 20  # seconds: an absolute bound around tests that spawn real processes


class Recorder:
    """A provider wrapper recording every request; `gate` (when set) is awaited before each
    turn call, so a test can hold a call in flight."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.name = inner.name
        self.kind = inner.kind
        self.model = inner.model
        self.context_window = inner.context_window
        self.requests: list[ModelRequest] = []
        self.entered = trio.Event()
        self.gate: trio.Event | None = None
        self.closed = 0
        #: Called (synchronously) as each call begins, before anything else happens.
        self.on_call: Callable[[ModelRequest], None] | None = None
        self.on_close: Callable[[], None] | None = None

    async def complete(self, request: ModelRequest, observer: StreamObserver) -> ModelReply:
        self.requests.append(request)
        if self.on_call is not None:
            self.on_call(request)
        self.entered.set()
        if self.gate is not None and request.purpose == "turn":
            await self.gate.wait()
        return await self.inner.complete(request, observer)

    async def aclose(self) -> None:
        self.closed += 1
        if self.on_close is not None:
            self.on_close()
        await self.inner.aclose()

    def remaining_steps(self) -> list[dict[str, Any]]:
        steps: list[dict[str, Any]] = getattr(self.inner, "remaining_steps", list)()
        return steps

    @property
    def turn_requests(self) -> list[ModelRequest]:
        return [r for r in self.requests if r.purpose == "turn"]

    @property
    def compaction_requests(self) -> list[ModelRequest]:
        return [r for r in self.requests if r.purpose == "compaction"]


def scripted(steps: Iterable[dict[str, Any]] = (), **kwargs: Any) -> Recorder:
    return Recorder(ScriptedProvider(decode_script(list(steps)), **kwargs))


class Events:
    """An event sink keeping every event as the hub receives it (its wire members, before the
    hub stamps ``sessionId`` and ``seq``); `typed()` decodes each as the wire would carry it."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def __call__(self, event: SessionEvent) -> None:
        members = msgspec.to_builtins(event)
        del members["sessionId"], members["seq"]
        self.items.append(members)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.items if e["type"] == kind]

    def types(self) -> list[str]:
        return [e["type"] for e in self.items]

    def typed(self, session_id: str) -> list[SessionEvent]:
        """Stamp sessionId/seq as the manager does and decode strictly (PROTOCOL §6)."""
        out = []
        for seq, event in enumerate(self.items, start=1):
            wire = msgspec.json.encode({**event, "sessionId": session_id, "seq": seq})
            out.append(msgspec.json.decode(wire, type=SessionEvent))
        return out


class MemoryStore:
    """A `SessionStorePort` keeping every snapshot; `fail` makes saves raise what a full disk
    makes the file store raise."""

    def __init__(self) -> None:
        self.saved: list[SessionSnapshot] = []
        self.fail = False
        self.on_save: Callable[[SessionSnapshot], None] | None = None

    async def save(self, snapshot: SessionSnapshot) -> None:
        await trio.lowlevel.checkpoint()
        if self.on_save is not None:
            self.on_save(snapshot)
        if self.fail:
            path = f"sessions/{snapshot.session_id}.json"
            raise StorageError(path, "no space left on device", errno.ENOSPC)
        self.saved.append(snapshot)

    @property
    def last(self) -> SessionSnapshot:
        return self.saved[-1]


class FileLog:
    """A real session log in a temp folder."""

    def __init__(self, directory: Path, session_id: str) -> None:
        self.path = directory / f"{session_id}.jsonl"
        self.logger = SessionLogger(session_id, FileLogSink(self.path))

    def entries(self) -> list[LogEntry]:
        return decode_log(FileLogSource(self.path))

    def events(self) -> list[str]:
        return [entry.event for entry in self.entries()]


class WaitArgs(Struct, forbid_unknown_fields=True):
    label: str = ""


class WaitTool(TypedTool[WaitArgs]):
    """Runs until `release` is set; on cancellation it still waits for `settle` (shielded), so
    a test can watch the gap between a cancel and the body settling."""

    name: ClassVar[str] = "Wait"
    description: ClassVar[str] = "Wait until released."
    profile: ClassVar[ToolProfile] = ToolProfile(risk="inspect")
    Arguments: ClassVar[type[Struct]] = WaitArgs

    def __init__(self) -> None:
        self.started = trio.Event()
        self.release = trio.Event()
        self.settle = trio.Event()
        self.settle.set()
        self.runs: list[str] = []
        self.settled: list[str] = []

    async def run(self, arguments: WaitArgs, ctx: ToolContext) -> ToolResult:
        self.runs.append(arguments.label)
        self.started.set()
        try:
            await self.release.wait()
        finally:
            with trio.CancelScope(shield=True):
                await self.settle.wait()
            self.settled.append(arguments.label)
        return ToolResult(True, f"waited {arguments.label}")


class ShoutArgs(Struct, forbid_unknown_fields=True):
    text: str


class ShoutTool(TypedTool[ShoutArgs]):
    """An execute-risk tool that records its runs (so "ask" applies in default mode)."""

    name: ClassVar[str] = "Shout"
    description: ClassVar[str] = "Shout a text."
    profile: ClassVar[ToolProfile] = ToolProfile(
        risk="execute", argument_key="text", argument_kind="text"
    )
    Arguments: ClassVar[type[Struct]] = ShoutArgs

    def __init__(self, size: int = 0) -> None:
        self.runs: list[str] = []
        self.size = size

    async def run(self, arguments: ShoutArgs, ctx: ToolContext) -> ToolResult:
        self.runs.append(arguments.text)
        await trio.lowlevel.checkpoint()
        body = arguments.text.upper()
        if self.size:
            body = (body * (self.size // max(len(body), 1) + 1))[: self.size]
        return ToolResult(True, body)


def hook_recorder(directory: Path, name: str, *, exit_code: int = 0, stdout: str = "") -> str:
    """A /bin/sh hook command appending `{"traceparent": ..., "input": <stdin>}` to
    ``<directory>/<name>.jsonl``, then printing `stdout` and exiting `exit_code`."""
    out = shlex.quote(str(directory / f"{name}.jsonl"))
    script = directory / f"{name}.sh"
    script.write_text(
        "#!/bin/sh\n"
        "input=$(cat)\n"
        'line=$(printf \'{"traceparent": "%s", "input": %s}\' "${TRACEPARENT:-}" "$input")\n'
        f"printf '%s\\n' \"$line\" >> {out}\n"
        + (f"printf '%s' {shlex.quote(stdout)}\n" if stdout else "")
        + f"exit {exit_code}\n"
    )
    script.chmod(0o755)
    return shlex.quote(str(script))


def hook_records(directory: Path, name: str) -> list[dict[str, Any]]:
    path = directory / f"{name}.jsonl"
    if not path.exists():
        return []
    complete = path.read_text().split("\n")[:-1]  # a hook may be writing the last line now
    return [json.loads(line) for line in complete]


def hooks_for(cwd: Path, config: dict[str, Any]) -> HookRunner:
    """A runner for `config` (its session id is rebound by the Session)."""
    return HookRunner(parse_hooks_config(config), cwd=cwd, session_id="unbound")


def every_event(command: str, events: Iterable[str]) -> dict[str, Any]:
    return {event: [{"hooks": [{"type": "command", "command": command}]}] for event in events}


_OPTION_NAMES = frozenset(field.name for field in dataclasses.fields(SessionOptions))
_SERVICE_NAMES = frozenset(field.name for field in dataclasses.fields(SessionServices))


def new_session(
    cwd: Path,
    provider: Provider | None = None,
    *,
    tools: Iterable[Any] = (),
    **kwargs: Any,
) -> Session:
    """A Session; each keyword is one of `SessionOptions`' or `SessionServices`' fields, or
    where the session starts from (`session_id`, `history`, `turn_count`, `source`)."""
    options = {name: kwargs.pop(name) for name in list(kwargs) if name in _OPTION_NAMES}
    services = {name: kwargs.pop(name) for name in list(kwargs) if name in _SERVICE_NAMES}
    return Session(
        cwd=cwd,
        provider=provider or scripted(),
        tools=list(tools),
        options=SessionOptions(**options),
        services=SessionServices(**services),
        **kwargs,
    )


# -- scripted tool calls and approvals ------------------------------------------------------


def write_call(path: str = "out.txt", content: str = "hello") -> dict[str, Any]:
    """A scripted ``Write`` call (it asks for approval unless a rule allows it)."""
    return {"name": "Write", "arguments": {"file_path": path, "content": content}}


def read_call(path: str = "notes.txt") -> dict[str, Any]:
    """A scripted ``Read`` call."""
    return {"name": "Read", "arguments": {"file_path": path}}


def answer(request_id: str, approved: bool = True, response_id: str = "") -> ApprovalResponse:
    """A person's answer to `request_id`; the response id derives from it unless given."""
    return ApprovalResponse(request_id, response_id or f"r-{request_id}", approved)


def kinds(records: list[JournalRecord]) -> list[str]:
    """The journal records' kind tags, in order."""
    return [str(type(r).__struct_config__.tag) for r in records]
