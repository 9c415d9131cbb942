"""WebFetch: GET an http(s) URL and return its text; HTML comes back as readable text.

Limits, each a failed result saying which: the whole fetch (connect, redirects, body) within
`FETCH_TIME_LIMIT_S`; a body of at most `MAX_RESPONSE_BYTES` after content decoding (read as a
stream and abandoned past the limit, so a huge or endless body costs no more); at most
`MAX_REDIRECTS` redirects. Also refused: a scheme other than http/https, a non-2xx status, and
content that is not text (``text/*``, JSON, XML, JavaScript and a few other textual types are
accepted; a response without a type is accepted if it does not look binary).

Redirects are followed only while they stay on the requested host (scheme and port may
change). A redirect to another host is reported, with its target, as a failed result: the
permission gate judged the URL the call named, so the model must ask for the new one in a call
of its own, which the gate then judges. Credentials in a URL never appear in a result.

HTML (``text/html``, XHTML) is converted with `html_to_text`; other text is returned as sent,
decoded by the declared charset (an HTML ``<meta charset>`` counts), else UTF-8, with
undecodable bytes replaced. The text is cut at `MAX_CONTENT_CHARS` with a note.
"""

from __future__ import annotations

import codecs
import re
from typing import Annotated

import httpx
import trio
from msgspec import Meta, Struct

from robotad.agent.tool import ToolContext, ToolProfile, ToolResult, TypedTool
from robotad.tools.html_text import html_to_text

__all__ = [
    "FETCH_TIME_LIMIT_S",
    "MAX_CONTENT_CHARS",
    "MAX_REDIRECTS",
    "MAX_RESPONSE_BYTES",
    "WebFetchArguments",
    "WebFetchTool",
]

FETCH_TIME_LIMIT_S = 30.0
MAX_RESPONSE_BYTES = 5 * 1024 * 1024
MAX_REDIRECTS = 5
MAX_CONTENT_CHARS = 100_000
"""Characters of (converted) text in one answer."""

USER_AGENT = "robotad-WebFetch/0.1"

_TEXT_APPLICATION_TYPES = frozenset(
    {
        "application/json", "application/xml", "application/javascript",
        "application/x-javascript", "application/ecmascript", "application/x-yaml",
        "application/yaml", "application/toml", "application/x-sh", "application/sql",
        "application/graphql", "application/x-ndjson", "application/csv",
    }
)  # fmt: skip
_HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.I)
_SNIFF_BYTES = 8192


class WebFetchArguments(Struct, forbid_unknown_fields=True, frozen=True):
    """Fetch a web page or text resource."""

    url: Annotated[str, Meta(min_length=1, description="The http:// or https:// URL to fetch.")]


class _Refused(Exception):
    """A fetch that ends in a failed result; carries the message and metadata."""

    def __init__(self, message: str, **metadata: object) -> None:
        super().__init__(message)
        self.metadata = metadata


