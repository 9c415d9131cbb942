"""How a permission pattern spells a value (PROTOCOL §4, §10.7), for both sides of the wire.

The daemon matches rules and writes the rule an "allow always" grants; clients write the rule
that covers exactly one approved call. Both must escape a literal and name a URL's host the
same way, or a rule a client writes would not match what the daemon checks.
"""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["escape_pattern_text", "url_host"]


def escape_pattern_text(text: str) -> str:
    """`text` as a pattern argument that matches exactly itself (``*``, ``(``, ``)`` and
    ``\\`` escaped; a leading ``domain:`` escaped so it is not read as the domain form)."""
    escaped = "".join("\\" + ch if ch in "*()\\" else ch for ch in text)
    return escaped.replace("domain:", "domain\\:", 1) if text.startswith("domain:") else escaped


def url_host(url: str) -> str | None:
    """The lowercased host of an absolute URL without a trailing dot (an IPv6 one in
    brackets), as a ``domain:`` rule names it; None when it has none."""
    try:
        host = urlsplit(url.strip()).hostname
    except ValueError:
        return None
    if not host:
        return None
    host = host.rstrip(".")
    return f"[{host}]" if ":" in host else host
