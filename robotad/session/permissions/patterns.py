"""Permission patterns (PROTOCOL.md §4): parsing, validation and matching.

A pattern is ``Tool`` (every call of that tool), ``*`` (every call of every tool),
``Tool(glob)`` on the tool's argument key, ``Tool(prefix:*)`` (the argument starts with
``prefix``) or ``Tool(domain:host)`` (a URL argument whose host is ``host`` or a subdomain).

Glob syntax: ``*`` is the only wildcard. For a path argument ``*`` stays within one path segment
and ``**`` crosses segments (a whole ``**`` segment also matches zero segments); a relative
pattern resolves against the session's cwd, ``~/`` against the home directory; an argument of
just ``*`` or ``**`` matches any value. For every other argument ``*`` matches any text. A
backslash makes the next ``*``, ``(``, ``)``, ``:`` or ``\\`` literal (any other backslash is
literal itself), so every path or command can be written as a pattern (`escape_pattern_text`).

`parse_rules` refuses malformed patterns all at once, each with its own path (G-108, G-109);
a pattern naming a tool no profile declares yet is accepted (G-110), unless it gives an MCP
tool or server (``mcp__…``) an argument pattern — MCP tools have no argument a pattern could
match (decision 73) — or names one with ``mcp__`` in another case (``Mcp__files``), which no
offered name starts with, or stops before a tool (``mcp__``, ``mcp__files__``), as no offered
name does (decision 81): such a rule would never apply (a stored one is found
by `mcp_rule_refusal` and left out where it is loaded). `compile_rule` turns a
parsed rule into a `Matcher` for one profile and cwd: regexes are built once, here, and
matching is a plain function over strings. Its size is one concept: the pattern language, from
text to a bounded matcher (the `regex` time limit of decision 40 included), kept in one place so
parsing and matching cannot disagree.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

from protocol.errors import Issue
from protocol.pattern_text import escape_pattern_text, url_host
from robotad.agent.tool import ToolProfile
from robotad.mcp.naming import PREFIX, SEPARATOR, written_for_mcp
from robotad.session.errors import InvalidSetting

if TYPE_CHECKING:
    import regex

__all__ = [
    "ANY_TOOL",
    "MATCH_TIME_LIMIT",
    "WILDCARD",
    "Matcher",
    "Rule",
    "RuleForm",
    "compile_pattern",
    "compile_rule",
    "escape_pattern_text",
    "host_matches",
    "mcp_rule_refusal",
    "parse_rule",
    "parse_rules",
    "url_host",
]

#: The tool name of the ``*`` pattern: every call of every tool.
ANY_TOOL = "*"
#: In `Rule.pieces`, the wildcard ``*``; every other piece is literal text (never empty).
WILDCARD = ""

RuleForm = Literal["tool", "glob", "prefix", "domain"]

_TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")
_HOST_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)\Z")
_ESCAPABLE = frozenset("*()\\:")


@dataclass(frozen=True, slots=True)
class Rule:
    """One parsed pattern. `pieces` holds the argument as literal chunks and `WILDCARD`s (for
    ``prefix`` the text before ``:*``); `host` is set for ``domain``."""

    text: str
    tool: str
    form: RuleForm
    pieces: tuple[str, ...] = ()
    host: str = ""

    @property
    def scoped(self) -> bool:
        """Whether the rule looks at the argument (anything but a bare tool name)."""
        return self.form != "tool"


class _Malformed(ValueError):
    """One pattern's defect; `parse_rules` turns each into a located issue."""


class _StoredMcpRule(_Malformed):
    """An MCP rule robotad once took and now refuses: well formed otherwise, and inert (a
    stored one is left out on load, `mcp_rule_refusal`). Its message is `why` it never
    applied, then the rules to write for `name` instead (its server's too, `with_server`)."""

    def __init__(self, why: str, name: str, *, with_server: bool = False) -> None:
        super().__init__(f"{why}; write {_mcp_names_instead(name, with_server=with_server)}")


def _mcp_argument(name: str) -> _StoredMcpRule:
    """An argument pattern on the MCP tool or server `name` (decision 73)."""
    why = (
        f"MCP tools take no argument pattern (there is no argument for {name}(…) to match, "
        "so the rule would never apply)"
    )
    return _StoredMcpRule(why, name, with_server=True)


def _mcp_case(name: str) -> _StoredMcpRule:
    """An MCP tool or server named with ``mcp__`` in another case (decision 81)."""
    why = (
        f"MCP tools are named with {PREFIX!r} in lower case, and a rule's name is compared "
        f"exactly ({name!r} would match no call, so the rule would never apply)"
    )
    return _StoredMcpRule(why, name)


