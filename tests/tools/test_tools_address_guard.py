"""The address guard under WebFetch (PROTOCOL.md §10.7).

The classes are tested as pure functions over many addresses: no test here sends anything to
a private, link-local or public address, even one the guard must refuse. The connect path is
tested only through names that resolve to loopback (``localhost``, an injected resolver
answering 127.0.0.2) with listeners the test opens.
"""

from __future__ import annotations

import ipaddress
import shutil
import socket
import ssl
import subprocess
from functools import partial
from pathlib import Path

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st

from protocol.pattern_text import url_host
from robotad.agent.tool import ToolPolicy
from robotad.session.permissions.patterns import parse_rule
from robotad.tools import ToolContext, ToolResult, WebFetchTool
from robotad.tools.address_guard import (
    AddressRefused,
    IPAddress,
    checked_addresses,
    classify_address,
    literal_address,
)
from tests.tools.loopback_http import LoopbackHTTP, respond, serve_loopback
from tests.tools.test_tools_webfetch import Exempt

V4 = ipaddress.IPv4Address
V6 = ipaddress.IPv6Address


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.255.254", "loopback"),
        ("::1", "loopback"),
        ("10.0.0.1", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("fc00::1", "private"),
        ("fd12:3456::1", "private"),
        ("fec0::1", "private"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("fe80::1%2", "link-local"),
        ("100.64.0.1", "cgnat"),
        ("100.127.255.255", "cgnat"),
        ("0.0.0.0", "unspecified"),
        ("0.1.2.3", "unspecified"),
        ("::", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"),
        ("ff02::1", "multicast"),
        ("255.255.255.255", "reserved"),
        ("240.0.0.1", "reserved"),
        ("192.0.2.1", "reserved"),
        ("2001:db8::1", "reserved"),
        ("::127.0.0.1", "reserved"),
        # IPv6 spellings of IPv4 addresses are the class of the address they embed.
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:7f00:1", "loopback"),
        ("::ffff:169.254.169.254", "link-local"),
        ("::ffff:10.1.2.3", "private"),
        ("64:ff9b::a9fe:a9fe", "link-local"),
        ("2002:7f00:1::1", "loopback"),
        ("2002:0a00:0001::1", "private"),
        # Public.
        ("1.1.1.1", "public"),
        ("8.8.8.8", "public"),
        ("172.32.0.1", "public"),
        ("100.128.0.1", "public"),
        ("2606:4700:4700::1111", "public"),
        ("::ffff:1.1.1.1", "public"),
    ],
)
def test_address_classes(address: str, expected: str) -> None:
    assert classify_address(ipaddress.ip_address(address)) == expected


NETWORKS = [
    ("127.0.0.0/8", "loopback"),
    ("10.0.0.0/8", "private"),
    ("172.16.0.0/12", "private"),
    ("192.168.0.0/16", "private"),
    ("169.254.0.0/16", "link-local"),
    ("100.64.0.0/10", "cgnat"),
    ("224.0.0.0/4", "multicast"),
]

ipv4 = st.integers(0, 2**32 - 1).map(V4)


@given(st.sampled_from(NETWORKS), st.integers(0, 2**32 - 1))
def test_every_address_of_a_network_has_its_class(network: tuple[str, str], offset: int) -> None:
    net = ipaddress.IPv4Network(network[0])
    address = net[offset % net.num_addresses]
    assert classify_address(address) == network[1]
    assert classify_address(V6(f"::ffff:{address}")) == network[1]


@given(ipv4)
def test_ipv6_spellings_of_an_ipv4_address_share_its_class(address: V4) -> None:
    cls = classify_address(address)
    assert classify_address(V6(f"::ffff:{address}")) == cls
    assert classify_address(V6((0x64FF9B << 96) | int(address))) == cls  # NAT64
    assert classify_address(V6((0x2002 << 112) | (int(address) << 80))) == cls  # 6to4


@given(st.one_of(ipv4, st.integers(0, 2**128 - 1).map(V6)))
def test_classes_agree_with_the_standard_library(address: IPAddress) -> None:
    cls = classify_address(address)
    if cls == "public":
        assert address.is_global
    if address.is_loopback:
        assert cls == "loopback"
    if address.is_multicast:
        assert cls in ("multicast", "reserved") or isinstance(address, V6)
    if isinstance(address, V4) and address.is_link_local:
        assert cls == "link-local"


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("0X7F000001", "127.0.0.1"),
        ("017700000001", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0x7f.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("127.0.1", "127.0.0.1"),
        ("127.0.0.1.", "127.0.0.1"),
        ("2852039166", "169.254.169.254"),
        ("0xa9fea9fe", "169.254.169.254"),
        ("0251.0376.0251.0376", "169.254.169.254"),
        ("10.1", "10.0.0.1"),
        ("0", "0.0.0.0"),
        ("[::1]", "::1"),
        ("::ffff:127.0.0.1", "::ffff:7f00:1"),
        ("[fe80::1%eth0]", "fe80::1%eth0"),
    ],
)
def test_literal_addresses_in_every_spelling(host: str, expected: str) -> None:
    assert literal_address(host) == ipaddress.ip_address(expected)


