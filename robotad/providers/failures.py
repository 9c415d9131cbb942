"""Turning a failed model call into a `ProviderError` whose reason is safe to show and log.

Safety is by construction, not by scrubbing alone: a reason is built from the HTTP status, an
exception's *class name* and at most the server's own error message. Transport exceptions'
texts are never used — an HTTP library may quote an illegal header value (the key) in them. The
server message is the one piece of foreign text kept, because it is what explains a 400 ("context
length exceeded"); it is dropped for 401/403 (servers echo a masked key there) and otherwise
has every configured secret cut out and is shortened.
"""

from __future__ import annotations

import email.utils
import errno
import math
import os
import re
import socket
import time
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC
from urllib.parse import urljoin, urlsplit

from robotad.agent.provider import ProviderError

__all__ = [
    "ProviderFailure",
    "check_api_key",
    "connection_failure",
    "endpoint_of",
    "error_message",
    "parse_retry_after",
    "redirect_target",
    "scrub",
    "status_failure",
    "stream_failure",
    "timeout_failure",
]

_MESSAGE_LIMIT = 300
_HEADER_SAFE = re.compile(r"[\x21-\x7e]+")
_REDACTED = "[redacted]"

#: Statuses a retry may cure, besides every 5xx (the SDKs' own list).
_RETRYABLE_STATUSES = frozenset({408, 409, 429})


