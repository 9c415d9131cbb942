"""Small fakes for the loop tests: tools, a journal, recording and replaying providers, gates."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import trio
from msgspec import Struct

from protocol.shapes import Message, ToolCall
from robotad.agent import (
    AbortSignal,
    AdmitAll,
    EventBus,
    ToolGate,
    TurnCallbacks,
    TurnOptions,
    TurnOutcome,
    run_turn,
)
from robotad.agent.gate import Admission, Admit
from robotad.agent.provider import (
    ModelReply,
    ModelRequest,
    Provider,
    StreamObserver,
    ToolChoice,
)
from robotad.agent.tool import Tool, ToolContext, ToolProfile, ToolResult, TypedTool
from robotad.providers.scripted import ScriptedProvider, decode_script

CTX = ToolContext(cwd=Path("/"), session_id="s-test")


class EchoArgs(Struct, forbid_unknown_fields=True):
    value: str = ""
    seconds: float = 0.0


class EchoTool(TypedTool[EchoArgs]):
    """Sleeps `seconds`, then answers ``echo:<value>``; records starts, finishes, concurrency."""

    name: ClassVar[str] = "echo"
    description: ClassVar[str] = "Echo a value after a pause."
    profile: ClassVar[ToolProfile] = ToolProfile(risk="inspect")
    Arguments: ClassVar[type[Struct]] = EchoArgs

    def __init__(self) -> None:
        self.received: list[EchoArgs] = []
        self.finished: list[str] = []
        self.running = 0
        self.most_running = 0
        self.cancelled: list[str] = []

    async def run(self, arguments: EchoArgs, ctx: ToolContext) -> ToolResult:
        self.received.append(arguments)
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            await trio.sleep(arguments.seconds)
        except trio.Cancelled:
            self.cancelled.append(arguments.value)
            raise
        finally:
            self.running -= 1
        self.finished.append(arguments.value)
        return ToolResult(True, f"echo:{arguments.value}")


class NoArgs(Struct, forbid_unknown_fields=True):
    pass


class BrokenTool(TypedTool[NoArgs]):
    """Raises from its body."""

    name: ClassVar[str] = "broken"
    description: ClassVar[str] = "Always raises."
    profile: ClassVar[ToolProfile] = ToolProfile(risk="execute")
    Arguments: ClassVar[type[Struct]] = NoArgs

    async def run(self, arguments: NoArgs, ctx: ToolContext) -> ToolResult:
        raise RuntimeError("disk on fire")


class FailingTool(TypedTool[NoArgs]):
    """Reports an ordinary failure."""

    name: ClassVar[str] = "failing"
    description: ClassVar[str] = "Always fails normally."
    profile: ClassVar[ToolProfile] = ToolProfile(risk="inspect")
    Arguments: ClassVar[type[Struct]] = NoArgs

    async def run(self, arguments: NoArgs, ctx: ToolContext) -> ToolResult:
        return ToolResult(False, "exit status 1", {"exitCode": 1})


def toolbox(*tools: Tool) -> dict[str, Tool]:
    return {tool.name: tool for tool in tools}


class Journal:
    """The Session's side of `commit`: appends each message after a checkpoint, optionally
    failing on a chosen message."""

    def __init__(self, history: Iterable[Message] = ()) -> None:
        self.messages: list[Message] = list(history)
        self.fail_when: Callable[[Message], bool] | None = None

    async def commit(self, message: Message) -> None:
        await trio.lowlevel.checkpoint()
        if self.fail_when is not None and self.fail_when(message):
            raise OSError("journal write failed")
        self.messages.append(message)

    def roles(self) -> list[str]:
        return [m.role for m in self.messages]

    def tool_results(self) -> list[Message]:
        return [m for m in self.messages if m.role == "tool"]


def start_history(prompt: str = "hello", system: str | None = "You are a test.") -> list[Message]:
    history = [Message.system(system)] if system is not None else []
    history.append(Message.user(prompt))
    return history


def scripted(*steps: dict[str, Any]) -> ScriptedProvider:
    return ScriptedProvider(decode_script(list(steps)))


def call_step(*calls: tuple[str, dict[str, Any]], text: str = "") -> dict[str, Any]:
    step: dict[str, Any] = {"toolCalls": [{"name": n, "arguments": a} for n, a in calls]}
    if text:
        step["text"] = text
    return step


class Recording:
    """Wraps a provider and keeps every request it was given."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.requests: list[ModelRequest] = []
        self.name = inner.name
        self.kind = inner.kind
        self.model = inner.model
        self.context_window = inner.context_window

    async def complete(self, request: ModelRequest, observer: StreamObserver) -> ModelReply:
        self.requests.append(request)
        return await self.inner.complete(request, observer)

    async def aclose(self) -> None:
        await self.inner.aclose()


