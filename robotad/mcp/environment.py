"""The environment a stdio MCP server starts with: a minimal allow-list plus its own `env`.

robotad's environment holds provider keys (``OPENAI_API_KEY``…) and whatever else its user
exported; a tool server gets none of it. It inherits only `INHERITED` (HOME, PATH, LANG,
USER, TMPDIR, and a few locale and terminal basics that carry no secret), then the server's
configured `env` on top — the one way a user hands a server a key on purpose. A variable whose
value is a shell function (``() {…``) is never inherited.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Final

__all__ = ["INHERITED", "server_environment"]

#: The variables a server inherits from robotad, when set.
INHERITED: Final = (
    "HOME",
    "PATH",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "USER",
    "LOGNAME",
    "TMPDIR",
    "TZ",
    "TERM",
)


def server_environment(
    extra: Iterable[tuple[str, str]], parent: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The allow-listed part of `parent` (default: robotad's environment) plus `extra`."""
    source = os.environ if parent is None else parent
    env = {
        key: value
        for key in INHERITED
        if (value := source.get(key)) is not None and not value.startswith("()")
    }
    env.update(extra)
    return env
