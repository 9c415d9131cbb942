"""The Anthropic provider: the Messages API, streamed, through the official `anthropic` SDK.

The stream is read event by event: ``message_start`` (id, model, input usage),
``content_block_start`` (a text, ``tool_use`` or thinking block), ``content_block_delta``
(``text_delta``, ``input_json_delta``, thinking and signature pieces), ``content_block_stop``,
``message_delta`` (stop reason, output usage) and ``message_stop``. The SDK drops ``ping``
events itself and raises on an ``error`` event. The reply is whole at ``message_stop``: what
follows is read only briefly, so a server that then holds the response open or breaks the
connection cannot fail a finished reply.

Under trio, keys and ownership: as for the OpenAI provider — the SDK's httpx2 layer runs on
trio natively; the client is closed explicitly in `aclose` (its GC cleanup is asyncio-only);
a caller's ``http_client`` must be an ``httpx2.AsyncClient`` (the SDK refuses ``httpx``
objects) and is closed with the provider. The key and base URL are always passed explicitly,
so the SDK never falls back to ``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL`` or its on-disk
credential profiles (only ``ANTHROPIC_CUSTOM_HEADERS`` has no switch); OpenTelemetry spans are
switched off so no request content leaves through a tracer.
"""

from __future__ import annotations

import contextlib
from typing import Any

import anthropic
import httpx2
import msgspec
import trio
from anthropic import AsyncStream
from anthropic.types import (
    InputJSONDelta,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
    RawMessageStreamEvent,
    SignatureDelta,
    TextDelta,
    ThinkingDelta,
)

from protocol.shapes import ToolCall, Usage, new_id
from robotad.agent.model_text import encodable_tree
from robotad.agent.provider import ModelReply, ModelRequest, StreamObserver
from robotad.http_bounds import bounded
from robotad.providers.clients import ClientLease
from robotad.providers.convert import (
    anthropic_messages,
    anthropic_tool_choice,
    anthropic_tools,
    reported_usage,
    summed_counts,
    text_of,
    tool_call,
)
from robotad.providers.failures import (
    ProviderFailure,
    connection_failure,
    stream_failure,
    timeout_failure,
)
from robotad.providers.retry import RetryPolicy
from robotad.providers.sdk_provider import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    NO_KEY,
    SdkProvider,
    check_max_tokens,
    sdk_timeout,
    without_redirects,
)
from robotad.providers.stream_shapes import KNOWN_MESSAGE_EVENTS, message_event_problem

__all__ = [
    "DEFAULT_ANTHROPIC_BASE_URL",
    "AnthropicProvider",
    "MessageStreamAssembler",
    "new_anthropic_client",
]

DEFAULT_ANTHROPIC_BASE_URL = "https://api.anthropic.com"
#: Seconds the rest of a body is read after ``message_stop`` (the OpenAI SDK's own after
#: ``[DONE]``).
_DRAIN_TIMEOUT = 0.1
#: What reading past ``message_stop`` may raise: an ``error`` event, a broken connection, data
#: that is not JSON.
_AFTER_THE_END = (anthropic.AnthropicError, httpx2.HTTPError, ValueError)