class ProviderFailure(ProviderError):
    """A `ProviderError` that also carries the server's Retry-After hint, in seconds."""

    def __init__(
        self,
        reason: str,
        *,
        retryable: bool = False,
        status: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(reason, retryable=retryable, status=status)
        self.retry_after = retry_after


def check_api_key(key: str | None) -> None:
    """Refuse a key that cannot travel in an HTTP header (visible ASCII only).

    Checked up front because an HTTP library that refuses a header quotes its value in the
    exception and in its debug log. The `ValueError` names the problem, never the key.
    """
    if key is not None and not _HEADER_SAFE.fullmatch(key):
        raise ValueError(
            "api_key must be non-empty visible ASCII without spaces or control characters"
        )


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` on one line, every secret replaced, cut to a bounded length. Should a secret
    still be present afterwards (it overlaps the replacement marker), the answer is empty:
    the text is withheld."""
    text = " ".join(text.split())
    live = [secret for secret in secrets if secret]
    for secret in live:
        text = text.replace(secret, _REDACTED)
    if len(text) > _MESSAGE_LIMIT:
        text = text[: _MESSAGE_LIMIT - 1] + "…"
    if any(secret in text for secret in live):
        return ""
    return text


def error_message(body: object) -> str | None:
    """The human message of an error body in either vendor's shape
    (``{"error": {"message": ...}}``, with or without an outer ``"type": "error"``)."""
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
        if isinstance(body.get("message"), str):
            return str(body["message"])
    return None


def _describe(status: int) -> str:
    if status == 401:
        return "authentication failed"
    if status == 403:
        return "access denied"
    if status == 408:
        return "request timed out"
    if status == 429:
        return "rate limited"
    if status == 529:
        return "server overloaded"
    if status >= 500:
        return "server error"
    return "request rejected"


def endpoint_of(base_url: str) -> str:
    """``host:port`` of `base_url`, the port made explicit (80/443 by scheme); an IPv6 host
    in brackets. What a failure's reason names, so a person knows which server failed."""
    parts = urlsplit(base_url)
    host = parts.hostname or "?"
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        port = 443 if parts.scheme.lower() == "https" else 80
    shown = f"[{host}]" if ":" in host else host
    return f"{shown}:{port}"


def redirect_target(request_url: str, location: str | None, secrets: Iterable[str]) -> str | None:
    """Where a redirect answering `request_url` leads, as ``scheme://host:port/path`` (no
    credentials, query or fragment, every secret cut out); None without a readable
    ``Location``."""
    if location is None:
        return None
    try:
        parts = urlsplit(urljoin(request_url, location))
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https") or not parts.hostname:
            return None
        where = f"{scheme}://{endpoint_of(parts.geturl())}{parts.path}"
    except ValueError:
        return None
    return scrub(where, secrets) or None


def status_failure(
    status: int,
    *,
    body: object,
    retry_after: float | None,
    secrets: Iterable[str],
    redirect_to: str | None = None,
) -> ProviderFailure:
    """The failure for an HTTP error answer: "HTTP 401: authentication failed",
    "HTTP 429: rate limited: <server message>", …; for a redirect (never followed: the key
    and the conversation would go along), where it leads (`redirect_target`)."""
    if 300 <= status < 400:
        where = f"to {redirect_to}" if redirect_to else "elsewhere"
        return ProviderFailure(
            f"HTTP {status}: the server redirects {where}; robotad follows no redirect of a "
            "model server (the key and the conversation would go along): set base_url to "
            "where it leads",
            status=status,
        )
    reason = f"HTTP {status}: {_describe(status)}"
    detail = scrub(error_message(body) or "", secrets) if status not in (401, 403) else ""
    if detail:
        reason = f"{reason}: {detail}"
    retryable = status in _RETRYABLE_STATUSES or status >= 500
    return ProviderFailure(reason, retryable=retryable, status=status, retry_after=retry_after)


def stream_failure(body: object, secrets: Iterable[str]) -> ProviderFailure:
    """An error the server reported inside an already-started stream (an SSE error event).
    Retryable: these are server-side faults (overload, internal error)."""
    detail = scrub(error_message(body) or "", secrets)
    reason = "stream error reported by the server"
    if detail:
        reason = f"{reason}: {detail}"
    return ProviderFailure(reason, retryable=True)


def connection_failure(exc: BaseException) -> ProviderFailure:
    """A transport failure, named by its cause: the operating system's words for the first
    error number found in the exception's chain ("connection refused", "no route to host"),
    "cannot resolve the host name" for a name lookup failure, else the exception's class name.
    Never an exception's own text (see the module docstring)."""
    for link in _chain(exc):
        if isinstance(link, socket.gaierror):
            return ProviderFailure("cannot resolve the host name", retryable=True)
        number = link.errno if isinstance(link, OSError) else None
        if isinstance(number, int) and number in errno.errorcode:
            return ProviderFailure(os.strerror(number).lower(), retryable=True)
    return ProviderFailure(f"connection failed ({type(exc).__name__})", retryable=True)


def timeout_failure(connect_timeout: float | None = None) -> ProviderFailure:
    """A timeout the HTTP client reported. Only connecting is bounded there (the agent loop
    owns the wait for data), so with `connect_timeout` it says so."""
    if connect_timeout is not None:
        return ProviderFailure(f"no connection within {connect_timeout:g} s", retryable=True)
    return ProviderFailure("request timed out", retryable=True)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, its causes and contexts, and the members of any exception group among them,
    depth first, each once."""
    seen: set[int] = set()
    stack: list[BaseException] = [exc]
    while stack:
        link = stack.pop()
        if id(link) in seen:
            continue
        seen.add(id(link))
        yield link
        members = link.exceptions if isinstance(link, BaseExceptionGroup) else ()
        following = [link.__cause__, link.__context__, *members]
        stack.extend(item for item in reversed(following) if item is not None)


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds the server asks us to wait: ``retry-after-ms``, else ``retry-after`` as seconds
    or an HTTP date; None when absent or unreadable. Never negative."""
    millis = _seconds(headers.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000.0
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _seconds(value)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(str(value))
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)  # HTTP dates are GMT
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def _seconds(value: object) -> float | None:
    """A finite, non-negative number from a header value; None otherwise."""
    if value is None:
        return None
    try:
        number = float(str(value))
    except ValueError:
        return None
    return max(0.0, number) if math.isfinite(number) else None