def _mcp_incomplete(name: str) -> _StoredMcpRule:
    """``mcp__`` alone, or ``mcp__SERVER__`` with no tool after it: no name offered is either
    (a server's tool names always go on past ``mcp__SERVER__``; decision 81)."""
    why = (
        f"an MCP rule names a server (mcp__SERVER) or one of its tools (mcp__SERVER__TOOL), "
        f"and {name!r} names neither, so the rule would never apply"
    )
    return _StoredMcpRule(why, name)


def _incomplete_mcp_name(name: str) -> bool:
    """Whether `name` (starting with ``mcp__``) stops before a server or right after one."""
    server, separator, tool = name[len(PREFIX) :].partition(SEPARATOR)
    return not server or (bool(separator) and not tool)


def _mcp_names_instead(name: str, *, with_server: bool) -> str:
    """The rules to write for `name`, an MCP tool or server named in any case of ``mcp__``:
    its name starting with ``mcp__`` and, `with_server`, its server's too."""
    tool = PREFIX + name[len(PREFIX) :]
    server, _, part = tool[len(PREFIX) :].partition(SEPARATOR)
    server = PREFIX + server
    if server == PREFIX:
        return "mcp__SERVER__TOOL for every call of one tool, or mcp__SERVER for a server"
    if tool == server or not part:
        return f"{server!r} for every tool of that server"
    if with_server:
        return f"{tool!r} for every call of that tool, or {server!r} for every tool of its server"
    return f"{tool!r} for every call of that tool"


def _unescaped(text: str) -> list[tuple[str, bool]]:
    """Characters of `text` with whether each is syntax (True) or escaped literal (False)."""
    out: list[tuple[str, bool]] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text) and text[i + 1] in _ESCAPABLE:
            out.append((text[i + 1], False))
            i += 2
            continue
        out.append((ch, ch != "\\"))
        i += 1
    return out


def _pieces(chars: list[tuple[str, bool]]) -> tuple[str, ...]:
    pieces: list[str] = []
    literal: list[str] = []
    for ch, syntax in chars:
        if syntax and ch == "*":
            if literal:
                pieces.append("".join(literal))
                literal = []
            pieces.append(WILDCARD)
        else:
            literal.append(ch)
    if literal:
        pieces.append("".join(literal))
    return tuple(pieces)


def _valid_host(host: str) -> bool:
    if host.startswith("[") and host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return False
        return True
    if len(host) > 253 or not host:
        return False
    labels = host.split(".")
    if all(label.isdigit() for label in labels):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            return False
        return True
    return all(_HOST_LABEL.match(label) for label in labels)


def parse_rule(text: str, profile: ToolProfile | None = None) -> Rule:
    """Parse one pattern; raise `InvalidSetting` (path ``$``) when it is malformed.

    `profile` is the named tool's profile when one is registered: an argument-scoped pattern
    for a tool without an argument key, or a ``domain:`` pattern for a non-URL argument, is
    then malformed too."""
    try:
        return _parse(text, profile)
    except _Malformed as exc:
        raise InvalidSetting([{"path": "$", "message": str(exc)}]) from None


def parse_rules(
    rules: Sequence[object],
    path_prefix: str = "$.permissions.allow",
    profiles: Mapping[str, ToolProfile] | None = None,
) -> list[Rule]:
    """Parse every pattern of one list, or raise `InvalidSetting` listing EVERY malformed one at
    ``{path_prefix}[i]`` (G-108). Nothing else is ever raised, whatever the strings hold."""
    parsed: list[Rule] = []
    issues: list[Issue] = []
    for index, text in enumerate(rules):
        try:
            if not isinstance(text, str):
                raise _Malformed("a pattern must be a string")
            parsed.append(_parse(text, (profiles or {}).get(_tool_part(text))))
        except _Malformed as exc:
            issues.append({"path": f"{path_prefix}[{index}]", "message": str(exc)})
    if issues:
        raise InvalidSetting(issues)
    return parsed


def _tool_part(text: str) -> str:
    return text.split("(", 1)[0]


def mcp_rule_refusal(text: object) -> str | None:
    """What `parse_rules` says of `text` when it is an MCP rule robotad took before it refused
    it, else None: an argument pattern on an MCP tool or server (``mcp__files__write(/etc/**)``,
    decision 73) or an MCP name whose ``mcp__`` is not in lower case (``Mcp__files__write``,
    decision 81). Such a rule never matched a call: a stored one is left out where it is
    loaded, with this said in the daemon's log."""
    if not isinstance(text, str):
        return None
    try:
        _parse(text, None)
    except _StoredMcpRule as exc:
        return str(exc)
    except _Malformed:
        return None
    return None


#: Parsed patterns remembered (a `Rule` is immutable; every session parses the same few dozen).
_PARSED_KEPT = 1024


