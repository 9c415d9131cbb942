"""What the SDK refuses of a server's answers, located; and a tool list screened tool by tool.

The SDK validates every answer against its pydantic models and refuses a whole answer for
one bad member: ``ValidationError: 1 validation error for ListToolsResult``, naming no tool
and no field, and a server listing one tool whose ``inputSchema`` lacks ``type`` lost all
its tools (decision 69). Two things here:

- `describe_invalid` says where and what: ``content[1].data: Input should be a valid string,
  got 3``, at most `MAX_PROBLEMS` problems, each and all bounded, a union's members narrowed
  to the one the answer meant (a content block's ``type`` picks it).
- `ScreeningDispatcher`, the SDK's JSON-RPC dispatcher with one addition: a ``tools/list``
  answer is checked against the same models before the SDK reads it, and a tool they refuse
  is taken out of it, kept in `left_out` with its located reason (``tools[3] ("search")
  .inputSchema.type: Field required``). The SDK then reads the server's other tools, as it
  would have, and re-reads them the same way when it lists tools itself. Anything wrong
  outside a tool (``tools`` missing, a bad ``nextCursor``) is left for the SDK to refuse.

Only `robotad.mcp.connection` imports this (the SDK comes with it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import mcp_types as types
from mcp.shared.dispatcher import CallOptions
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp_types import methods
from msgspec import Struct
from pydantic import ValidationError
from pydantic_core import ErrorDetails

__all__ = ["MAX_PROBLEMS", "LeftOut", "ScreeningDispatcher", "describe_invalid", "screen_tools"]

#: Problems an answer is described by; more are counted.
MAX_PROBLEMS: Final = 3
#: The longest message and the longest value quoted of one problem.
_MAX_MESSAGE: Final = 160
_MAX_VALUE: Final = 40
#: The protocol version the SDK checks answers against before one is negotiated.
_FALLBACK_VERSION: Final = "2025-11-25"


class LeftOut(Struct, frozen=True):
    """A tool of a listing left out: its name when it had a usable one, and why."""

    name: str | None
    reason: str


def describe_invalid(exc: ValidationError) -> str:
    """``not a valid MODEL: PATH: PROBLEM[, got VALUE]; …`` (see the module doc)."""
    problems = _located(list(exc.errors(include_url=False)))
    return f"not a valid {_model_name(exc.title)}: {_listed(problems)}"


def screen_tools(raw: dict[str, Any], version: str) -> tuple[dict[str, Any], list[LeftOut]]:
    """`raw` (a ``tools/list`` result) without the tools the SDK's models refuse at
    `version`, and those tools, each with its located reason."""
    tools = raw.get("tools")
    if not isinstance(tools, list):
        return raw, []
    per_tool: dict[int, list[ErrorDetails]] = {}
    for error in _refusals(raw, version):
        loc = error["loc"]
        if len(loc) >= 2 and loc[0] == "tools" and isinstance(loc[1], int):
            per_tool.setdefault(loc[1], []).append({**error, "loc": loc[2:]})
    if not per_tool:
        return raw, []
    left_out: list[LeftOut] = []
    for index in sorted(per_tool):
        tool = tools[index]
        name = tool.get("name") if isinstance(tool, dict) else None
        name = name if isinstance(name, str) else None
        where = f'tools[{index}] ("{_clipped(name, _MAX_VALUE)}")' if name else f"tools[{index}]"
        left_out.append(LeftOut(name, _listed(_located(per_tool[index]), where)))
    kept = [tool for index, tool in enumerate(tools) if index not in per_tool]
    return {**raw, "tools": kept}, left_out


class ScreeningDispatcher(JSONRPCDispatcher):
    """The SDK's dispatcher, screening every ``tools/list`` answer (see the module doc).
    `version` gives the negotiated protocol version (the session's, set once it exists)."""

    def __init__(self, read_stream: Any, write_stream: Any) -> None:
        super().__init__(read_stream, write_stream)
        self.version: Callable[[], str | None] = lambda: None
        #: The tools left out of the listings since `left_out` was last cleared.
        self.left_out: list[LeftOut] = []

    async def send_raw_request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        opts: CallOptions | None = None,
        *,
        _related_request_id: Any = None,
    ) -> dict[str, Any]:
        raw = await super().send_raw_request(
            method, params, opts, _related_request_id=_related_request_id
        )
        if method != "tools/list":
            return raw
        raw, left_out = screen_tools(raw, self.version() or _FALLBACK_VERSION)
        self.left_out.extend(item for item in left_out if item not in self.left_out)
        return raw


