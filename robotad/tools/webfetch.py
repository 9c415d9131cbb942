"""WebFetch: GET an http(s) URL and return its text; HTML comes back as readable text.

Limits, each a failed result saying which: the whole fetch (connect, redirects, body, and the
HTML made text) within `FETCH_TIME_LIMIT_S`; a body of at most `MAX_RESPONSE_BYTES` after
content decoding (read as a stream, gzip and deflate unpacked no further than the limit, and
abandoned past it, so a huge, endless or compressed-bomb body costs no more; another content
encoding is refused); at most `MAX_REDIRECTS` redirects. A body is returned whole or not at
all: one whose connection ended early fails (httpx tells when a ``Content-Length`` or a chunk
was not met; `content_coding` when a compressed stream had not reached its end), and so does
a compressed body that is not the data its coding says. Also refused: a port outside
1-65535 (httpx takes any number, and the system resolver keeps its low 16 bits: port 65616
reached port 80), a scheme other than http/https, a non-2xx status, and content that is not
text (``text/*``, JSON, XML, JavaScript and a few other textual types are accepted; a
response without a type is accepted if it does not look binary).

Every connection passes the address guard (`address_guard`, PROTOCOL.md §10.7): the host is
resolved once, refused when any of its addresses is not public (loopback, private, link-local,
CGNAT, unspecified, multicast, reserved) unless the session's `ToolContext.policy` exempts it,
and the request then goes to the checked address itself (the ``Host`` header and TLS server
name stay the host's), so no second resolution can send it elsewhere. Proxy settings from the
environment are ignored: a proxy would connect where the guard did not look.

Redirects are followed only while they stay on the requested host (scheme and port may
change); each hop is resolved and checked again. A redirect to an address the guard refuses
fails naming its class; one to another host is reported, with its target, as a failed result:
the permission gate judged the URL the call named, so the model must ask for the new one in a
call of its own, which the gate then judges. Credentials in a URL never appear in a result.

The gate reads a URL's host with the standard library (`protocol.pattern_text.url_host`), the
request with httpx, and they differ on a few spellings: ``internal。example`` (an ideographic
full stop) is one host to the first and ``internal.example`` to the second, so a deny rule
``WebFetch(domain:internal.example)`` would not have caught it. A URL whose host the two read
differently is refused, naming the spelling to use (for an internationalised host, its
``xn--`` form: rules take only that).

HTML (``text/html``, XHTML) is converted with `html_to_text`; other text is returned as sent,
decoded by the declared charset (an HTML ``<meta charset>`` counts), else UTF-8, with
undecodable bytes replaced. The text is cut at `MAX_CONTENT_CHARS` with a note.
"""

from __future__ import annotations

import codecs
import contextlib
import re
import ssl
from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import Annotated

import httpx
import trio
from msgspec import Meta, Struct