@pytest.mark.parametrize(
    "host",
    ["example.com", "localhost", "1.2.3.4.5", "08.1.1.1", "256.1.1.1", "1..1", "", "a::b::c"],
)
def test_names_and_malformed_numbers_are_no_literal(host: str) -> None:
    assert literal_address(host) is None


def _spell(value: int, base: str) -> str:
    return {"dec": str(value), "oct": f"0{value:o}", "hex": f"0x{value:x}"}[base]


@given(
    ipv4,
    st.integers(1, 4),
    st.lists(st.sampled_from(["dec", "oct", "hex"]), min_size=4, max_size=4),
)
def test_numeric_spellings_agree_with_inet_aton(address: V4, parts: int, bases: list[str]) -> None:
    raw = int(address)
    widths = {1: (32,), 2: (8, 24), 3: (8, 8, 16), 4: (8, 8, 8, 8)}[parts]
    values, shift = [], 32
    for width in widths:
        shift -= width
        values.append((raw >> shift) & ((1 << width) - 1))
    host = ".".join(_spell(value, base) for value, base in zip(values, bases, strict=False))
    assert literal_address(host) == address
    assert V4(socket.inet_aton(host)) == address  # the C library reads it the same way


async def test_a_name_resolving_to_a_private_address_is_refused_before_connecting() -> None:
    async def resolver(host: str, port: int) -> list[IPAddress]:
        return [V4("192.168.1.20")]

    with pytest.raises(AddressRefused, match=r"intranet.test \(192.168.1.20\): a private address"):
        await checked_addresses("intranet.test", 80, exempt=False, resolve=resolver)


async def test_any_refused_address_among_several_refuses_the_host() -> None:
    async def resolver(host: str, port: int) -> list[IPAddress]:
        return [V4("1.1.1.1"), V4("169.254.169.254")]

    with pytest.raises(AddressRefused) as caught:
        await checked_addresses("mixed.test", 80, exempt=False, resolve=resolver)
    assert caught.value.address_class == "link-local"
    assert await checked_addresses("mixed.test", 80, exempt=True, resolve=resolver) == [
        V4("1.1.1.1"),
        V4("169.254.169.254"),
    ]


@pytest.mark.parametrize(
    ("host", "address", "rule"),
    [
        ("::1", "::1", "WebFetch(domain:[::1])"),
        ("[::ffff:7f00:1]", "::ffff:7f00:1", "WebFetch(domain:[::ffff:7f00:1])"),
        ("localhost.", "127.0.0.1", "WebFetch(domain:localhost)"),
    ],
)
def test_a_refusal_proposes_a_rule_that_can_be_written(host: str, address: str, rule: str) -> None:
    """The rule a refusal proposes parses, and names the host as the exemption looks it up
    (an IPv6 host in brackets, no trailing dot)."""
    refused = AddressRefused(host, ipaddress.ip_address(address), "loopback")
    assert str(refused).endswith(f"e.g. {rule}")
    assert parse_rule(rule).host == rule.removeprefix("WebFetch(domain:").removesuffix(")")


# -- the connect path, through loopback only ---------------------------------------------------


async def fetch(url: str, exempt: ToolPolicy, tool: WebFetchTool | None = None) -> ToolResult:
    tool = tool or WebFetchTool()
    with trio.fail_after(10):
        return await tool.run(
            tool.decode_arguments({"url": url}), ToolContext(Path("/"), "test", exempt)
        )


@pytest.fixture
async def server(nursery: trio.Nursery) -> LoopbackHTTP:
    http = await serve_loopback(nursery)
    http.routes["/"] = partial(respond, status="200 OK", body=b"secret loopback service")
    return http


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "localhost", "2130706433", "0x7f000001", "127.1", "[::ffff:127.0.0.1]"]
)
async def test_loopback_is_refused_in_every_spelling_and_never_contacted(
    server: LoopbackHTTP, host: str
) -> None:
    result = await fetch(f"http://{host}:{server.port}/", Exempt())
    assert not result.ok
    assert "a loopback address" in result.content
    assert result.metadata["address_class"] == "loopback"
    assert server.connections == 0


