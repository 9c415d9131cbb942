"""What both SDK-backed providers share: checks, our retry, an attempt's error boundary, closing.

`SdkProvider` is the shell of `OpenAIProvider` and `AnthropicProvider`. A vendor module supplies
only what differs between the SDKs: building the client, the request parameters, reading one
stream into a reply (`_stream_reply`), and naming which of its SDK's exceptions mean what
(`_failure`). Everything else is here, once:

- construction refuses a key that cannot be a header value and a non-positive timeout, both
  with a `ValueError` that never quotes the key;
- one owner per wait: the SDK client bounds only *opening* a connection (`connect_timeout`);
  waiting for data is the agent loop's idle deadline (`idle_timeout`, which the provider
  carries for it), and retrying is ours (`call_with_retries`, the SDK's ``max_retries=0``).
  No retry starts once `idle_timeout` has passed since the call began, so a call's total time
  is bounded by the idle window plus at most one attempt;
- `complete` runs `_stream_reply` under `call_with_retries`, retrying only while no text has
  reached the observer (see `robotad.providers.retry`); every failure's reason starts with
  the server's ``host:port`` (`endpoint`), so a person knows which server failed;
- every SDK or ``httpx2`` exception leaving an attempt becomes a `ProviderFailure` raised
  ``from None``: an SDK error's text and its chained causes may quote a header value, and a
  traceback of that chain must never reach a log. Anything else (our own `ProviderFailure`,
  trio's cancellation) propagates untouched;
- the client is either the provider's own (built at construction, perhaps over the caller's
  ``http_client``) or a pooled one it holds a `ClientLease` on (`robotad.providers.clients`,
  the daemon's: one client per configuration, shared by sessions). `aclose` closes an own
  client explicitly, because the SDKs' garbage-collection cleanup is asyncio-only and does
  nothing under trio; a pooled client is only released, the others keep using it.
"""

from __future__ import annotations

import abc
import json
import sys
from collections.abc import Callable
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import httpx2
import trio

from robotad.agent.provider import (
    DEFAULT_IDLE_TIMEOUT,
    ModelReply,
    ModelRequest,
    ProviderError,
    StreamObserver,
)
from robotad.providers.clients import ClientLease
from robotad.providers.failures import (
    ProviderFailure,
    check_api_key,
    connection_failure,
    endpoint_of,
    error_message,
    parse_retry_after,
    redirect_target,
    scrub,
    status_failure,
)
from robotad.providers.retry import RetryPolicy, StreamProgress, call_with_retries
from robotad.providers.windows import context_window_for

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_IDLE_TIMEOUT",
    "NO_KEY",
    "SdkProvider",
    "check_max_tokens",
    "sdk_timeout",
    "without_redirects",
]

#: Sent when no key is configured: keyless local servers ignore it, real ones answer 401.
NO_KEY = "no-key"
#: Seconds, as PROTOCOL §10.2/§10.3 default them (`connect_timeout_ms`, `idle_timeout_ms`).
DEFAULT_CONNECT_TIMEOUT = 10.0
_CLOSE_TIMEOUT = 5.0


class _SdkClient(Protocol):
    async def close(self) -> None: ...


ClientT = TypeVar("ClientT", bound=_SdkClient)
ClientHttpT = TypeVar("ClientHttpT", bound=httpx2.AsyncClient)


def sdk_timeout(connect_timeout: float) -> httpx2.Timeout:
    """The SDK client's timeout: `connect_timeout` to open a connection, nothing else — the
    wait for data belongs to the agent loop's idle deadline, never to a second clock."""
    return httpx2.Timeout(None, connect=connect_timeout)


def without_redirects(client: ClientHttpT) -> ClientHttpT:
    """`client`, following no redirect: a model server's redirect becomes the failure naming
    where it leads (`status_failure`). Followed, it would take the conversation, and
    Anthropic's ``x-api-key`` header (which the HTTP library keeps across hosts, unlike
    ``Authorization``), to whatever host it names."""
    client.follow_redirects = False
    return client