class MessageStreamAssembler:
    """Folds Messages stream events into one reply (sans-I/O).

    Text deltas go to ``observer.on_text`` as they come; every other event to
    ``observer.on_activity``, with the characters it kept (a block's start, a tool call's
    input, thinking, a signature) for the reply's bound. The reply's text is every text
    delta in order (what the observer was shown); tool calls are the ``tool_use`` blocks in
    block order.
    """

    def __init__(self) -> None:
        self.text: list[str] = []
        self.blocks: dict[int, dict[str, Any]] = {}
        self.pieces: dict[int, list[str]] = {}
        self.message: dict[str, Any] = {}
        self.usage: dict[str, Any] = {}
        self.stop_reason: str | None = None
        self.stop_sequence: str | None = None
        self.stopped = False

    def feed(self, event: RawMessageStreamEvent, observer: StreamObserver) -> None:
        """Fold `event` in; one of a type the API added later is left out. Raises
        `ProviderFailure` (not retryable) for an event of another shape, naming what is wrong
        (`message_event_problem`)."""
        problem = message_event_problem(event)
        if problem is not None:
            raise ProviderFailure(f"the server sent an event that is no Messages event: {problem}")
        if getattr(event, "type", None) not in KNOWN_MESSAGE_EVENTS:
            return
        kept = 0  # characters of a tool call's input or of thinking kept from this event
        if isinstance(event, RawContentBlockDeltaEvent):
            kept = self._delta(event.index, event.delta, observer)
            if kept < 0:
                return
        elif isinstance(event, RawContentBlockStartEvent):
            # A block whole at its start (a tool call's input) was parsed by the SDK, which lets
            # a lone surrogate through: UTF-8 could not encode it (`model_text`).
            block = encodable_tree(
                event.content_block.model_dump(exclude_none=True, warnings=False)
            )
            self.blocks[event.index] = block
            if block.get("type") == "text" and block.get("text"):
                self._text(event.index, str(block["text"]), observer)
                return
            # The block is kept whole (a tool call's starting input, thinking): what it adds
            # counts against the reply's bound, as its deltas do.
            kept = len(msgspec.json.encode(block))
        elif isinstance(event, RawMessageStartEvent):
            message = event.message
            self.message = {
                "id": getattr(message, "id", None),
                "model": getattr(message, "model", None),
            }
            usage = getattr(message, "usage", None)
            self.usage = (
                usage.model_dump(exclude_none=True, warnings=False) if usage is not None else {}
            )
        elif isinstance(event, RawMessageDeltaEvent):
            self.stop_reason = text_of(getattr(event.delta, "stop_reason", None))
            self.stop_sequence = text_of(getattr(event.delta, "stop_sequence", None))
            # Later counts are cumulative: they replace earlier ones.
            if getattr(event, "usage", None) is not None:
                self.usage.update(event.usage.model_dump(exclude_none=True, warnings=False))
        elif isinstance(event, RawMessageStopEvent):
            self.stopped = True
        observer.on_activity(kept)

    def _delta(self, index: int, delta: object, observer: StreamObserver) -> int:
        """Apply one block delta: -1 when it was text (already reported), else the number of
        characters it kept (a piece of a tool call's input, of thinking)."""
        piece = ""
        if isinstance(delta, TextDelta):
            if not delta.text:
                return 0
            self._text(index, delta.text, observer)
            return -1
        if isinstance(delta, InputJSONDelta):
            piece = delta.partial_json
        elif isinstance(delta, ThinkingDelta):
            piece = delta.thinking
        elif isinstance(delta, SignatureDelta):
            self.blocks.setdefault(index, {})["signature"] = delta.signature
            return len(delta.signature)
        if piece:
            self.pieces.setdefault(index, []).append(piece)
        return len(piece)

    def _text(self, index: int, piece: str, observer: StreamObserver) -> None:
        self.pieces.setdefault(index, []).append(piece)
        self.text.append(piece)
        observer.on_text(piece)

    def reply(self) -> ModelReply:
        """The assembled reply; a stream without ``message_stop`` is a failure."""
        if not self.stopped:
            raise ProviderFailure("stream ended before the reply was complete", retryable=True)
        content: list[dict[str, Any]] = []
        calls: list[ToolCall] = []
        for index in sorted(self.blocks):
            block = dict(self.blocks[index])
            joined = "".join(self.pieces.get(index, ()))
            kind = block.get("type")
            if kind == "text":
                block["text"] = joined
            elif kind == "thinking":
                block["thinking"] = joined
            elif kind == "tool_use":
                call = self._tool_call(block, joined if index in self.pieces else None)
                calls.append(call)
                block["input"] = call.arguments
                if isinstance(call.raw_arguments, str):
                    block["partial_json"] = call.raw_arguments
            content.append(block)
        raw: dict[str, Any] = {
            "type": "message",
            "role": "assistant",
            **self.message,
            "content": content,
            "stop_reason": self.stop_reason,
            "stop_sequence": self.stop_sequence,
            "usage": self.usage,
        }
        return ModelReply("".join(self.text), calls, self._usage(), self.stop_reason, raw)

    @staticmethod
    def _tool_call(block: dict[str, Any], streamed_json: str | None) -> ToolCall:
        """A ``tool_use`` block's call: its streamed JSON when any came, else the input the
        block started with."""
        call_id = str(block.get("id") or new_id("toolu_"))
        name = str(block.get("name") or "")
        if streamed_json is not None:
            return tool_call(call_id, name, streamed_json)
        start_input = block.get("input")
        return ToolCall(call_id, name, start_input if isinstance(start_input, dict) else {})

    def _usage(self) -> Usage | None:
        if "input_tokens" not in self.usage and "output_tokens" not in self.usage:
            return None
        # Cached prompt tokens still fill the context window, so they count as input.
        prompt = summed_counts(
            self.usage.get(key) or 0
            for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        )
        return reported_usage("anthropic", prompt, self.usage.get("output_tokens") or 0)