async def test_a_dotted_octal_host_is_refused_as_an_invalid_url(server: LoopbackHTTP) -> None:
    result = await fetch(f"http://0177.0.0.1:{server.port}/", Exempt())
    assert not result.ok
    assert "invalid URL" in result.content
    assert server.connections == 0


async def test_an_allow_rule_naming_the_exact_host_lifts_the_guard(server: LoopbackHTTP) -> None:
    result = await fetch(f"http://localhost:{server.port}/", Exempt("localhost"))
    assert result.ok
    assert result.content.endswith("secret loopback service")
    # Naming one spelling lifts the guard for that spelling only.
    other = await fetch(f"http://127.0.0.1:{server.port}/", Exempt("localhost"))
    assert not other.ok
    assert server.connections == 1


async def test_the_checked_address_is_the_one_connected_to(nursery: trio.Nursery) -> None:
    """A resolver that would answer differently the second time (DNS rebinding) is asked
    once; the request goes to the address it answered, with the name as the Host."""
    target = await serve_loopback(nursery, "127.0.0.2")
    target.routes["/"] = partial(respond, status="200 OK", body=b"pinned")
    answers = [[V4("127.0.0.2")], [V4("127.0.0.3")]]
    asked: list[str] = []

    async def rebinding(host: str, port: int) -> list[IPAddress]:
        asked.append(host)
        return answers[len(asked) - 1]

    url = f"http://svc.test:{target.port}/"
    result = await fetch(url, Exempt("svc.test"), WebFetchTool(resolve=rebinding))
    assert result.ok, result.content
    assert result.content.endswith("pinned")
    assert asked == ["svc.test"]
    assert target.hosts == [f"svc.test:{target.port}"]


async def test_an_idna_host_is_judged_as_written(nursery: trio.Nursery) -> None:
    """An internationalised host is the ASCII name the request sends (``xn--fa-hia.test``,
    faß.test): the refusal proposes a rule in that spelling, and that rule lifts the guard."""
    target = await serve_loopback(nursery, "127.0.0.2")
    target.routes["/"] = partial(respond, status="200 OK", body=b"the domain named")
    asked: list[str] = []

    async def resolver(host: str, port: int) -> list[IPAddress]:
        asked.append(host)
        return [V4("127.0.0.2")]

    url = f"http://xn--fa-hia.test:{target.port}/"
    refused = await fetch(url, Exempt(), WebFetchTool(resolve=resolver))
    assert not refused.ok
    assert "e.g. WebFetch(domain:xn--fa-hia.test)" in refused.content
    assert target.connections == 0
    result = await fetch(url, Exempt("xn--fa-hia.test"), WebFetchTool(resolve=resolver))
    assert result.ok, result.content
    assert result.content.endswith("the domain named")
    assert asked == ["xn--fa-hia.test", "xn--fa-hia.test"]
    assert target.hosts == [f"xn--fa-hia.test:{target.port}"]


@pytest.mark.parametrize(
    ("written", "sent"),
    [
        ("svc\u3002test", "svc.test"),  # ideographic full stop
        ("svc\uff0etest", "svc.test"),  # fullwidth full stop
        ("svc\uff61test", "svc.test"),  # halfwidth ideographic full stop
        ("b\u00fccher.test", "xn--bcher-kva.test"),  # an internationalised name
    ],
)
async def test_a_host_the_rules_read_otherwise_is_refused_before_resolving(
    nursery: trio.Nursery, written: str, sent: str
) -> None:
    """Permission rules read ``svc。test`` as a host of its own and the request goes to
    ``svc.test``: a rule ``WebFetch(domain:svc.test)`` (deny or ask) never saw the call. Such
    a URL is refused, naming the spelling to use, before its host is looked up."""
    target = await serve_loopback(nursery, "127.0.0.2")
    asked: list[str] = []

    async def resolver(host: str, port: int) -> list[IPAddress]:
        asked.append(host)
        return [V4("127.0.0.2")]

    url = f"http://{written}:{target.port}/"
    assert url_host(url) == written  # what the rules judged
    result = await fetch(url, Exempt(sent), WebFetchTool(resolve=resolver))
    assert not result.ok
    assert f"write the URL with the host {sent}" in result.content
    assert asked == []
    assert target.connections == 0


