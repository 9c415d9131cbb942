"""The provider port: one streamed model call, whatever the vendor.

A provider turns a `ModelRequest` into a `ModelReply`, reporting each streamed text delta (and
any other streamed chunk) to a `StreamObserver` as it arrives. The agent loop owns everything
around the call: the idle timeout (a trio deadline it refreshes from the observer), abort
(trio cancellation), and what the reply does to history. A provider owns the vendor's wire
format, tool-call assembly, its own bounded retry, and turning every failure into
`ProviderError` with a reason that never holds a key.

Cancellation contract: `complete` is cancellable by any enclosing trio scope and closes its
HTTP stream when cancelled. `aclose` releases the SDK client; it is idempotent.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

from msgspec import Struct

from protocol.shapes import Message, ToolCall, Usage

__all__ = [
    "DEFAULT_IDLE_TIMEOUT",
    "ModelReply",
    "ModelRequest",
    "NamedTool",
    "Provider",
    "ProviderError",
    "StreamObserver",
    "ToolChoice",
    "ToolSchema",
    "idle_timeout_reason",
    "located_reason",
    "provider_endpoint",
    "provider_idle_timeout",
]

#: Seconds a model call may send nothing before it fails, when nothing says otherwise
#: (PROTOCOL §10.2: ``idle_timeout_ms`` defaults to 120000). Every session has a finite one.
DEFAULT_IDLE_TIMEOUT = 120.0


class NamedTool(Struct, frozen=True):
    """`tool_choice` naming one tool the model must call."""

    name: str


ToolChoice = Literal["auto", "none", "required"] | NamedTool


class ToolSchema(Struct, frozen=True):
    """What the model is told about one tool (JSON Schema for its arguments)."""

    name: str
    description: str
    input_schema: dict[str, Any]


class ModelRequest(Struct, frozen=True):
    """One model call. `messages` is exactly what the model sees, system messages included
    (a turn's ephemeral system context is already inserted by the loop). `purpose` tells a
    scripted provider whether this is a turn's call or compaction's summarisation call."""

    messages: list[Message]
    tools: list[ToolSchema]
    tool_choice: ToolChoice = "auto"
    purpose: Literal["turn", "compaction"] = "turn"
    effort: str | None = None


class ModelReply(Struct):
    """The assembled reply. `raw` is the provider-native final payload (for the session log)."""

    text: str
    tool_calls: list[ToolCall]
    usage: Usage | None = None
    stop_reason: str | None = None
    raw: dict[str, Any] | None = None


class StreamObserver(Protocol):
    """Told of streamed progress. Both methods are synchronous and must not block."""

    def on_text(self, delta: str) -> None: ...

    def on_activity(self, chars: int = 0) -> None:
        """Progress that is not text; `chars` counts what it added to the reply besides its
        text (a piece of a tool call's arguments, of thinking), so a reply is bounded whole."""


class ProviderError(Exception):
    """A model call failed. `reason` is safe to show and to log: it never contains a key.
    `retryable` marks failures a retry may cure (429, 5xx, connection errors)."""

    def __init__(self, reason: str, *, retryable: bool = False, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable
        self.status = status


@runtime_checkable
class Provider(Protocol):
    """`name` is how SessionInfo names the provider (a config name or a built-in kind)."""

    name: str
    kind: str
    model: str
    context_window: int | None

    async def complete(self, request: ModelRequest, observer: StreamObserver) -> ModelReply: ...

    async def aclose(self) -> None: ...


def provider_idle_timeout(provider: Provider) -> float:
    """The idle timeout `provider` was configured with (its optional `idle_timeout`, in
    seconds), else `DEFAULT_IDLE_TIMEOUT`."""
    value = getattr(provider, "idle_timeout", None)
    return float(value) if isinstance(value, int | float) and value > 0 else DEFAULT_IDLE_TIMEOUT


def provider_endpoint(provider: Provider) -> str | None:
    """The ``host:port`` `provider` talks to (its optional `endpoint`), None for one that
    talks to no server (scripted)."""
    value = getattr(provider, "endpoint", None)
    return value if isinstance(value, str) else None


def idle_timeout_reason(provider: Provider, seconds: float | None, *, replying: bool) -> str:
    """The `ProviderError` reason of a call that sent nothing for `seconds`, saying whether
    its reply had begun (`replying`): ``127.0.0.1:8080: no data for 120 s (idle timeout):
    no reply began``, or ``…: the reply stopped mid-stream``; the endpoint first when known."""
    which = "the reply stopped mid-stream" if replying else "no reply began"
    return located_reason(provider, f"no data for {seconds or 0:g} s (idle timeout): {which}")


def located_reason(provider: Provider, cause: str) -> str:
    """`cause` with `provider`'s endpoint first when it has one (``127.0.0.1:8080: …``)."""
    endpoint = provider_endpoint(provider)
    return f"{endpoint}: {cause}" if endpoint else cause