from protocol.pattern_text import url_host
from robotad.agent.tool import ToolContext, ToolProfile, ToolResult, TypedTool
from robotad.tools.address_guard import (
    AddressRefused,
    IPAddress,
    Resolver,
    checked_addresses,
    classify_address,
    literal_address,
    system_resolver,
)
from robotad.tools.content_coding import UNPACKED, BodyUnreadable, Unpacker
from robotad.tools.html_text import html_to_text
from robotad.tools.stoppable import run_stoppable

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
    """The built-in WebFetch tool (risk ``network``; permission argument ``url``). `resolve`
    is the name resolver the address guard uses (the system's by default); `verify` is how
    TLS certificates are checked (httpx's ``verify``: the system's trust store by default)."""

    name = "WebFetch"
    description = (
        "Fetch an http(s) URL and return its content as text; HTML is converted to readable "
        "text with links kept. Only text, HTML, JSON and XML are accepted, up to "
        f"{MAX_RESPONSE_BYTES // (1024 * 1024)} MiB, within {FETCH_TIME_LIMIT_S:g} s. "
        "A redirect to another host is reported instead of followed; fetch the new URL then."
    )
    profile = ToolProfile(risk="network", argument_key="url", argument_kind="url")
    Arguments = WebFetchArguments

    def __init__(
        self,
        *,
        time_limit_s: float = FETCH_TIME_LIMIT_S,
        max_bytes: int = MAX_RESPONSE_BYTES,
        resolve: Resolver = system_resolver,
        verify: ssl.SSLContext | bool = True,
    ) -> None:
        self.time_limit_s = time_limit_s
        self.max_bytes = max_bytes
        self.resolve = resolve
        self.verify = verify

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
        judged, sent = url_host(arguments.url), _host_key(target)
        if judged != sent:
            return ToolResult(
                ok=False,
                content=f"the host of {shown!r} reads as {judged!r} to permission rules but "
                f"as {sent!r} to the request; write the URL with the host {sent}",
                metadata={"url": shown},
            )
        try:
            with trio.fail_after(self.time_limit_s):
                return await self._fetch(target, self._exempt(ctx))
        except AddressRefused as exc:
            return ToolResult(
                ok=False,
                content=str(exc),
                metadata={"url": shown, "address_class": exc.address_class},
            )
        except _Refused as exc:
            return ToolResult(ok=False, content=str(exc), metadata={"url": shown, **exc.metadata})
        except trio.TooSlowError:
            return ToolResult(
                ok=False,
                content=f"timed out after {self.time_limit_s:g} s fetching {shown}",
                metadata={"url": shown},
            )
        except (httpx.HTTPError, httpx.InvalidURL, OSError) as exc:
            reason = _reason(exc)
            if target.password:
                reason = reason.replace(target.password, "***")
            return ToolResult(
                ok=False, content=f"could not fetch {shown}: {reason}", metadata={"url": shown}
            )

    def _exempt(self, ctx: ToolContext) -> Callable[[str], bool]:
        policy = ctx.policy
        if policy is None:
            return lambda host: False
        return lambda host: policy.exempts(self.name, host)

    async def _fetch(self, target: httpx.URL, exempt: Callable[[str], bool]) -> ToolResult:
        headers = {
            "User-Agent": USER_AGENT,
            "Accept": "text/html, text/*;q=0.9, application/json;q=0.8, */*;q=0.1",
            "Accept-Encoding": "gzip, deflate",
        }
        timeout = httpx.Timeout(self.time_limit_s)
        async with httpx.AsyncClient(
            headers=headers, timeout=timeout, trust_env=False, verify=self.verify
        ) as client:
            current = target
            for _ in range(MAX_REDIRECTS + 1):
                async with self._open(client, current, exempt) as response:
                    if not response.has_redirect_location:
                        return await self._read(response, current)
                    following = current.join(response.headers["location"])
                if following.scheme not in ("http", "https"):
                    raise _Refused(f"{_display(current)} redirects to a non-http URL")
                _refuse_literal(following, exempt)
                if following.host != target.host:
                    raise _Refused(
                        f"{_display(current)} redirects to another host: {_display(following)}. "
                        "To follow it, fetch that URL.",
                        redirect_url=_display(following),
                    )
                current = following
        raise _Refused(f"{_display(target)} redirected more than {MAX_REDIRECTS} times")

    @contextlib.asynccontextmanager
    async def _open(
        self, client: httpx.AsyncClient, url: httpx.URL, exempt: Callable[[str], bool]
    ) -> AsyncIterator[httpx.Response]:
        """GET `url` through the address guard: resolve its host once, check every address,
        connect to the first checked address that answers (never to the name again)."""
        if url.port is not None and not 0 < url.port < 1 << 16:
            # The resolver would keep only the low 16 bits of the number.
            raise _Refused(f"{_display(url)} names port {url.port}, outside 1-65535")
        port = url.port or (443 if url.scheme == "https" else 80)
        lifted = exempt(_host_key(url))
        host = _ascii_host(url)
        addresses = await checked_addresses(host, port, exempt=lifted, resolve=self.resolve)
        failure: httpx.ConnectError | None = None
        for address in addresses:
            request = _pinned_request(client, url, address)
            try:
                response = await client.send(request, stream=True)
            except httpx.ConnectError as exc:
                failure = exc
                continue
            try:
                yield response
            finally:
                await response.aclose()
            return
        assert failure is not None
        raise failure

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
        body = await self._body(response, shown)
        if not mime and b"\0" in body[:_SNIFF_BYTES]:
            raise _Refused(f"{shown} does not look like text (no content type, binary data)")

        html = mime in _HTML_TYPES
        text = bytes(body).decode(_charset(response, body, html=html), errors="replace")
        if html:
            # Seconds for a page of megabytes, minutes for some malformed ones: in a worker
            # thread, not the daemon's loop, and stopped when the call is cancelled.
            convert = partial(
                html_to_text, text, base_url=str(url), check=trio.from_thread.check_cancelled
            )
            text = await run_stoppable(convert)
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

    async def _body(self, response: httpx.Response, shown: str) -> bytearray:
        """The body, unpacked by `content_coding` rather than httpx (which unpacks each
        arriving chunk whole), and refused unless whole: a compressed body that stops
        before its stream's end was cut short, however HTTP delimited it."""
        encoding = response.headers.get("content-encoding", "").strip().lower()
        if encoding not in ("", "identity", *UNPACKED):
            raise _Refused(f"{shown} came compressed as {encoding!r}, which WebFetch cannot read")
        unpacker = Unpacker(encoding) if encoding in UNPACKED else None
        body = bytearray()
        try:
            async for chunk in response.aiter_raw():
                room = self.max_bytes + 1 - len(body)  # unpacks no more than can be kept
                body += chunk if unpacker is None else unpacker.unpack(chunk, room)
                if len(body) > self.max_bytes:
                    raise _Refused(f"{shown} is larger than the {self.max_bytes}-byte limit")
            if unpacker is not None:
                unpacker.end()
        except BodyUnreadable as exc:
            raise _Refused(f"could not fetch {shown}: {exc}", status=response.status_code) from None
        return body


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