@functools.lru_cache(maxsize=_PARSED_KEPT)
def _parse(text: str, profile: ToolProfile | None) -> Rule:
    if not text:
        raise _Malformed("empty pattern")
    chars = _unescaped(text)
    depth = 0
    opened = closed = 0
    for ch, syntax in chars:
        if syntax and ch == "(":
            opened += 1
            depth += 1
        elif syntax and ch == ")":
            closed += 1
            depth -= 1
            if depth < 0:
                break
    if depth != 0 or opened != closed:
        raise _Malformed(f"unbalanced parentheses in pattern {text!r}")
    open_at = next((i for i, (ch, syn) in enumerate(chars) if syn and ch == "("), None)
    name = text if open_at is None else "".join(ch for ch, _ in chars[:open_at])
    if open_at is not None and not name:
        raise _Malformed(f"empty tool name in pattern {text!r}")
    if name != ANY_TOOL and not _TOOL_NAME.match(name):
        raise _Malformed(f"tool name {name!r} is not an identifier")
    if open_at is None:
        if written_for_mcp(name) and not name.startswith(PREFIX):
            raise _mcp_case(name)
        if name.startswith(PREFIX) and _incomplete_mcp_name(name):
            raise _mcp_incomplete(name)
        return Rule(text, name, "tool")
    # Balanced, and the first "(" opens at depth 0: its partner must be the very last char.
    depth = 0
    close_at = open_at
    for i in range(open_at, len(chars)):
        ch, syntax = chars[i]
        if syntax and ch in "()":
            depth += 1 if ch == "(" else -1
            if depth == 0:
                close_at = i
                break
    if close_at != len(chars) - 1:
        raise _Malformed(f"text after the closing parenthesis in pattern {text!r}")
    if written_for_mcp(name):
        raise _mcp_argument(name)
    if name == ANY_TOOL:
        raise _Malformed("the pattern '*' takes no argument")
    inner = chars[open_at + 1 : close_at]
    if not "".join(ch for ch, _ in inner).strip():
        raise _Malformed(f"empty argument in pattern {text!r}")
    if profile is not None and profile.argument_key is None:
        raise _Malformed(f"tool {name} has no argument a pattern could match")
    kind = profile.argument_kind if profile is not None else None
    raw_inner = "".join(ch for ch, _ in inner)
    if raw_inner.startswith("domain:") and all(syn for _, syn in inner[:7]):
        if profile is not None and kind != "url":
            raise _Malformed(f"domain: patterns apply only to URL arguments, not to {name}")
        host = raw_inner[len("domain:") :].strip().lower()
        if not host:
            raise _Malformed(f"empty host in pattern {text!r}")
        if not all(syn or ch != "*" for ch, syn in inner) or not _valid_host(host):
            raise _Malformed(f"invalid host {host!r} in pattern {text!r}")
        return Rule(text, name, "domain", host=host)
    if len(inner) >= 2 and inner[-2] == (":", True) and inner[-1] == ("*", True):
        prefix = _pieces(inner[:-2])
        if not "".join(prefix).strip():
            raise _Malformed(f"empty prefix before ':*' in pattern {text!r}")
        return Rule(text, name, "prefix", pieces=prefix)
    return Rule(text, name, "glob", pieces=_pieces(inner))


# -- matching --------------------------------------------------------------------------------


#: Seconds one rule's pattern may take to match one argument. A pattern of several `*`
#: backtracks on a long argument the model chose (``Read(**/a/**/b/**/c/**)`` took 5.5 s on a
#: 4 KB path, ``Bash(*foo*bar*baz)`` would take minutes on 60 KB), holding every session; past
#: this the check raises TimeoutError and its caller fails closed (decision 40). A hook's
#: matcher is held to the same limit (`robotad.session.hooks.config`, decision 52).
MATCH_TIME_LIMIT: Final = 0.02


def compile_pattern(pattern: str, *, dotall: bool = True) -> regex.Pattern[str]:
    """`pattern` compiled by the `regex` package in its ``re``-compatible mode, whose matches
    take a time limit (`MATCH_TIME_LIMIT`). A rule's ``*`` crosses newlines (`dotall`); a
    hook matcher, a user's own regular expression, keeps ``re``'s meaning of ``.``.
    Raises ``regex.error`` for a malformed pattern."""
    import regex  # 20 ms of start-up: imported when a session first compiles its rules

    return regex.compile(pattern, (regex.DOTALL if dotall else 0) | regex.V0)