def check_max_tokens(max_tokens: int | None) -> None:
    """Refuse a reply budget that is not a positive integer (`ValueError`); None is none."""
    if max_tokens is not None and max_tokens <= 0:
        raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")


async def _json_body(response: httpx2.Response) -> object:
    """`response`'s body as JSON; None when it cannot be read or is not JSON."""
    try:
        return json.loads(await response.aread())
    except (httpx2.HTTPError, ProviderFailure, ValueError, RecursionError):
        return None


def _undecodable(exc: ValueError) -> ProviderFailure | None:
    """The failure for an event the SDK could not decode, None for any other `ValueError`.
    The SDKs decode each line as UTF-8 and parse each event's data with ``json.loads``, and
    let the error out: not JSON, not UTF-8, or a number of more digits than Python converts
    (``sys.get_int_max_str_digits``, a ``ValueError`` of its own). Not retried: the server
    would send the same."""
    if isinstance(exc, json.JSONDecodeError):
        return ProviderFailure(
            "the server sent an event whose data is not JSON "
            f"({exc.msg} at line {exc.lineno}, column {exc.colno})"
        )
    if isinstance(exc, UnicodeDecodeError):
        return ProviderFailure(
            f"the server sent an event that is not UTF-8 text (byte 0x{exc.object[exc.start]:02x})"
        )
    if "integer string conversion" in str(exc):
        return ProviderFailure(
            "the server sent an event whose data is not JSON robotad reads (a number of more "
            f"than {sys.get_int_max_str_digits()} digits)"
        )
    return None