async def test_a_name_resolving_to_loopback_is_refused_without_a_rule(
    nursery: trio.Nursery,
) -> None:
    target = await serve_loopback(nursery, "127.0.0.2")

    async def resolver(host: str, port: int) -> list[IPAddress]:
        return [V4("127.0.0.2")]

    url = f"http://svc.test:{target.port}/"
    result = await fetch(url, Exempt("test"), WebFetchTool(resolve=resolver))
    assert not result.ok
    assert "svc.test (127.0.0.2): a loopback address" in result.content
    assert target.connections == 0


async def test_a_redirect_to_a_refused_address_is_refused_at_the_redirect(
    server: LoopbackHTTP, nursery: trio.Nursery
) -> None:
    other = await serve_loopback(nursery, "127.0.0.2")
    elsewhere = f"http://127.0.0.2:{other.port}/"
    server.routes["/go"] = partial(respond, status="302 Found", headers={"Location": elsewhere})
    result = await fetch(f"http://localhost:{server.port}/go", Exempt("localhost"))
    assert not result.ok
    assert "refused to connect to 127.0.0.2: a loopback address" in result.content
    assert server.requests == ["/go"]
    assert other.connections == 0


async def test_a_same_host_redirect_is_checked_again(server: LoopbackHTTP) -> None:
    """Each hop resolves its host anew and is checked: a name that resolved to an exempt
    address first and to a refused one later is refused at the second hop."""
    server.routes["/a"] = partial(respond, status="302 Found", headers={"Location": "/b"})
    answers = [[V4("127.0.0.1")], [V4("10.0.0.1")]]
    asked: list[str] = []

    async def resolver(host: str, port: int) -> list[IPAddress]:
        asked.append(host)
        return answers[len(asked) - 1]

    tool = WebFetchTool(resolve=resolver)

    class FirstHopOnly:
        """Exempts the host only while no redirect has been followed."""

        def exempts(self, tool_name: str, host: str) -> bool:
            return len(asked) < 1

        def withholds(self, tool_name: str, path: str, root: str) -> bool:
            return False

    result = await fetch(f"http://svc.test:{server.port}/a", FirstHopOnly(), tool)
    assert not result.ok
    assert "svc.test (10.0.0.1): a private address" in result.content
    assert asked == ["svc.test", "svc.test"]
    assert server.requests == ["/a"]


# -- TLS to a checked address ------------------------------------------------------------------


def _certificate(directory: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for the DNS name `name`, made with the openssl CLI."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command is not installed (.ci/run installs it)")
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    command = [
        *(openssl, "req", "-x509", "-nodes", "-days", "1", "-subj", f"/CN={name}"),
        *("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"),
        *("-addext", f"subjectAltName=DNS:{name}", "-keyout", str(key), "-out", str(cert)),
    ]
    subprocess.run(command, check=True, capture_output=True, timeout=30)
    return cert, key


async def _tls_server(nursery: trio.Nursery, cert: Path, key: Path) -> LoopbackHTTP:
    http = LoopbackHTTP()
    http.routes["/"] = partial(respond, status="200 OK", body=b"over tls")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    serve = partial(trio.serve_ssl_over_tcp, http.handle, 0, context, host="127.0.0.2")
    listeners = await nursery.start(serve)
    http.port = listeners[0].transport_listener.socket.getsockname()[1]
    return http


@pytest.mark.parametrize(("certified", "ok"), [("svc.test", True), ("other.test", False)])
async def test_tls_to_the_checked_address_verifies_the_host_name(
    nursery: trio.Nursery, tmp_path: Path, certified: str, ok: bool
) -> None:
    """The request goes to the resolved address, yet TLS sends and verifies the URL's host
    name: a certificate for that name is accepted, one for another name is refused."""
    cert, key = await trio.to_thread.run_sync(_certificate, tmp_path, certified)
    server = await _tls_server(nursery, cert, key)

    async def resolver(host: str, port: int) -> list[IPAddress]:
        return [V4("127.0.0.2")]

    trusted = ssl.create_default_context(cafile=str(cert))
    tool = WebFetchTool(resolve=resolver, verify=trusted)
    result = await fetch(f"https://svc.test:{server.port}/", Exempt("svc.test"), tool)
    assert result.ok is ok, result.content
    if ok:
        assert result.content.endswith("over tls")
        assert server.hosts == [f"svc.test:{server.port}"]
    else:
        assert "ConnectError: [SSL: CERTIFICATE_VERIFY_FAILED]" in result.content
        assert server.requests == []
