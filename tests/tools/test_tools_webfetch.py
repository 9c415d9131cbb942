"""WebFetch against a loopback HTTP server started by each test (127.0.0.1 only).

The address guard refuses loopback unless an allow rule names the host, so these fetches run
with 127.0.0.1 exempted, as ``WebFetch(domain:127.0.0.1)`` would (tests/tools/
test_tools_address_guard.py covers the guard itself)."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib
from functools import partial
from pathlib import Path

import pytest
import trio

from robotad.tools import ToolContext, ToolResult, WebFetchTool
from tests.tools.loopback_http import LoopbackHTTP, respond, serve_loopback

PROXY_VARIABLES = (
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
)


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
async def server(nursery: trio.Nursery) -> LoopbackHTTP:
    return await serve_loopback(nursery)


class Exempt:
    """Host exemptions as allow rules naming exactly `hosts` would grant."""

    def __init__(self, *hosts: str) -> None:
        self.hosts = set(hosts)

    def exempts(self, tool_name: str, host: str) -> bool:
        return tool_name == "WebFetch" and host in self.hosts

    def withholds(self, tool_name: str, path: str, root: str) -> bool:
        return False


async def fetch(
    url: str, tool: WebFetchTool | None = None, exempt: Exempt | None = None
) -> ToolResult:
    tool = tool or WebFetchTool()
    ctx = ToolContext(Path("/"), "test-session", exempt or Exempt("127.0.0.1"))
    with trio.fail_after(10):
        return await tool.run(tool.decode_arguments({"url": url}), ctx)


async def test_html_comes_back_as_readable_text(server: LoopbackHTTP) -> None:
    page = (
        b"<html><head><title>Hello</title><script>secret()</script></head>"
        b"<body><h2>Section</h2><p>Read <a href='/more'>more</a>.</p></body></html>"
    )
    server.routes["/page"] = partial(
        respond, status="200 OK", body=page, content_type="text/html; charset=utf-8"
    )
    result = await fetch(server.url("/page"))
    assert result.ok
    assert result.content == (
        f"URL: {server.url('/page')}\nContent-Type: text/html\n\n"
        f"Hello\n\n## Section\n\nRead [more]({server.url('/more')})."
    )
    assert result.metadata == {
        "url": server.url("/page"),
        "status": 200,
        "content_type": "text/html",
        "bytes": len(page),
        "truncated": False,
    }


async def test_json_comes_back_as_sent(server: LoopbackHTTP) -> None:
    server.routes["/data"] = partial(
        respond, status="200 OK", body=b'{"a": [1, 2]}', content_type="application/json"
    )
    result = await fetch(server.url("/data"))
    assert result.ok
    assert result.content.endswith('\n\n{"a": [1, 2]}')


async def test_declared_charset_is_honoured(server: LoopbackHTTP) -> None:
    server.routes["/latin"] = partial(
        respond,
        status="200 OK",
        body="café".encode("latin-1"),
        content_type="text/plain; charset=iso-8859-1",
    )
    server.routes["/meta"] = partial(
        respond,
        status="200 OK",
        body='<meta charset="windows-1252"><p>naïve</p>'.encode("cp1252"),
        content_type="text/html",
    )
    assert (await fetch(server.url("/latin"))).content.endswith("\n\ncafé")
    assert (await fetch(server.url("/meta"))).content.endswith("\n\nnaïve")


async def test_not_found_is_a_failed_result(server: LoopbackHTTP) -> None:
    result = await fetch(server.url("/missing"))
    assert not result.ok
    assert result.content == f"HTTP 404 Not Found from {server.url('/missing')}"
    assert result.metadata["status"] == 404


async def test_non_text_content_is_refused(server: LoopbackHTTP) -> None:
    server.routes["/image"] = partial(
        respond, status="200 OK", body=b"\x89PNG\r\n", content_type="image/png"
    )
    result = await fetch(server.url("/image"))
    assert not result.ok
    assert "is not text (content type image/png)" in result.content


async def test_untyped_content_is_accepted_only_when_it_looks_like_text(
    server: LoopbackHTTP,
) -> None:
    server.routes["/plain"] = partial(respond, status="200 OK", body=b"hi", content_type=None)
    server.routes["/blob"] = partial(respond, status="200 OK", body=b"\0\1\2", content_type=None)
    assert (await fetch(server.url("/plain"))).content.endswith("\n\nhi")
    blob = await fetch(server.url("/blob"))
    assert not blob.ok
    assert "does not look like text" in blob.content


async def test_endless_body_is_cut_off_at_the_size_limit(server: LoopbackHTTP) -> None:
    async def endless(stream: trio.SocketStream) -> None:
        await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n")
        while True:
            await stream.send_all(b"x" * 65536)

    server.routes["/endless"] = endless
    result = await fetch(server.url("/endless"), WebFetchTool(max_bytes=200_000))
    assert not result.ok
    assert result.content == f"{server.url('/endless')} is larger than the 200000-byte limit"


async def test_a_compressed_body_is_unpacked_no_further_than_the_limit(
    server: LoopbackHTTP,
) -> None:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip
    bomb = packer.compress(b" " * (64 << 20)) + packer.flush()  # 64 MiB in about 64 KB
    server.routes["/bomb"] = partial(
        respond, status="200 OK", body=bomb, headers={"Content-Encoding": "gzip"}
    )
    tracemalloc.start()
    try:
        result = await fetch(server.url("/bomb"), WebFetchTool(max_bytes=200_000))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.content == f"{server.url('/bomb')} is larger than the 200000-byte limit"
    assert peak < 8 << 20  # httpx unpacked a whole arriving chunk: 64 MiB at once


async def test_gzip_is_read_and_an_encoding_it_cannot_unpack_is_refused(
    server: LoopbackHTTP,
) -> None:
    server.routes["/gz"] = partial(
        respond, status="200 OK", body=gzip.compress(b"hello"), headers={"Content-Encoding": "gzip"}
    )
    server.routes["/br"] = partial(
        respond, status="200 OK", body=b"\x8b\x02\x80hello\x03", headers={"Content-Encoding": "br"}
    )
    result = await fetch(server.url("/gz"))
    assert result.ok
    assert result.content.endswith("\n\nhello")
    result = await fetch(server.url("/br"))
    assert not result.ok
    assert (
        result.content == f"{server.url('/br')} came compressed as 'br', which WebFetch cannot read"
    )


#: A text whose gzip form is a few KB: cut in half, its first half still unpacks.
LINES = b"".join(b"line %d of the page\n" % number for number in range(2000))


async def gzip_without_length(body: bytes, stream: trio.SocketStream) -> None:
    """A gzip answer whose end is the connection's (no Content-Length): HTTP cannot tell a
    body cut short from a whole one."""
    head = (
        "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: text/plain\r\n"
        "Content-Encoding: gzip\r\n\r\n"
    )
    await stream.send_all(head.encode() + body)


async def test_a_gzip_body_cut_short_is_a_failed_fetch_not_partial_text(
    server: LoopbackHTTP,
) -> None:
    """A gzip body whose connection ended before its stream did came back as the text of
    its first half, ok. The fetch now fails, saying the answer was cut short, whether HTTP
    saw it (a Content-Length announcing more) or could not (no Content-Length, or one that
    counted only what was sent); a whole body, either way, is still read."""
    whole = gzip.compress(LINES)
    cut = whole[: len(whole) // 2]
    server.routes["/no-length"] = partial(gzip_without_length, cut)
    server.routes["/sent-length"] = partial(
        respond, status="200 OK", body=cut, headers={"Content-Encoding": "gzip"}
    )
    server.routes["/whole-length"] = partial(
        respond, status="200 OK", body=cut, headers={"Content-Encoding": "gzip"}, length=len(whole)
    )
    server.routes["/whole"] = partial(gzip_without_length, whole)
    for path in ("/no-length", "/sent-length"):
        result = await fetch(server.url(path))
        assert not result.ok, path
        assert result.content == (
            f"could not fetch {server.url(path)}: the body ended before its gzip stream did "
            f"({len(cut)} compressed bytes received): the answer was cut short, by the server "
            "or on the way; fetching it again may work"
        )
        assert result.metadata == {"url": server.url(path), "status": 200}
    result = await fetch(server.url("/whole-length"))
    assert not result.ok
    assert result.content.startswith(f"could not fetch {server.url('/whole-length')}: ")
    assert f"received {len(cut)} bytes, expected {len(whole)}" in result.content
    result = await fetch(server.url("/whole"))
    assert result.ok
    assert result.content.endswith("\n\n" + LINES.decode())
    assert result.metadata["bytes"] == len(LINES)


async def test_every_member_of_a_gzip_body_is_read_and_a_broken_one_is_refused(
    server: LoopbackHTTP,
) -> None:
    """A gzip body of two members (``cat a.gz b.gz``) came back as the first one's text,
    ok; bytes that are not gzip at all stopped the call with a bare zlib ``error``. The
    first is read whole, the second fails naming what is wrong; raw deflate, which some
    servers send as ``deflate``, is read."""
    two = gzip.compress(b"first, ") + gzip.compress(b"second")
    raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    server.routes["/two"] = partial(gzip_without_length, two)
    server.routes["/broken"] = partial(gzip_without_length, b"this is not gzip")
    server.routes["/raw"] = partial(
        respond,
        status="200 OK",
        body=raw.compress(b"raw deflate") + raw.flush(),
        headers={"Content-Encoding": "deflate"},
    )
    result = await fetch(server.url("/two"))
    assert result.ok
    assert result.content.endswith("\n\nfirst, second")
    result = await fetch(server.url("/broken"))
    assert not result.ok
    assert result.content == (
        f"could not fetch {server.url('/broken')}: its body, sent as gzip, is not gzip data: "
        "the server's answer is broken (fetching it again is unlikely to help)"
    )
    result = await fetch(server.url("/raw"))
    assert result.ok
    assert result.content.endswith("\n\nraw deflate")


async def test_declared_oversize_is_refused_before_reading(server: LoopbackHTTP) -> None:
    async def announces_too_much(stream: trio.SocketStream) -> None:
        await respond(stream, "200 OK", b"start", length=10_000_000)
        await trio.sleep_forever()

    server.routes["/huge"] = announces_too_much
    result = await fetch(server.url("/huge"), WebFetchTool(max_bytes=1000))
    assert not result.ok
    assert "10000000 bytes, over the 1000-byte limit" in result.content


async def test_a_server_that_never_answers_times_out(server: LoopbackHTTP) -> None:
    async def silent(stream: trio.SocketStream) -> None:
        await trio.sleep_forever()

    server.routes["/silent"] = silent
    result = await fetch(server.url("/silent"), WebFetchTool(time_limit_s=0.3))
    assert not result.ok
    assert result.content == f"timed out after 0.3 s fetching {server.url('/silent')}"


#: A page Python's HTML parser takes minutes over: each ``<a b='`` is a step that scans the rest.
SLOW_PAGE = b"<a b='" * 20_000


async def test_a_page_slow_to_convert_times_out_at_the_fetch_limit(server: LoopbackHTTP) -> None:
    """The fetch's limit held for the download only: converting a malformed page to text ran
    in a worker thread nothing stopped, minutes past it. It now stops at the limit too."""
    server.routes["/slow"] = partial(
        respond, status="200 OK", body=SLOW_PAGE, content_type="text/html"
    )
    result = await fetch(server.url("/slow"), WebFetchTool(time_limit_s=0.5))
    assert not result.ok
    assert result.content == f"timed out after 0.5 s fetching {server.url('/slow')}"


async def test_same_host_redirects_are_followed(server: LoopbackHTTP) -> None:
    server.routes["/old"] = partial(
        respond, status="301 Moved Permanently", headers={"Location": "/new"}
    )
    server.routes["/new"] = partial(respond, status="200 OK", body=b"moved here")
    result = await fetch(server.url("/old"))
    assert result.ok
    assert result.content.startswith(f"URL: {server.url('/new')}\n")
    assert result.content.endswith("moved here")
    assert server.requests == ["/old", "/new"]


async def test_redirect_to_another_host_is_reported_not_followed(server: LoopbackHTTP) -> None:
    elsewhere = server.url("/new", host="localhost")
    server.routes["/away"] = partial(respond, status="302 Found", headers={"Location": elsewhere})
    result = await fetch(server.url("/away"))
    assert not result.ok
    assert f"redirects to another host: {elsewhere}" in result.content
    assert result.metadata["redirect_url"] == elsewhere
    assert server.requests == ["/away"]


async def test_a_port_out_of_range_is_refused_not_wrapped(server: LoopbackHTTP) -> None:
    """Port 65536 + N would reach port N (the resolver keeps the low 16 bits), in the URL
    the call names or in a same-host redirect."""
    wrapped = server.port + (1 << 16)
    server.routes["/"] = partial(respond, status="200 OK", body=b"wrapped around")
    server.routes["/go"] = partial(
        respond, status="302 Found", headers={"Location": f"http://127.0.0.1:{wrapped}/"}
    )
    direct = await fetch(f"http://127.0.0.1:{wrapped}/")
    assert not direct.ok
    assert f"names port {wrapped}, outside 1-65535" in direct.content
    assert server.connections == 0
    redirected = await fetch(server.url("/go"))
    assert not redirected.ok
    assert f"names port {wrapped}, outside 1-65535" in redirected.content
    assert server.requests == ["/go"]


async def test_redirect_loops_are_bounded(server: LoopbackHTTP) -> None:
    server.routes["/loop"] = partial(respond, status="302 Found", headers={"Location": "/loop"})
    result = await fetch(server.url("/loop"))
    assert not result.ok
    assert "redirected more than 5 times" in result.content
    assert len(server.requests) == 6


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("file:///etc/passwd", "only http and https URLs"),
        ("ftp://example.com/file", "only http and https URLs"),
        ("example.com/page", "only http and https URLs"),
        ("http:///nohost", "no host"),
    ],
)
async def test_only_http_urls_with_a_host_are_fetched(url: str, message: str) -> None:
    result = await fetch(url)
    assert not result.ok
    assert message in result.content


async def test_credentials_never_appear_in_a_result(server: LoopbackHTTP) -> None:
    url = server.url("/missing").replace("http://", "http://user:hunter2@")
    result = await fetch(url)
    assert not result.ok
    assert "hunter2" not in result.content
    assert "hunter2" not in repr(result.metadata)
    assert result.metadata["url"] == server.url("/missing")


async def test_connection_failure_is_a_failed_result() -> None:
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = listener.socket.getsockname()[1]
    await listener.aclose()
    result = await fetch(f"http://127.0.0.1:{port}/")
    assert not result.ok
    assert result.content.startswith(f"could not fetch http://127.0.0.1:{port}/: ConnectError")
