"""The OpenAI provider: Chat Completions, streamed, through the official `openai` SDK.

Any OpenAI-compatible server works (OpenAI, Ollama, vLLM, llama.cpp's server, LM Studio): the
request is a plain Chat Completions call with ``stream=True`` and
``stream_options={"include_usage": True}``, so the last chunk carries exact token usage.
The reply is whole at the chunk that says how it finished: what follows (usage, ``[DONE]``)
is read only briefly, so a server that then holds the response open or breaks the connection
cannot fail a finished reply.

Under trio: the SDK's HTTP layer (httpx2 over httpcore2) has a native trio backend, so the
SDK's default client streams under trio as it is; nothing of the request path needs asyncio.
The one asyncio-only piece is the SDK client's garbage-collection cleanup, which under trio
does nothing, so `aclose` closes the client explicitly. A caller-supplied ``http_client``
(an ``httpx2.AsyncClient``, the HTTP library these SDK versions are built on) is owned by the
provider from then on and closed by `aclose` too.

Keys: the key is passed in by the caller and handed to the SDK explicitly, as is the base
URL, so the SDK's own ``OPENAI_API_KEY``/``OPENAI_BASE_URL`` lookups never apply. With no key
a fixed placeholder is sent, which keyless local servers ignore and real ones answer with 401.
The SDK still honours a few ambient variables of its own that have no constructor switch
(``OPENAI_ORG_ID``, ``OPENAI_PROJECT_ID``, ``OPENAI_CUSTOM_HEADERS``).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx2
import msgspec
import openai
import trio
from openai.types.chat import ChatCompletionChunk

from protocol.shapes import ToolCall, Usage, new_id
from robotad.agent.provider import ModelReply, ModelRequest, StreamObserver
from robotad.http_bounds import bounded
from robotad.providers.clients import ClientLease
from robotad.providers.convert import (
    openai_messages,
    openai_tool_choice,
    openai_tools,
    reported_usage,
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
from robotad.providers.stream_shapes import chat_chunk_problem

__all__ = ["DEFAULT_OPENAI_BASE_URL", "ChatStreamAssembler", "OpenAIProvider", "new_openai_client"]

#: The create call's members the SDK gets as its own arguments (see `_stream_reply`).
_TYPED = ("model", "stream", "stream_options")

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
#: OpenAI's own API, which takes a reply budget as ``max_completion_tokens`` only.
_OPENAI_HOST = "api.openai.com"
#: Seconds the usage chunk is waited for once the reply has finished (it comes right after).
_USAGE_WAIT = 1.0
#: Seconds the rest of a body is read after the usage chunk (`_after_finish`).
_DRAIN_TIMEOUT = 0.1
#: What reading past the finish may raise: an error payload, a broken connection, data that
#: is not JSON or not of the chunk's shape, a bound crossed.
_AFTER_THE_END = (openai.OpenAIError, httpx2.HTTPError, ValueError, ProviderFailure)
#: Characters one tool call adds to the reply besides its id, name and arguments: its frame in
#: the reply's JSON (``_raw``), counted against the reply's bound for every new call.
_CALL_SIZE = len('{"id":"","type":"function","function":{"name":"","arguments":""}}')


@dataclass
class _CallSlot:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ChatStreamAssembler:
    """Folds Chat Completions chunks into one reply (sans-I/O).

    Text deltas go to ``observer.on_text`` as they come; every other chunk to
    ``observer.on_activity``. Tool-call deltas are gathered by their ``index`` (a delta
    without one continues the latest call, or opens a new one when it brings a new id).
    Only choice 0 is read: we never ask for more than one.
    """

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, _CallSlot] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.meta: dict[str, Any] = {}
        self._role_seen = False

    def feed(self, chunk: ChatCompletionChunk, observer: StreamObserver) -> None:
        """Fold `chunk` in. Raises `ProviderFailure` (not retryable) for a chunk of another
        shape, naming what is wrong (`chat_chunk_problem`)."""
        problem = chat_chunk_problem(chunk)
        if problem is not None:
            raise ProviderFailure(
                f"the server sent a chunk that is no Chat Completions chunk: {problem}"
            )
        if not self.meta:
            self.meta = {"id": getattr(chunk, "id", None), "model": getattr(chunk, "model", None)}
            if getattr(chunk, "system_fingerprint", None):
                self.meta["system_fingerprint"] = chunk.system_fingerprint
        if chunk.usage is not None:
            self.usage = chunk.usage.model_dump(exclude_none=True, warnings=False)
        texted = False
        kept = 0  # characters of tool calls kept from this chunk
        # A chunk that says nothing (an empty delta, as a server's keep-alive) is no sign of
        # life: the idle timeout is for a model that stopped producing, as Anthropic's pings
        # do not count either. Anything else does: the role (the first time: a server that
        # repeats it forever says nothing new), a tool call piece, a finish, usage, or a member
        # the SDK does not know (a reasoning model's thinking, ``reasoning_content``).
        alive = chunk.usage is not None
        for choice in chunk.choices or ():
            if choice.index not in (0, None):
                continue
            delta = choice.delta
            if delta is not None:
                piece = (delta.content or "") + (delta.refusal or "")
                if piece:
                    self.text.append(piece)
                    observer.on_text(piece)
                    texted = True
                for call in delta.tool_calls or ():
                    kept += self._add_call_delta(call)
                    alive = True
                extra = delta.model_extra or {}
                news = bool(delta.role) and not self._role_seen
                self._role_seen = self._role_seen or bool(delta.role)
                alive = alive or news or any(value for value in extra.values())
            if choice.finish_reason is not None:
                self.finish_reason = text_of(choice.finish_reason)
                alive = True
        if (alive and not texted) or kept:
            observer.on_activity(kept)

    def _add_call_delta(self, call: Any) -> int:
        """Fold one tool-call delta in; the number of characters it added (a new call counts
        its JSON's frame, `_CALL_SIZE`, besides its id, name and arguments)."""
        index = call.index
        call_id = text_of(call.id)
        if not isinstance(index, int):
            last = max(self.calls, default=-1)
            fresh = call_id and (last < 0 or self.calls[last].id not in ("", call_id))
            index = last + 1 if fresh or last < 0 else last
        added = 0
        if index not in self.calls:
            added += _CALL_SIZE
        slot = self.calls.setdefault(index, _CallSlot())
        if call_id and not slot.id:
            slot.id = call_id
            added += len(call_id)
        function = call.function
        if function is None:
            return added
        name = text_of(function.name)
        if name and name != slot.name:
            # A name comes once, whole; some servers repeat it on every delta.
            slot.name = name if not slot.name else slot.name + name
            added += len(name)
        arguments = function.arguments
        if arguments is not None:
            # Some servers send the arguments as an object rather than JSON text.
            piece = arguments if isinstance(arguments, str) else _compact_json(arguments)
            slot.arguments.append(piece)
            added += len(piece)
        return added

    def reply(self) -> ModelReply:
        """The assembled reply; a stream that never said how it finished is a failure."""
        if self.finish_reason is None:
            raise ProviderFailure("stream ended before the reply was complete", retryable=True)
        text = "".join(self.text)
        calls = [self._tool_call(slot) for _, slot in sorted(self.calls.items())]
        return ModelReply(text, calls, self._usage(), self.finish_reason, self._raw(text))

    def _usage(self) -> Usage | None:
        if self.usage is None:
            return None
        total = self.usage.get("total_tokens")
        return reported_usage(
            "openai",
            self.usage.get("prompt_tokens") or 0,
            self.usage.get("completion_tokens") or 0,
            total if isinstance(total, int) else None,
        )

    @staticmethod
    def _tool_call(slot: _CallSlot) -> ToolCall:
        return tool_call(slot.id or new_id("call_"), slot.name, "".join(slot.arguments))

    def _raw(self, text: str) -> dict[str, Any]:
        """The reply as the non-streamed ``chat.completion`` object it amounts to."""
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if self.calls:
            message["tool_calls"] = [
                {
                    "id": slot.id,
                    "type": "function",
                    "function": {"name": slot.name, "arguments": "".join(slot.arguments)},
                }
                for _, slot in sorted(self.calls.items())
            ]
        raw: dict[str, Any] = {"object": "chat.completion", **self.meta}
        raw["choices"] = [{"index": 0, "message": message, "finish_reason": self.finish_reason}]
        if self.usage is not None:
            raw["usage"] = self.usage
        return raw


async def _after_finish(
    stream: openai.AsyncStream[ChatCompletionChunk],
    assembler: ChatStreamAssembler,
    observer: StreamObserver,
) -> None:
    """Read what follows the chunk that says how the reply finished: the usage chunk, for at
    most `_USAGE_WAIT`, then the rest (``[DONE]``, the body's end, read so that the
    connection can be kept) for at most `_DRAIN_TIMEOUT`. The reply is whole by then: a server
    that holds the response open without ``[DONE]`` or breaks the connection costs at most
    its usage, never the reply (it waited for the caller's idle deadline, and the turn failed
    with a reply already shown whole)."""
    with trio.move_on_after(_USAGE_WAIT), contextlib.suppress(*_AFTER_THE_END):
        async for chunk in stream:
            assembler.feed(chunk, observer)
            if assembler.usage is not None:
                break
    with trio.move_on_after(_DRAIN_TIMEOUT), contextlib.suppress(*_AFTER_THE_END):
        async for _ in stream:
            pass


def _compact_json(value: object) -> str:
    return msgspec.json.encode(value).decode()


def new_openai_client(
    base_url: str | None,
    api_key: str | None,
    connect_timeout: float,
    http_client: httpx2.AsyncClient | None = None,
) -> openai.AsyncOpenAI:
    """Blocking (SSL context, CA bundle): the SDK client every OpenAI provider uses — the
    key and base URL explicit, no SDK retries, only connecting bounded (`sdk_timeout`), what
    an answer may make it hold bounded (`robotad.http_bounds`)."""
    return openai.AsyncOpenAI(
        api_key=api_key or NO_KEY,
        base_url=base_url or DEFAULT_OPENAI_BASE_URL,
        max_retries=0,
        timeout=sdk_timeout(connect_timeout),
        http_client=bounded(
            without_redirects(http_client or openai.DefaultAsyncHttpxClient()), ProviderFailure
        ),
    )


class OpenAIProvider(SdkProvider[openai.AsyncOpenAI]):
    """`Provider` over Chat Completions. See the module docstring for keys and trio, and
    `SdkProvider` for the shared contract (retries, failures, closing).

    `base_url` defaults to OpenAI's endpoint. `max_tokens`, when given, bounds every reply: sent
    as ``max_completion_tokens`` to OpenAI's own endpoint (which refuses ``max_tokens`` for its
    reasoning models) and as ``max_tokens`` to any other server (llama.cpp's, Ollama, vLLM and
    LM Studio read that one). `connect_timeout` bounds opening a connection;
    `idle_timeout` is carried for the agent loop's idle deadline, the only wait for data.
    `http_client` becomes the provider's. With a `lease` the provider uses the pooled client
    it holds (built for the same base URL, key and connect timeout) and only releases it.
    """

    kind = "openai"
    _sdk_error = openai.OpenAIError

    def __init__(
        self,
        *,
        name: str,
        model: str,
        base_url: str | None,
        api_key: str | None,
        context_window: int | None,
        max_tokens: int | None = None,
        max_retries: int = 2,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
        http_client: httpx2.AsyncClient | None = None,
        retry_policy: RetryPolicy | None = None,
        lease: ClientLease[openai.AsyncOpenAI] | None = None,
    ) -> None:
        base_url = base_url or DEFAULT_OPENAI_BASE_URL
        check_max_tokens(max_tokens)
        self.max_tokens = max_tokens
        self._budget_name = (
            "max_completion_tokens" if urlsplit(base_url).hostname == _OPENAI_HOST else "max_tokens"
        )
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
        self._adopt(
            lease, lambda: new_openai_client(base_url, api_key, connect_timeout, http_client)
        )

    def request_params(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for `request`."""
        params: dict[str, Any] = {
            "model": self.model,
            "messages": openai_messages(request.messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            params["tools"] = openai_tools(request.tools)
            params["tool_choice"] = openai_tool_choice(request.tool_choice)
        if request.effort is not None:
            params["reasoning_effort"] = request.effort
        if self.max_tokens is not None:
            params[self._budget_name] = self.max_tokens
        return params

    async def _stream_reply(self, params: dict[str, Any], observer: StreamObserver) -> ModelReply:
        assembler = ChatStreamAssembler()
        # Our params are already the wire's JSON (`providers.convert` builds them). As the
        # SDK's typed arguments they would be walked against its TypedDicts on every call —
        # about 1.5 ms for seven tool schemas here, renaming aliased keys none of them has —
        # so only the model and the stream switches go as arguments and the rest as
        # ``extra_body``, which the SDK merges over the body as it is (its documented
        # precedence; the empty ``messages`` stand-in is replaced).
        typed = {name: params[name] for name in _TYPED}
        wire = {name: value for name, value in params.items() if name not in _TYPED}
        stream = await self._client.chat.completions.create(**typed, messages=[], extra_body=wire)
        async with stream:
            await self.require_event_stream(stream.response)
            async for chunk in stream:
                assembler.feed(chunk, observer)
                if assembler.finish_reason is not None:
                    await _after_finish(stream, assembler, observer)
                    break
        return assembler.reply()

    def _failure(self, exc: Exception) -> ProviderFailure | None:
        if isinstance(exc, openai.APIStatusError):
            return self._http_failure(exc.status_code, exc.body, exc.response)
        if isinstance(exc, openai.APITimeoutError):
            return timeout_failure(self.connect_timeout)
        if isinstance(exc, openai.APIConnectionError):
            return connection_failure(exc.__cause__ or exc)
        if isinstance(exc, openai.APIError):
            # Raised for an ``{"error": ...}`` payload inside a 200 stream.
            return stream_failure(exc.body, self._secrets)
        return None