def _refusals(raw: dict[str, Any], version: str) -> list[ErrorDetails]:
    """What the SDK's two checks of a ``tools/list`` result refuse: the protocol version's
    wire model, then its own model; one problem a place."""
    found: list[ErrorDetails] = []

    def check(validate: Callable[[], object]) -> None:
        try:
            validate()
        except ValidationError as exc:
            seen = {e["loc"] for e in found}
            found.extend(e for e in exc.errors(include_url=False) if e["loc"] not in seen)
        except (KeyError, ValueError):  # a version the SDK has no wire model for
            pass

    check(lambda: methods.validate_server_result("tools/list", version, raw))
    check(lambda: types.ListToolsResult.model_validate(raw, by_name=False))
    return found


def _located(errors: Sequence[ErrorDetails]) -> list[tuple[str, str]]:
    """(path, problem) of each error, in order; a union's errors narrowed to the member
    meant."""
    # In order: a problem, or (None) the place of a union whose problems come once all are in.
    slots: list[tuple[tuple[str, str] | None, tuple[Any, ...]]] = []
    groups: dict[tuple[Any, ...], dict[str, list[ErrorDetails]]] = {}
    for error in errors:
        loc = tuple(error["loc"])
        arm = next((i for i, part in enumerate(loc) if _is_member(part)), None)
        if arm is None:
            slots.append((_problem(loc, error), loc))
            continue
        if loc[:arm] not in groups:
            groups[loc[:arm]] = {}
            slots.append((None, loc[:arm]))
        members = groups[loc[:arm]]
        members.setdefault(str(loc[arm]), []).append({**error, "loc": loc[:arm] + loc[arm + 1 :]})
    problems: list[tuple[str, str]] = []
    for problem, place in slots:
        problems.extend([problem] if problem is not None else _narrowed(place, groups[place]))
    return problems


def _narrowed(
    prefix: tuple[Any, ...], members: dict[str, list[ErrorDetails]]
) -> list[tuple[str, str]]:
    """The problems of the union member at `prefix` that the value meant: one whose
    ``type`` it has (the fewest problems among them); none: that its ``type`` fits none."""
    kind = (*prefix, "type")
    meant = {
        member: errors
        for member, errors in members.items()
        if not any(e["loc"] == kind and e["type"] == "literal_error" for e in errors)
    }
    if meant:
        # A model (``CallToolResult``) before a validator's wrapping of one.
        member = min(meant, key=lambda name: ("[" in name, len(meant[name])))
        return _located(meant[member])
    expected = [
        str(e.get("ctx", {}).get("expected", ""))
        for errors in members.values()
        for e in errors
        if e["loc"] == kind
    ]
    given = next(e["input"] for errors in members.values() for e in errors if e["loc"] == kind)
    fake: ErrorDetails = {
        "type": "literal_error",
        "loc": kind,
        "msg": f"Input should be one of {', '.join(expected)}",
        "input": given,
    }
    return [_problem(kind, fake)]


def _is_member(part: object) -> bool:
    """Whether a pydantic location part names a union member (a model such as
    ``TextContent``, or a validator such as ``function-after[…]``), not a field: MCP's
    fields are camelCase."""
    return isinstance(part, str) and (part[:1].isupper() or "[" in part)


def _problem(loc: Sequence[Any], error: ErrorDetails) -> tuple[str, str]:
    """`error` as (its path, what is wrong there)."""
    message = _clipped(error["msg"], _MAX_MESSAGE)
    value = error.get("input")
    if error["type"] != "missing" and isinstance(value, str | int | float | bool | None):
        message += f", got {_clipped(repr(value), _MAX_VALUE)}"
    return _path(loc), message


def _path(loc: Sequence[Any]) -> str:
    """``content[1].data`` of ``("content", 1, "data")``."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path.lstrip(".")


def _listed(problems: list[tuple[str, str]], where: str = "") -> str:
    """At most `MAX_PROBLEMS` of `problems` (their paths under `where`), then how many
    more."""
    shown = []
    for path, message in problems[:MAX_PROBLEMS]:
        joined = where + ("." if where and path and not path.startswith("[") else "") + path
        shown.append(f"{joined or '(the whole answer)'}: {message}")
    more = len(problems) - MAX_PROBLEMS
    return "; ".join(shown) + (f" (and {more} more)" if more > 0 else "")


def _model_name(title: str) -> str:
    return title if title.isidentifier() else "result"


def _clipped(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