class FakeProvider:
    """What every hand-written test provider shares: a test kind and model, no context
    window, nothing to close. A subclass sets `name` and writes `complete`."""

    name = "fake"
    kind = "test"
    model = "test"
    context_window: int | None = None

    async def aclose(self) -> None:
        pass


class Replies(FakeProvider):
    """A provider returning prepared `ModelReply`s in order (for shapes a script cannot make,
    such as unparseable argument text), then plain ``done``."""

    name = "replies"

    def __init__(self, *replies: ModelReply) -> None:
        self._replies = list(replies)

    async def complete(self, request: ModelRequest, observer: StreamObserver) -> ModelReply:
        await trio.lowlevel.checkpoint()
        if self._replies:
            return self._replies.pop(0)
        observer.on_text("done")
        return ModelReply("done", [])


class ScriptedGate:
    """A gate answering from a function of the call; records what it was asked and settled."""

    def __init__(self, decide: Callable[[ToolCall], Admission] | None = None) -> None:
        self._decide = decide or (lambda call: Admit(call.arguments))
        self.asked: list[str] = []
        self.settled: list[str] = []
        self.rejected: list[str] = []
        self.settle_content: Callable[[str], str] | None = None

    async def admit(self, call: ToolCall, tool: Tool) -> Admission:
        await trio.lowlevel.checkpoint()
        self.asked.append(call.id)
        return self._decide(call)

    def reject(self, call: ToolCall, reason: str) -> None:
        self.rejected.append(call.id)

    async def settle(self, call: ToolCall, tool: Tool, result: ToolResult) -> ToolResult:
        self.settled.append(call.id)
        if self.settle_content is not None:
            return ToolResult(result.ok, self.settle_content(result.content), result.metadata)
        return result

    async def after_settle(self, call: ToolCall, tool: Tool, result: ToolResult) -> None:
        pass


async def turn(
    provider: Provider,
    journal: Journal,
    tools: Mapping[str, Tool] | None = None,
    *,
    gate: ToolGate | None = None,
    tool_choice: ToolChoice = "auto",
    system_context: str | None = None,
    idle_timeout: float | None = None,
    round_cap: int | None = None,
    callbacks: TurnCallbacks | None = None,
    bus: EventBus | None = None,
    abort: AbortSignal | None = None,
    effort: str | None = None,
) -> TurnOutcome:
    """`run_turn` over `journal`'s messages, committing into it."""
    return await run_turn(
        provider=provider,
        tools=tools or {},
        history=journal.messages,
        commit=journal.commit,
        gate=gate or AdmitAll(),
        ctx=CTX,
        options=TurnOptions(
            tool_choice=tool_choice,
            system_context=system_context,
            effort=effort,
            idle_timeout=idle_timeout,
            round_cap=round_cap,
        ),
        callbacks=callbacks,
        bus=bus,
        abort=abort,
    )


def paired(history: Sequence[Message]) -> bool:
    """Every call of every assistant message has exactly one result, before the next
    non-tool message, in call order."""
    index = 0
    while index < len(history):
        message = history[index]
        index += 1
        if message.role != "assistant" or not message.calls:
            continue
        results = []
        while index < len(history) and history[index].role == "tool":
            results.append(history[index].tool_call_id)
            index += 1
        if results != [call.id for call in message.calls]:
            return False
    return True
