"""The tool port: what every built-in (and added) tool is to the loop and the permission gate.

A tool declares its name, a JSON Schema for the model, a typed argument Struct (unknown or
missing arguments are refused by decoding it), and a `ToolProfile` the permission gate reads:
its risk class and which argument patterns match against (PROTOCOL.md §4).

`run` gets arguments already decoded and, for path arguments, already canonicalised against the
session's cwd; tools still resolve any relative path against `ctx.cwd`, never the process's own
working directory. A tool reports ordinary failure as `ToolResult(ok=False, ...)`; an exception
escaping `run` is turned into a failed result by the loop. Cancellation must stop the work
(Bash kills its process group) and propagate.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Generic, Literal, Protocol, TypeVar

import msgspec
from msgspec import Struct

from robotad.agent.provider import ToolSchema

__all__ = [
    "ArgumentError",
    "ArgumentKind",
    "Risk",
    "Tool",
    "ToolContext",
    "ToolPolicy",
    "ToolProfile",
    "ToolResult",
    "TypedTool",
    "missing_tool_reason",
]

Risk = Literal["inspect", "modify", "execute", "network"]
ArgumentKind = Literal["path", "command", "url", "text"]


class ToolProfile(Struct, frozen=True):
    """The permission profile: risk class, and the argument a `Tool(pattern)` rule matches.
    `confined`: the tool runs inside the session's sandbox (PROTOCOL.md §10.4), which bounds
    what it can do where the mode table would otherwise ask a person. `anchor_key` names an
    argument holding a file pattern whose wildcard-free leading folders move where the call
    looks (Glob's ``pattern``): the gate moves them into the path argument, so rules judge
    the folder actually searched (`glob_pattern.split_anchor`). `stored_results` and
    `rule_names`: see the fields."""

    risk: Risk
    argument_key: str | None = None
    argument_kind: ArgumentKind | None = None
    confined: bool = False
    anchor_key: str | None = None
    #: The path argument may instead be a ``tool-result:`` reference (Read): a result the
    #: session stored, which names no file and is never canonicalised nor judged as one.
    stored_results: bool = False
    #: Names besides its own that a permission rule covers the tool by, from where it comes:
    #: an MCP tool's server (``mcp__SERVER``) and its full name (`robotad.mcp.naming`).
    rule_names: tuple[str, ...] = ()


class ToolResult(Struct):
    """`content` is what the model reads; `metadata` lands in the tool message's metadata."""

    ok: bool
    content: str
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)


class ToolPolicy(Protocol):
    """What the session's permissions say inside a running tool (PROTOCOL.md §10.7), asked
    when the tool needs it (rules change during a session)."""

    def exempts(self, tool_name: str, host: str) -> bool:
        """Whether the tool may reach `host` whatever its address: an allow rule names it."""
        ...

    def withholds(self, tool_name: str, path: str, root: str) -> bool:
        """Whether a search by the tool of the folder `root` must skip the file `path`: a
        protected secret that a call naming it would have to ask about, a file a deny rule
        covers, or one an ask rule covers that did not already ask for `root`."""
        ...

    def hides(self, tool_name: str, path: str) -> bool:
        """Whether a listing by the tool (names, not contents) must leave `path` out: a deny
        rule of the tool covers it, however the listing's pattern reached it."""
        ...


class ToolContext(Struct):
    """What a running tool may know about its session. Without a `policy` the address guard
    is lifted for no host and no file is withheld from a search.

    `real_path` is this call's path argument with its symlinks resolved as the permission
    check judged it (None when no check judged one). A tool that opens that path must open
    that file and no other: a link on the path changed after the check (by a command running
    meanwhile) could otherwise lead the open to a file the rules protect
    (`textfile.moved_since_check`)."""

    cwd: Path
    session_id: str
    policy: ToolPolicy | None = None
    real_path: str | None = None


class ArgumentError(ValueError):
    """The model's arguments do not fit the tool: unknown, missing or mistyped members."""


class Tool(Protocol):
    # Read-only members, so a class attribute (as `TypedTool` subclasses declare them), an
    # instance attribute or a property all satisfy the protocol.
    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def profile(self) -> ToolProfile: ...

    @property
    def schema(self) -> ToolSchema: ...

    def decode_arguments(self, arguments: dict[str, Any]) -> Any:
        """Return the typed arguments, or raise `ArgumentError` naming every problem."""
        ...

    async def run(self, arguments: Any, ctx: ToolContext) -> ToolResult: ...


A = TypeVar("A", bound=Struct)


class TypedTool(Generic[A]):
    """Base for tools whose arguments are one msgspec Struct (``forbid_unknown_fields=True``).
    The JSON Schema shown to the model is generated from that Struct."""

    name: ClassVar[str]
    description: ClassVar[str]
    profile: ToolProfile  # a class default; an instance may replace it (a confined Bash)
    Arguments: ClassVar[type[Struct]]

    @property
    def schema(self) -> ToolSchema:
        return ToolSchema(self.name, self.description, _json_schema(self.Arguments))

    def decode_arguments(self, arguments: dict[str, Any]) -> A:
        try:
            return msgspec.convert(arguments, self.Arguments)  # type: ignore[return-value]
        except msgspec.ValidationError as exc:
            raise ArgumentError(f"invalid arguments for {self.name}: {exc}") from None

    async def run(self, arguments: A, ctx: ToolContext) -> ToolResult:
        raise NotImplementedError


def _json_schema(struct: type[Struct]) -> dict[str, Any]:
    """Inline JSON Schema of an argument Struct (no $defs indirection for flat structs): a
    fresh dict each call, decoded from the schema generated once per Struct (every session
    lists its tools, and generating is the costly part)."""
    schema: dict[str, Any] = msgspec.json.decode(_encoded_schema(struct))
    return schema


@functools.cache
def _encoded_schema(struct: type[Struct]) -> bytes:
    schema = msgspec.json.schema(struct)
    defs = schema.pop("$defs", {})
    ref = schema.get("$ref", "")
    if ref.startswith("#/$defs/"):
        schema = dict(defs[ref.removeprefix("#/$defs/")])
    schema.pop("title", None)
    return msgspec.json.encode(schema)


def missing_tool_reason(tools: Mapping[str, Tool], name: str) -> str | None:
    """Why no tool `name` is among `tools`, when the mapping can say (one with a
    ``missing_reason(name)`` method: a session's tool table knows which MCP server a name
    belongs to and why that server is not running); else None."""
    explain = getattr(tools, "missing_reason", None)
    reason = explain(name) if callable(explain) else None
    return reason if isinstance(reason, str) else None