def _reason(exc: BaseException) -> str:
    """The exception's type and the first message along its chain of causes (a TLS failure
    arrives as a message-less ConnectError caused by the `ssl.SSLError` that says why)."""
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None or str(seen):
            break
        seen = seen.__cause__ or seen.__context__
    message = str(seen) if seen is not None else ""
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _ascii_host(url: httpx.URL) -> str:
    """The host in the ASCII form the request sends (IDNA, ``xn--…``), as rules must spell
    it (`patterns` takes ASCII labels only). `httpx.URL.host` is the Unicode form: a rule
    naming ``xn--fa-hia.test`` never matched it, and a refusal proposed the rule
    ``WebFetch(domain:faß.test)``, which cannot be written."""
    return url.raw_host.decode("ascii")


def _host_key(url: httpx.URL) -> str:
    """The host as permission rules spell it: lowercased, no trailing dot, IPv6 bracketed."""
    host = _ascii_host(url).lower().rstrip(".")
    return f"[{host}]" if ":" in host else host


def _refuse_literal(url: httpx.URL, exempt: Callable[[str], bool]) -> None:
    """Refuse a redirect whose host spells a refused address, before anything else is said
    about it (the next hop's own check catches names)."""
    address = literal_address(url.host)
    if address is not None and not exempt(_host_key(url)):
        address_class = classify_address(address)
        if address_class != "public":
            raise AddressRefused(url.host, address, address_class)


def _pinned_request(client: httpx.AsyncClient, url: httpx.URL, address: IPAddress) -> httpx.Request:
    """A GET of `url` sent to `address`: the ``Host`` header and the TLS server name stay
    those of the URL's host."""
    pinned = url.copy_with(host=str(address))
    extensions: dict[str, str] = {}
    if url.scheme == "https" and literal_address(url.host) is None:
        extensions["sni_hostname"] = url.host
    request = client.build_request(
        "GET", pinned, headers={"Host": url.netloc.decode("ascii")}, extensions=extensions
    )
    return request


def _display(url: httpx.URL) -> str:
    """The URL as results show it: without any user name or password."""
    return str(url.copy_with(userinfo=b"")) if url.userinfo else str(url)