class WebFetchTool(TypedTool[WebFetchArguments]):
    """The built-in WebFetch tool (risk ``inspect``; permission argument ``url``)."""

    name = "WebFetch"
    description = (
        "Fetch an http(s) URL and return its content as text; HTML is converted to readable "
        "text with links kept. Only text, HTML, JSON and XML are accepted, up to "
        f"{MAX_RESPONSE_BYTES // (1024 * 1024)} MiB, within {FETCH_TIME_LIMIT_S:g} s. "
        "A redirect to another host is reported instead of followed; fetch the new URL then."
    )
    profile = ToolProfile(risk="inspect", argument_key="url", argument_kind="url")
    Arguments = WebFetchArguments

    def __init__(
        self,
        *,
        time_limit_s: float = FETCH_TIME_LIMIT_S,
        max_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        self.time_limit_s = time_limit_s
        self.max_bytes = max_bytes

    async def run(self, arguments: WebFetchArguments, ctx: ToolContext) -> ToolResult:
        try:
            target = httpx.URL(arguments.url.strip())
        except httpx.InvalidURL as exc:
            return ToolResult(ok=False, content=f"invalid URL: {exc}")
        shown = _display(target)
        if target.scheme not in ("http", "https"):
            return ToolResult(
                ok=False,
                content=f"only http and https URLs can be fetched, not {shown!r}",
                metadata={"url": shown},
            )
        if not target.host:
            return ToolResult(ok=False, content=f"URL has no host: {shown!r}")
        try:
            with trio.fail_after(self.time_limit_s):
                return await self._fetch(target)
        except _Refused as exc:
            return ToolResult(ok=False, content=str(exc), metadata={"url": shown, **exc.metadata})
        except trio.TooSlowError:
            return ToolResult(
                ok=False,
                content=f"timed out after {self.time_limit_s:g} s fetching {shown}",
                metadata={"url": shown},
            )
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            if target.password:
                reason = reason.replace(target.password, "***")
            return ToolResult(
                ok=False, content=f"could not fetch {shown}: {reason}", metadata={"url": shown}
            )

    async def _fetch(self, target: httpx.URL) -> ToolResult:
        headers = {
            "User-Agent": USER_AGENT,
            "Accept": "text/html, text/*;q=0.9, application/json;q=0.8, */*;q=0.1",
        }
        timeout = httpx.Timeout(self.time_limit_s)
        async with httpx.AsyncClient(headers=headers, timeout=timeout) as client:
            current = target
            for _ in range(MAX_REDIRECTS + 1):
                async with client.stream("GET", current) as response:
                    if not response.has_redirect_location:
                        return await self._read(response, current)
                    following = current.join(response.headers["location"])
                if following.scheme not in ("http", "https"):
                    raise _Refused(f"{_display(current)} redirects to a non-http URL")
                if following.host != target.host:
                    raise _Refused(
                        f"{_display(current)} redirects to another host: {_display(following)}. "
                        "To follow it, fetch that URL.",
                        redirect_url=_display(following),
                    )
                current = following
        raise _Refused(f"{_display(target)} redirected more than {MAX_REDIRECTS} times")

    async def _read(self, response: httpx.Response, url: httpx.URL) -> ToolResult:
        shown = _display(url)
        if not response.is_success:
            raise _Refused(
                f"HTTP {response.status_code} {response.reason_phrase} from {shown}",
                status=response.status_code,
            )
        mime = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if mime and not _is_textual(mime):
            raise _Refused(
                f"{shown} is not text (content type {mime}); only text, HTML, JSON and XML "
                "can be fetched",
                status=response.status_code,
                content_type=mime,
            )
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            raise _Refused(f"{shown} is {declared} bytes, over the {self.max_bytes}-byte limit")
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > self.max_bytes:
                raise _Refused(f"{shown} is larger than the {self.max_bytes}-byte limit")
        if not mime and b"\0" in body[:_SNIFF_BYTES]:
            raise _Refused(f"{shown} does not look like text (no content type, binary data)")

        html = mime in _HTML_TYPES
        text = bytes(body).decode(_charset(response, body, html=html), errors="replace")
        if html:
            text = html_to_text(text, base_url=str(url))
        truncated = len(text) > MAX_CONTENT_CHARS
        if truncated:
            text = text[:MAX_CONTENT_CHARS] + (
                f"\n[content truncated at {MAX_CONTENT_CHARS} characters]"
            )
        return ToolResult(
            ok=True,
            content=f"URL: {shown}\nContent-Type: {mime or 'unknown'}\n\n{text}",
            metadata={
                "url": shown,
                "status": response.status_code,
                "content_type": mime,
                "bytes": len(body),
                "truncated": truncated,
            },
        )


def _is_textual(mime: str) -> bool:
    return (
        mime.startswith("text/")
        or mime in _TEXT_APPLICATION_TYPES
        or mime.endswith(("+json", "+xml"))
    )


def _charset(response: httpx.Response, body: bytearray, *, html: bool) -> str:
    """The declared charset if Python knows it, else UTF-8."""
    candidates = [response.charset_encoding]
    if html:
        found = _META_CHARSET.search(bytes(body[:2048]))
        candidates.append(found.group(1).decode("ascii") if found else None)
    for name in candidates:
        if name:
            try:
                return codecs.lookup(name).name
            except LookupError:
                continue
    return "utf-8"


def _display(url: httpx.URL) -> str:
    """The URL as results show it: without any user name or password."""
    return str(url.copy_with(userinfo=b"")) if url.userinfo else str(url)