class SdkProvider(abc.ABC, Generic[ClientT]):
    """A `Provider` over a vendor SDK client (`ClientT`), which the subclass sets up with
    `_adopt` after calling ``super().__init__``.

    `context_window` None means the known window of `model`, if any (`context_window_for`).
    `retry_policy`, when given, replaces the policy `max_retries` would make. `endpoint` is
    ``host:port`` of `base_url`; `idle_timeout` (seconds) is for the caller's idle deadline.
    Raises `ValueError` for a key that cannot be an HTTP header value, a non-positive timeout,
    or a negative `max_retries` — never quoting the key.
    """

    kind: str
    #: The root of the SDK's exception tree; any of it not named by `_failure` is a client error.
    _sdk_error: ClassVar[type[Exception]]
    _client: ClientT

    def __init__(
        self,
        *,
        name: str,
        model: str,
        base_url: str,
        api_key: str | None,
        context_window: int | None,
        max_retries: int,
        connect_timeout: float,
        idle_timeout: float,
        retry_policy: RetryPolicy | None,
    ) -> None:
        check_api_key(api_key)
        for label, value in (("connect_timeout", connect_timeout), ("idle_timeout", idle_timeout)):
            if not value > 0:
                raise ValueError(f"{label} must be positive, got {value!r}")
        self.endpoint = endpoint_of(base_url)
        self.connect_timeout = connect_timeout
        self.idle_timeout = idle_timeout
        self.name = name
        self.model = model
        self.context_window = context_window_for(model, context_window)
        self._secrets = (api_key,) if api_key else ()
        self._retry = retry_policy or RetryPolicy(max_retries=max_retries)
        self._closed = False
        self._lease: ClientLease[ClientT] | None = None

    def _adopt(self, lease: ClientLease[ClientT] | None, build: Callable[[], ClientT]) -> None:
        """Use the pooled client `lease` holds, else an own client made by `build`."""
        self._lease = lease
        self._client = lease.client if lease is not None else build()

    @abc.abstractmethod
    def request_params(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of the SDK's streaming create call for `request`."""

    @abc.abstractmethod
    async def _stream_reply(self, params: dict[str, Any], observer: StreamObserver) -> ModelReply:
        """One streamed call with `params`, every chunk told to `observer`, assembled into a
        reply. Closes its HTTP stream on the way out, whatever happens; SDK exceptions escape
        as they are (`_attempt` translates them)."""

    @abc.abstractmethod
    def _failure(self, exc: Exception) -> ProviderFailure | None:
        """The failure a vendor-specific SDK exception stands for; None for any other."""

    def _http_failure(
        self, status: int, body: object, response: httpx2.Response
    ) -> ProviderFailure:
        """The failure for an HTTP error answer or a redirect (`status_failure`), secrets cut
        out."""
        headers = response.headers
        return status_failure(
            status,
            body=body,
            retry_after=parse_retry_after(headers),
            secrets=self._secrets,
            redirect_to=redirect_target(
                str(response.request.url), headers.get("location"), self._secrets
            ),
        )

    async def complete(self, request: ModelRequest, observer: StreamObserver) -> ModelReply:
        """One streamed call, retried per the policy while no text has been shown.

        Raises `ProviderError` whose reason starts with `endpoint`; cancellation closes the
        HTTP stream and propagates.
        """
        if self._closed:
            raise ProviderFailure(f"provider {self.name} is closed")
        params = self.request_params(request)
        progress = StreamProgress(observer)
        try:
            return await call_with_retries(
                lambda: self._attempt(params, progress),
                self._retry,
                progress=progress,
                provider=self.name,
                budget=self.idle_timeout,
            )
        except ProviderError as err:
            raise ProviderFailure(
                f"{self.endpoint}: {err.reason}", retryable=err.retryable, status=err.status
            ) from None

    async def _attempt(self, params: dict[str, Any], progress: StreamProgress) -> ModelReply:
        try:
            return await self._stream_reply(params, progress)
        except Exception as exc:
            failure = self._failure(exc)
            if failure is None and isinstance(exc, httpx2.TransportError):
                # A started stream's transport error (a reset, a body cut short) escapes
                # the Anthropic SDK unwrapped: a connection failure like any other.
                failure = connection_failure(exc)
            if failure is None and isinstance(exc, (self._sdk_error, httpx2.HTTPError)):
                failure = ProviderFailure(f"provider client error ({type(exc).__name__})")
            if failure is None and isinstance(exc, ValueError):
                failure = _undecodable(exc)
            if failure is None:
                raise  # not the SDK's: our own ProviderFailure, or a bug to see whole
            raise failure from None

    async def require_event_stream(self, response: httpx2.Response) -> None:
        """Refuse an answer that is no event stream: a web page or other document a wrong
        ``base_url`` leads to would otherwise read as a stream that ended before any reply
        (and be asked for again). A JSON answer is read (within the bounds of
        `robotad.http_bounds`) for what it is: an error the server sent with status 200 is
        named by its message, a whole reply as a server that does not stream."""
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind == "text/event-stream":
            return
        shown = kind or "no content type"
        if kind == "application/json":
            body = await _json_body(response)
            message = error_message(body)
            if message is not None:
                detail = scrub(message, self._secrets)
                raise ProviderFailure(f"the server answered with an error, not a stream: {detail}")
            if isinstance(body, dict) and ("choices" in body or body.get("type") == "message"):
                raise ProviderFailure(
                    f"the server answered with a whole reply ({shown}), not an event stream: "
                    "it does not stream, and robotad reads only streamed replies"
                )
        raise ProviderFailure(
            f"the server answered with {shown}, not an event stream: does base_url name the "
            "model API (an OpenAI-compatible one usually ends in /v1)?"
        )

    async def aclose(self) -> None:
        """Close an own SDK client and its connections, or release a pooled one; idempotent,
        completes even when the caller is being cancelled."""
        if self._closed:
            return
        self._closed = True
        with trio.move_on_after(_CLOSE_TIMEOUT, shield=True):
            if self._lease is not None:
                await self._lease.release()
            else:
                await self._client.close()