async def _drain(stream: AsyncStream[RawMessageStreamEvent]) -> None:
    """Read what follows ``message_stop`` — normally only the body's end, read so that the
    connection can be kept — for at most `_DRAIN_TIMEOUT`. The reply is whole by then: a server
    that holds the response open, sends more or breaks the connection changes nothing (the
    stream is closed on the way out)."""
    with trio.move_on_after(_DRAIN_TIMEOUT), contextlib.suppress(*_AFTER_THE_END):
        async for _ in stream:
            pass


def new_anthropic_client(
    base_url: str | None,
    api_key: str | None,
    connect_timeout: float,
    http_client: httpx2.AsyncClient | None = None,
) -> anthropic.AsyncAnthropic:
    """Blocking (SSL context, CA bundle): the SDK client every Anthropic provider uses — the
    key and base URL explicit, no SDK retries, only connecting bounded, no telemetry, what
    an answer may make it hold bounded (`robotad.http_bounds`)."""
    return anthropic.AsyncAnthropic(
        api_key=api_key or NO_KEY,
        base_url=base_url or DEFAULT_ANTHROPIC_BASE_URL,
        max_retries=0,
        timeout=sdk_timeout(connect_timeout),
        http_client=bounded(
            without_redirects(http_client or anthropic.DefaultAsyncHttpxClient()), ProviderFailure
        ),
        open_telemetry=False,
    )


class AnthropicProvider(SdkProvider[anthropic.AsyncAnthropic]):
    """`Provider` over the Messages API. See the module docstring for keys and trio, and
    `SdkProvider` for the shared contract (retries, failures, closing).

    As `OpenAIProvider`, plus `max_tokens`: the reply budget every request carries (the API
    requires one). Raises `ValueError` for a non-positive `max_tokens` as well.
    """

    kind = "anthropic"
    _sdk_error = anthropic.AnthropicError

    def __init__(
        self,
        *,
        name: str,
        model: str,
        base_url: str | None,
        api_key: str | None,
        context_window: int | None,
        max_tokens: int = 8192,
        max_retries: int = 2,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        http_client: httpx2.AsyncClient | None = None,
        retry_policy: RetryPolicy | None = None,
        lease: ClientLease[anthropic.AsyncAnthropic] | None = None,
    ) -> None:
        check_max_tokens(max_tokens)
        base_url = base_url or DEFAULT_ANTHROPIC_BASE_URL
        super().__init__(
            name=name,
            model=model,
            base_url=base_url,
            api_key=api_key,
            context_window=context_window,
            max_retries=max_retries,
            connect_timeout=connect_timeout,
            idle_timeout=idle_timeout,
            retry_policy=retry_policy,
        )
        self.max_tokens = max_tokens
        self._adopt(
            lease, lambda: new_anthropic_client(base_url, api_key, connect_timeout, http_client)
        )

    def request_params(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of ``messages.create`` for `request`."""
        system, messages = anthropic_messages(request.messages)
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": messages,
            "stream": True,
        }
        if system:
            params["system"] = system
        if request.tools:
            params["tools"] = anthropic_tools(request.tools)
            params["tool_choice"] = anthropic_tool_choice(request.tool_choice)
        if request.effort is not None:
            params["output_config"] = {"effort": request.effort}
        return params

    async def _stream_reply(self, params: dict[str, Any], observer: StreamObserver) -> ModelReply:
        assembler = MessageStreamAssembler()
        stream = await self._client.messages.create(**params)
        async with stream:
            await self.require_event_stream(stream.response)
            async for event in stream:
                assembler.feed(event, observer)
                if assembler.stopped:
                    await _drain(stream)
                    break
        return assembler.reply()

    def _failure(self, exc: Exception) -> ProviderFailure | None:
        if isinstance(exc, anthropic.APIStatusError):
            if exc.response.is_success:
                # An ``error`` event inside a started (200) stream.
                return stream_failure(exc.body, self._secrets)
            return self._http_failure(exc.status_code, exc.body, exc.response)
        if isinstance(exc, anthropic.APITimeoutError):
            return timeout_failure(self.connect_timeout)
        if isinstance(exc, anthropic.APIConnectionError):
            return connection_failure(exc.__cause__ or exc)
        return None
