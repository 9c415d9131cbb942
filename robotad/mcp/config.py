"""What an MCP tool server is to robotad: its configuration table and its runtime spec.

Two sources (PROTOCOL.md §10.5):

- ``[mcp_servers.NAME]`` in config.toml (`McpServerConfig`): daemon-wide servers, shared by
  every session, started when first needed;
- ``session/create {mcpServers: [McpServer]}`` (an editor's servers, e.g. through ACP):
  session-scoped, living and dying with their session.

Both become a `ServerSpec`, the one value a server is run from. A spec is either a stdio
server (`command`, `args`, `env`, `cwd`) or a streamable-HTTP one (`url`, `headers`); never
both. Nothing here imports the MCP SDK.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import Meta, Struct

from protocol.validate import Issue, join_path
from robotad.http_urls import http_url_problem
from robotad.mcp.naming import MAX_SERVER_NAME, MAX_TOOL_NAME

__all__ = [
    "DEFAULT_STARTUP_TIMEOUT_MS",
    "DEFAULT_TOOL_TIMEOUT_MS",
    "SERVER_NAME",
    "McpServerConfig",
    "Scope",
    "ServerRisk",
    "ServerSpec",
    "config_issues",
    "name_problem",
    "spec_of_config",
    "spec_of_wire",
    "wire_issues",
]

#: A server's name: what `mcp__NAME__TOOL` and the rules `mcp__NAME` are made of.
SERVER_NAME: Final = re.compile(r"[A-Za-z0-9_-]+\Z")
DEFAULT_STARTUP_TIMEOUT_MS: Final = 10_000
DEFAULT_TOOL_TIMEOUT_MS: Final = 120_000

ServerRisk = Literal["inspect", "modify", "execute"]
Scope = Literal["daemon", "session"]
_Positive = Annotated[int, Meta(gt=0)]
_NonEmpty = Annotated[str, Meta(min_length=1)]


class McpServerConfig(Struct, frozen=True, forbid_unknown_fields=True):
    """One ``[mcp_servers.NAME]`` table. `env` is added to the minimal environment a stdio
    server gets (robotad's own variables never reach it); `risk` is its tools' class in the
    mode table."""

    command: _NonEmpty | None = None
    args: list[str] = msgspec.field(default_factory=list)
    env: dict[str, str] = msgspec.field(default_factory=dict)
    cwd: _NonEmpty | None = None
    url: _NonEmpty | None = None
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    risk: ServerRisk = "execute"
    startup_timeout_ms: _Positive = DEFAULT_STARTUP_TIMEOUT_MS
    tool_timeout_ms: _Positive = DEFAULT_TOOL_TIMEOUT_MS
    enabled: bool = True


class ServerSpec(Struct, frozen=True):
    """How to run one server (see the module doc); `transport` says which members apply."""

    name: str
    scope: Scope
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    risk: ServerRisk = "execute"
    startup_timeout_ms: int = DEFAULT_STARTUP_TIMEOUT_MS
    tool_timeout_ms: int = DEFAULT_TOOL_TIMEOUT_MS

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "http" if self.url is not None else "stdio"

    @property
    def startup_timeout(self) -> float:
        return self.startup_timeout_ms / 1000

    @property
    def tool_timeout(self) -> float:
        return self.tool_timeout_ms / 1000


def spec_of_config(name: str, table: McpServerConfig) -> ServerSpec:
    """The daemon-wide spec of a checked ``[mcp_servers.NAME]`` table."""
    return ServerSpec(
        name=name,
        scope="daemon",
        command=table.command,
        args=tuple(table.args),
        env=tuple(table.env.items()),
        cwd=table.cwd,
        url=table.url,
        headers=tuple(table.headers.items()),
        risk=table.risk,
        startup_timeout_ms=table.startup_timeout_ms,
        tool_timeout_ms=table.tool_timeout_ms,
    )


def spec_of_wire(server: Mapping[str, Any], cwd: str | None) -> ServerSpec:
    """The session-scoped spec of a checked wire ``McpServer`` (a stdio one runs in the
    session's `cwd`)."""
    url = server.get("url")
    return ServerSpec(
        name=server["name"],
        scope="session",
        command=server.get("command"),
        args=tuple(server.get("args", ())),
        env=tuple(dict(server.get("env", {})).items()),
        cwd=None if url is not None else cwd,
        url=url,
        headers=tuple(dict(server.get("headers", {})).items()),
    )


def name_problem(name: str) -> str | None:
    """What is wrong with `name` as a server name, or None. Besides its characters, a name
    holds no ``__`` and does not end in ``_``: tools are ``mcp__NAME__TOOL``, and a rule
    ``mcp__NAME`` must cover one server's tools only (``my__srv`` would read as server ``my``,
    and ``a`` with tool ``b__c`` would collide with ``a__b``'s ``c``). Nor is it longer than
    `MAX_SERVER_NAME`: every name offered for its tools keeps ``mcp__NAME__`` whole, in the 64
    characters providers take, so that rule and the hook matchers covering it always apply
    (decision 68)."""
    if not SERVER_NAME.match(name):
        return "a server name is made of A-Z a-z 0-9 _ -"
    if "__" in name or name.endswith("_"):
        return (
            f"{name!r} holds '__' or ends in '_': tools are named mcp__NAME__TOOL, so a "
            "server's name may not"
        )
    if len(name) > MAX_SERVER_NAME:
        return (
            f"a server name has at most {MAX_SERVER_NAME} characters (this one has "
            f"{len(name)}): its tools are named mcp__NAME__TOOL in at most {MAX_TOOL_NAME}, "
            "each starting with the whole mcp__NAME__ so that rules and hooks naming the "
            "server cover it"
        )
    return None


def config_issues(raw: Any, path: str = "$.mcp_servers") -> list[Issue]:
    """Problems of a raw ``[mcp_servers]`` table a type cannot express: a bad name
    (`name_problem`), neither or both of `command` and `url`, a URL robotad cannot send to
    (`http_url_problem`), an `env` name or a header that cannot be used.
    Values of the wrong shape are skipped (the type check reports those)."""
    if not isinstance(raw, Mapping):
        return []
    issues: list[Issue] = []
    for name, table in raw.items():
        where = join_path(path, str(name))
        if (problem := name_problem(str(name))) is not None:
            issues.append({"path": where, "message": problem})
        if isinstance(table, Mapping):
            issues.extend(_transport_issues(table, where))
            issues.extend(_environment_issues(table, where))
    return issues


#: RFC 9110's token: what an HTTP field name is made of.
_HEADER_NAME: Final = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
#: What a field value may not hold: line breaks and other controls but tab (RFC 9110 §5.5).
_HEADER_VALUE_FORBIDDEN: Final = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def _environment_issues(table: Mapping[str, Any], where: str) -> list[Issue]:
    """An `env` name no process can be given (empty, or holding ``=``) and a header no HTTP
    request can carry: refused at start rather than when the server first starts."""
    issues: list[Issue] = []
    env = table.get("env")
    for name in env if isinstance(env, Mapping) else ():
        if isinstance(name, str) and (not name or "=" in name):
            issues.append(
                {
                    "path": join_path(join_path(where, "env"), name),
                    "message": "not a variable name: give a non-empty name without '='",
                }
            )
    headers = table.get("headers")
    for name, value in headers.items() if isinstance(headers, Mapping) else ():
        at = join_path(join_path(where, "headers"), str(name))
        if isinstance(name, str) and not _HEADER_NAME.match(name):
            message = "not an HTTP header name (letters, digits and !#$%&'*+-.^_`|~ only)"
            issues.append({"path": at, "message": message})
        elif isinstance(value, str) and _HEADER_VALUE_FORBIDDEN.search(value):
            message = "holds a line break or another control character, which a header cannot"
            issues.append({"path": at, "message": message})
    return issues


def wire_issues(
    servers: Sequence[Mapping[str, Any]],
    path: str = "$.mcpServers",
    *,
    reserved: Collection[str] = (),
) -> list[Issue]:
    """Problems of ``session/create``'s `mcpServers` beyond their shape: bad or repeated
    names, a name `reserved` by robotad's configuration (its rules and hooks were written
    for that server, and its tools would be hidden), neither or both of `command` and
    `url`, an `env` name or a header that cannot be used, and a NUL in any string (the
    checks ``[mcp_servers]`` gets at start, so an editor's server fails here, located, not
    when it is first started)."""
    issues: list[Issue] = []
    seen: set[str] = set()
    for index, server in enumerate(servers):
        where = join_path(path, index)
        name = server.get("name", "")
        if (problem := name_problem(name)) is not None:
            issues.append({"path": join_path(where, "name"), "message": problem})
        elif name in seen:
            issues.append({"path": join_path(where, "name"), "message": f"repeats {name!r}"})
        elif name in reserved:
            message = (
                f"{name!r} names a server of robotad's configuration ([mcp_servers.{name}]), "
                "whose rules would apply to this one: choose another name"
            )
            issues.append({"path": join_path(where, "name"), "message": message})
        seen.add(name)
        issues.extend(_transport_issues(server, where))
        issues.extend(_environment_issues(server, where))
        issues.extend(_nul_issues(server, where))
    return issues


def _nul_issues(server: Mapping[str, Any], where: str) -> list[Issue]:
    """A string of `server` (its command, an argument, an env or header name or value, its
    cwd or URL) holding a NUL, which no process or request can carry."""
    issues: list[Issue] = []
    for key in ("command", "cwd", "url"):
        if isinstance(value := server.get(key), str) and "\0" in value:
            issues.append({"path": join_path(where, key), "message": _NUL})
    args = server.get("args")
    for index, argument in enumerate(args if isinstance(args, list) else ()):
        if isinstance(argument, str) and "\0" in argument:
            issues.append({"path": join_path(join_path(where, "args"), index), "message": _NUL})
    for key in ("env", "headers"):
        table = server.get(key)
        for name, value in table.items() if isinstance(table, Mapping) else ():
            if "\0" in str(name) or (isinstance(value, str) and "\0" in value):
                at = join_path(join_path(where, key), str(name).replace("\0", "\\u0000"))
                issues.append({"path": at, "message": _NUL})
    return issues


_NUL: Final = "holds a NUL character (\\u0000), which no command, variable or header can hold"


def _transport_issues(table: Mapping[str, Any], where: str) -> list[Issue]:
    has_command = table.get("command") is not None
    url = table.get("url")
    if has_command and url is not None:
        return [{"path": where, "message": "give either command (stdio) or url (HTTP), not both"}]
    if not has_command and url is None:
        return [
            {"path": where, "message": "give a command (stdio) or a url (HTTP): it has neither"}
        ]
    cwd = table.get("cwd")
    if isinstance(cwd, str) and cwd and not cwd.startswith("/"):
        return [{"path": join_path(where, "cwd"), "message": "expected an absolute path"}]
    if isinstance(url, str) and (problem := http_url_problem(url)) is not None:
        return [{"path": join_path(where, "url"), "message": problem}]
    if url is not None:
        extra = [key for key in ("args", "env", "cwd") if table.get(key)]
        if extra:
            return [{"path": join_path(where, extra[0]), "message": "only for a stdio server"}]
    elif table.get("headers"):
        return [{"path": join_path(where, "headers"), "message": "only for an HTTP server"}]
    return []
