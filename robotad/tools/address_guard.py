"""The address guard under WebFetch (PROTOCOL.md §10.7): where a fetch may connect.

Whatever the permission mode and rules, WebFetch never connects to an address of this machine
or its networks — loopback, private, link-local (the cloud metadata service lives at
169.254.169.254), CGNAT, unspecified, multicast or reserved — unless an allow rule names that
exact host (``WebFetch(domain:localhost)``). Only ``public`` addresses pass by themselves.

The guard is two plain functions and one resolution step:

- `literal_address` reads a host written as an address in any spelling a resolver accepts:
  dotted IPv4, IPv6 (bracketed or not, with a zone), and the ``inet_aton`` forms — one to four
  parts, each decimal, octal (leading ``0``) or hex (``0x``) — so ``2130706433``,
  ``0x7f000001``, ``0177.0.0.1`` and ``127.1`` are all 127.0.0.1.
- `classify_address` names the class of an address; an IPv6 address embedding an IPv4 one
  (IPv4-mapped ``::ffff:a.b.c.d``, NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``) is the class of
  the address it embeds.
- `checked_addresses` resolves a host once and refuses it (`AddressRefused`, naming the class)
  when any address it resolves to is not public. The caller connects to the addresses it
  returns, never to the name again, so a second resolution cannot give another answer (no DNS
  rebinding between the check and the connection).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Final, Literal

import trio

__all__ = [
    "AddressClass",
    "AddressRefused",
    "IPAddress",
    "Resolver",
    "checked_addresses",
    "classify_address",
    "literal_address",
    "system_resolver",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
AddressClass = Literal[
    "loopback",
    "private",
    "link-local",
    "cgnat",
    "unspecified",
    "multicast",
    "reserved",
    "public",
]
#: Resolves a host name and port to the addresses a connection may use, in preference order.
Resolver = Callable[[str, int], Awaitable[list[IPAddress]]]

_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network

_IPV4_CLASSES: Final[tuple[tuple[ipaddress.IPv4Network, AddressClass], ...]] = (
    (_V4("0.0.0.0/8"), "unspecified"),  # "this network": 0.0.0.0 reaches this host on Linux
    (_V4("127.0.0.0/8"), "loopback"),
    (_V4("10.0.0.0/8"), "private"),
    (_V4("172.16.0.0/12"), "private"),
    (_V4("192.168.0.0/16"), "private"),
    (_V4("169.254.0.0/16"), "link-local"),
    (_V4("100.64.0.0/10"), "cgnat"),
    (_V4("224.0.0.0/4"), "multicast"),
    (_V4("240.0.0.0/4"), "reserved"),  # includes the broadcast address 255.255.255.255
    (_V4("192.0.0.0/24"), "reserved"),  # IETF protocol assignments
    (_V4("192.0.2.0/24"), "reserved"),  # documentation
    (_V4("198.51.100.0/24"), "reserved"),
    (_V4("203.0.113.0/24"), "reserved"),
    (_V4("198.18.0.0/15"), "reserved"),  # benchmarking, often used inside networks
    (_V4("192.88.99.0/24"), "reserved"),  # the former 6to4 relay anycast
)

_IPV6_CLASSES: Final[tuple[tuple[ipaddress.IPv6Network, AddressClass], ...]] = (
    (_V6("::/128"), "unspecified"),
    (_V6("::1/128"), "loopback"),
    (_V6("fe80::/10"), "link-local"),
    (_V6("fc00::/7"), "private"),  # unique local addresses
    (_V6("fec0::/10"), "private"),  # the deprecated site-local addresses
    (_V6("64:ff9b:1::/48"), "private"),  # local-use NAT64
    (_V6("ff00::/8"), "multicast"),
    (_V6("::/8"), "reserved"),  # IPv4-compatible and other reserved low addresses
    (_V6("100::/64"), "reserved"),  # discard-only
    (_V6("2001::/32"), "reserved"),  # Teredo
    (_V6("2001:db8::/32"), "reserved"),  # documentation
)

_NAT64: Final = _V6("64:ff9b::/96")
_NUMBER: Final = re.compile(r"(?:0[xX][0-9a-fA-F]*|[0-9]+)\Z")
_PART_LIMITS: Final = {1: (32,), 2: (8, 24), 3: (8, 8, 16), 4: (8, 8, 8, 8)}


def classify_address(address: IPAddress) -> AddressClass:
    """The class of `address`; an IPv6 address embedding an IPv4 one is judged by that one."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            return classify_address(embedded)
        plain = ipaddress.IPv6Address(int(address))  # without a zone
        return next((cls for net, cls in _IPV6_CLASSES if plain in net), "public")
    return next((cls for net, cls in _IPV4_CLASSES if address in net), "public")


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    plain = ipaddress.IPv6Address(int(address))
    if plain in _NAT64:
        return ipaddress.IPv4Address(int(plain) & 0xFFFFFFFF)
    return None


