"""Whether a configured server URL is one robotad can send requests to.

`http_url_problem` is the one check of a model server's ``base_url`` (``[providers.NAME]``)
and an MCP server's ``url`` (``[mcp_servers.NAME]``, ``session/create {mcpServers}``), made
where the value enters, so that a URL the HTTP client would refuse, or read otherwise than
its writer meant, is a located start-up error (or -32602) rather than an internal error when a
session's provider is first built, or a failure naming another port when it is first used.

It takes what the HTTP client (`httpx2`, under both SDKs) takes, and refuses besides what it
would accept but not as written: a space or control character (a trailing space pasted with
the URL is sent as ``%20``), a port outside 1–65535 or not in ASCII digits, no host. Its
messages name what is wrong, never the URL itself (it may hold credentials).
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import urlsplit

import httpx2

__all__ = ["NOT_HTTP", "http_url_problem"]

#: The message of a URL that does not start with ``http://`` or ``https://``.
NOT_HTTP: Final = "expected an http:// or https:// URL"

_SCHEME: Final = re.compile(r"https?://", re.IGNORECASE)
_SPACE_OR_CONTROL: Final = re.compile(r"[\s\x00-\x1f\x7f]")
_PORT_DIGITS: Final = re.compile(r"[0-9]+\Z")


def http_url_problem(url: str) -> str | None:
    """Why `url` cannot be a server's http(s) URL, in a few words, or None when it can."""
    if not _SCHEME.match(url):
        return NOT_HTTP
    if _SPACE_OR_CONTROL.search(url):
        return (
            "holds a space or a control character, which a URL cannot (a stray space pasted "
            "with it?); write a space inside a path as %20"
        )
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:  # urllib refuses an unclosed or malformed "[…]" host
        return _BAD_HOST
    if not host:
        return "names no host: expected http://HOST[:PORT]/PATH"
    port = parts.netloc.rpartition("@")[2].rpartition("]")[2].partition(":")[2]
    if parts.netloc.endswith(":"):
        return "has a ':' after its host but no port: give the port, or drop the ':'"
    if port and not _valid_port(port):
        return "has a port that is not a number from 1 to 65535"
    try:
        httpx2.URL(url)
    except httpx2.InvalidURL as exc:
        # httpx's message quotes the part it refused after a colon: keep only its words.
        words = str(exc).partition(":")[0]
        return f"is not a URL the HTTP client takes ({words[:1].lower()}{words[1:]})"
    return None


_BAD_HOST: Final = (
    "names no valid host: a name, an IPv4 address, or an IPv6 address in brackets "
    "(http://[::1]:8080/v1)"
)


def _valid_port(port: str) -> bool:
    return bool(_PORT_DIGITS.match(port)) and 1 <= int(port) <= 65535