@dataclass(frozen=True, slots=True)
class Matcher:
    """A rule compiled for one tool profile and cwd. `matches(value)` takes the call's
    effective (canonical) argument value; None (no argument) matches only bare tool rules."""

    rule: Rule
    regex: regex.Pattern[str] | None
    host: str = ""

    def matches(self, value: str | None) -> bool:
        """Whether the rule catches `value`; TimeoutError when its pattern could not tell
        within `MATCH_TIME_LIMIT` (the caller decides which way that fails closed)."""
        form = self.rule.form
        if form == "tool":
            return True
        if value is None:
            return False
        if form == "domain":
            host = url_host(value)
            return host is not None and host_matches(host, self.host)
        assert self.regex is not None
        return self.regex.fullmatch(value, timeout=MATCH_TIME_LIMIT) is not None


def host_matches(host: str, domain: str) -> bool:
    """`host` is `domain` or one of its subdomains."""
    return host == domain or host.endswith("." + domain)


def compile_rule(
    rule: Rule,
    profile: ToolProfile | None,
    cwd: str,
    *,
    home: str | None = None,
    resolve: Callable[[str], str] = os.path.realpath,
) -> Matcher:
    """Compile `rule` for calls of a tool with `profile` in a session rooted at `cwd` (absolute,
    canonical). A path pattern's leading literal directory is also tried with its symlinks
    resolved by `resolve`, so a pattern keeps matching a value whose links were resolved."""
    if rule.form == "tool":
        return Matcher(rule, None)
    if rule.form == "domain":
        return Matcher(rule, None, rule.host)
    kind = profile.argument_kind if profile is not None else None
    prefix = rule.form == "prefix"
    if kind == "path":
        pattern = _path_regex(rule.pieces, cwd, home or os.path.expanduser("~"), prefix, resolve)
    else:
        pattern = _text_regex(rule.pieces) + (".*" if prefix else "")
    return Matcher(rule, compile_pattern(pattern))


def _text_regex(pieces: Sequence[str]) -> str:
    return "".join(".*" if piece == WILDCARD else re.escape(piece) for piece in pieces)


_Segment = list[str]


def _segments(pieces: Sequence[str]) -> list[_Segment]:
    segments: list[_Segment] = [[]]
    for piece in pieces:
        if piece == WILDCARD:
            segments[-1].append(piece)
            continue
        parts = piece.split("/")
        if parts[0]:
            segments[-1].append(parts[0])
        for part in parts[1:]:
            segments.append([part] if part else [])
    return segments


def _path_regex(
    pieces: Sequence[str], cwd: str, home: str, prefix: bool, resolve: Callable[[str], str]
) -> str:
    head, rest = _path_plan(tuple(pieces), cwd, home, prefix)
    if not head:
        return rest
    heads = [head]
    if (real := resolve(head)) != head:
        heads.append(real.rstrip("/"))
    head_re = "|".join(re.escape(h) for h in heads)
    if len(heads) > 1:
        head_re = f"(?:{head_re})"
    return head_re + rest


@functools.lru_cache(maxsize=_PARSED_KEPT)
def _path_plan(pieces: tuple[str, ...], cwd: str, home: str, prefix: bool) -> tuple[str, str]:
    """The pure, remembered part of `_path_regex`: the pattern's leading literal folder ("" for
    none; it may hold symlinks, resolved by the caller) and the regex of the rest."""
    if not prefix and pieces and all(piece == WILDCARD for piece in pieces):
        return "", ".*"
    segments = _segments(pieces)
    first = segments[0]
    if first == []:  # absolute: the pattern began with "/"
        base: list[str] = []
        segments = segments[1:]
    elif first == ["~"]:
        base = [s for s in home.split("/") if s]
        segments = segments[1:]
    else:
        base = [s for s in cwd.split("/") if s]
    resolved: list[_Segment] = [[name] for name in base]
    for segment in segments:
        if segment in ([], ["."]):
            continue
        if segment == [".."]:
            if resolved:
                resolved.pop()
            continue
        resolved.append(segment)
    if not resolved:
        return "", "/" + (".*" if prefix else "")
    # The leading run of literal segments (a trailing partial name in prefix mode excluded)
    # may hold symlinks; accept the resolved spelling of that directory too.
    literal = 0
    limit = len(resolved) - 1 if prefix else len(resolved)
    while literal < limit and WILDCARD not in resolved[literal]:
        literal += 1
    head = "/" + "/".join(seg[0] for seg in resolved[:literal]) if literal else ""
    return head, _segments_regex(resolved[literal:]) + (".*" if prefix else "")


def _segments_regex(segments: Sequence[_Segment]) -> str:
    out: list[str] = []
    for segment in segments:
        if segment == [WILDCARD, WILDCARD]:
            out.append("(?:/.*)?")
            continue
        body: list[str] = []
        run = 0
        for piece in [*segment, None]:
            if piece == WILDCARD:
                run += 1
                continue
            if run:
                body.append(".*" if run > 1 else "[^/]*")
                run = 0
            if piece is not None:
                body.append(re.escape(piece))
        out.append("/" + "".join(body))
    return "".join(out)