def literal_address(host: str) -> IPAddress | None:
    """The address `host` spells, or None when it is a name. IPv6 may be bracketed and carry
    a zone; IPv4 may take any ``inet_aton`` form (see the module doc). One trailing dot is
    ignored, as resolvers do."""
    text = host.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if ":" in text:
        try:
            return ipaddress.IPv6Address(text)
        except ValueError:
            return None
    if text.endswith("."):
        text = text[:-1]
    parts = text.split(".")
    if not text or len(parts) > 4 or not all(_NUMBER.match(part) for part in parts):
        return None
    try:
        values = [_part_value(part) for part in parts]
    except ValueError:
        return None
    total = 0
    for value, bits in zip(values, _PART_LIMITS[len(parts)], strict=True):
        if value >= 1 << bits:
            return None
        total = (total << bits) | value
    return ipaddress.IPv4Address(total)


def _part_value(part: str) -> int:
    if part[:2] in ("0x", "0X"):
        return int(part[2:] or "0", 16)
    if len(part) > 1 and part.startswith("0"):
        return int(part, 8)  # a ValueError for 8 or 9: not an address
    return int(part)


class AddressRefused(Exception):
    """The host resolves to an address the guard refuses; the message names its class."""

    def __init__(self, host: str, address: IPAddress, address_class: AddressClass) -> None:
        self.host = host
        self.address = address
        self.address_class = address_class
        where = str(address) if host in (str(address), f"[{address}]") else f"{host} ({address})"
        article = "an" if address_class[0] in "aeiou" else "a"
        super().__init__(
            f"refused to connect to {where}: {article} {address_class} address. WebFetch "
            "reaches only public addresses unless an allow rule names this exact host, "
            f"e.g. WebFetch(domain:{_rule_host(host)})"
        )


def _rule_host(host: str) -> str:
    """`host` as a ``domain:`` rule spells it: lowercased, no trailing dot, IPv6 bracketed."""
    bare = host.lower().rstrip(".").removeprefix("[").removesuffix("]")
    return f"[{bare}]" if ":" in bare else bare


async def system_resolver(host: str, port: int) -> list[IPAddress]:
    """The system resolver's answer (getaddrinfo), addresses in its order, each once."""
    infos = await trio.socket.getaddrinfo(host, port, type=trio.socket.SOCK_STREAM)
    found: list[IPAddress] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]))
        if address not in found:
            found.append(address)
    return found


async def checked_addresses(
    host: str, port: int, *, exempt: bool, resolve: Resolver = system_resolver
) -> Sequence[IPAddress]:
    """The addresses to connect to for `host`, resolved once. Unless `exempt` (an allow rule
    names this exact host), raises `AddressRefused` when any of them is not public. Raises
    `OSError` when the name does not resolve."""
    literal = literal_address(host)
    addresses = [literal] if literal is not None else await resolve(host, port)
    if not addresses:
        raise OSError(f"{host} resolves to no address")
    if not exempt:
        for address in addresses:
            address_class = classify_address(address)
            if address_class != "public":
                raise AddressRefused(host, address, address_class)
    return addresses
