"""The checks of config.toml that its types cannot express, and how their problems are shown.

`decode_config` (`robotad.config`) decodes the file against its Structs and adds what these
find on the raw table, so one pass lists every problem of the file, one a path: a default
provider that names nothing, a provider table without a name (``[providers.""]``, or one
of spaces only), an instruction file name of spaces only, a base URL robotad cannot send to
(`http_url_problem`: not http(s), no host, a bad port…), a NUL in any string, malformed path
patterns and rule patterns, hook tables the session layer would refuse, MCP server tables
without a transport or with a bad name, relative sandbox roots. `toml_path` turns
``$.providers["my box"].kind`` into the TOML spelling the message shows, and `in_toml_terms`
puts a message in a TOML file's words, saying which keys an unknown key's table takes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import msgspec.inspect as mi

from protocol.validate import Issue, join_path
from robotad.http_urls import http_url_problem
from robotad.mcp.config import config_issues

__all__ = [
    "first_per_path",
    "in_toml_terms",
    "raw_issues",
    "toml_path",
    "without_foreign_hook_members",
]


def raw_issues(raw: dict[str, Any], builtin_kinds: Sequence[str]) -> list[Issue]:
    """Every problem of the raw table beyond its types (see the module doc)."""
    return _nul_issues(raw) + _meaning_issues(raw, builtin_kinds) + _session_issues(raw)


def _nul_issues(raw: dict[str, Any]) -> list[Issue]:
    """Every key or string holding a NUL (TOML's ``\\u0000``), which no path, command,
    variable, header or pattern can hold: each would fail only later, when used (a sandbox
    root's check raised at start). Walked without recursion: TOML nests as deep as it likes."""
    issues: list[Issue] = []
    message = "holds a NUL character (\\u0000), which no path, command or name can hold"
    pending: list[tuple[str, Any]] = [("$", raw)]
    while pending:
        path, value = pending.pop()
        if isinstance(value, str) and "\0" in value:
            issues.append({"path": path, "message": message})
            continue
        if not isinstance(value, dict | list):
            continue
        members = value.items() if isinstance(value, dict) else enumerate(value)
        inside: list[tuple[str, Any]] = []
        for key, member in members:
            where = join_path(path, key)
            if isinstance(key, str) and "\0" in key:
                issues.append({"path": where, "message": f"key {message}"})
            else:
                inside.append((where, member))
        pending.extend(reversed(inside))  # popped in the file's order
    return issues


def _session_issues(raw: dict[str, Any]) -> list[Issue]:
    """What the session layer would refuse at start — malformed rule patterns, hook tables it
    cannot compile — checked here too, so one pass lists every problem of the file."""
    from robotad.session.errors import InvalidSetting
    from robotad.session.hooks.config import parse_hooks_config
    from robotad.session.permissions.patterns import parse_rules

    issues: list[Issue] = []
    permissions = raw.get("permissions")
    for kind in ("allow", "ask", "deny"):
        rules = permissions.get(kind) if isinstance(permissions, dict) else None
        if isinstance(rules, list):
            try:
                parse_rules(rules, f"$.permissions.{kind}")
            except InvalidSetting as exc:
                issues.extend(exc.issues)
    hooks = raw.get("hooks")
    if isinstance(hooks, dict):
        try:
            parse_hooks_config(hooks)
        except InvalidSetting as exc:
            issues.extend(exc.issues)
    return issues


def first_per_path(issues: list[Issue]) -> list[Issue]:
    """`issues` with one per path, the first (the type check's, where it spoke)."""
    seen: set[str] = set()
    kept: list[Issue] = []
    for issue in issues:
        if issue["path"] not in seen:
            seen.add(issue["path"])
            kept.append(issue)
    return kept


def without_foreign_hook_members(raw: dict[str, Any]) -> dict[str, Any]:
    """A copy in which handlers of a type other than ``"command"`` keep only `type` and
    `timeout`: their other members belong to an executor this build lacks."""
    hooks = raw.get("hooks")
    if not isinstance(hooks, dict):
        return raw
    trimmed: dict[str, Any] = {}
    for event, matchers in hooks.items():
        if not isinstance(matchers, list):
            trimmed[event] = matchers
            continue
        trimmed[event] = [_trim_matcher(matcher) for matcher in matchers]
    return {**raw, "hooks": trimmed}


def _trim_matcher(matcher: Any) -> Any:
    if not isinstance(matcher, dict) or not isinstance(matcher.get("hooks"), list):
        return matcher
    handlers = [
        {k: v for k, v in h.items() if k in ("type", "timeout")}
        if isinstance(h, dict) and isinstance(h.get("type"), str) and h["type"] != "command"
        else h
        for h in matcher["hooks"]
    ]
    return {**matcher, "hooks": handlers}


def _meaning_issues(raw: dict[str, Any], builtin_kinds: Sequence[str]) -> list[Issue]:
    """Problems a type cannot express; each check skips values of the wrong shape (the type
    check reports those)."""
    issues: list[Issue] = []
    providers = raw.get("providers")
    names = set(providers) if isinstance(providers, dict) else set()
    default = raw.get("default_provider", "scripted")
    if isinstance(default, str) and default and default not in names | set(builtin_kinds):
        issues.append(
            {
                "path": "$.default_provider",
                "message": "names no [providers] table and no built-in kind "
                "(scripted, openai, anthropic)",
            }
        )
    if isinstance(providers, dict):
        for name, table in providers.items():
            if isinstance(name, str) and not name.strip():
                issues.append({"path": join_path("$.providers", name), "message": _NO_NAME})
            kind = table.get("kind") if isinstance(table, dict) else None
            if name in builtin_kinds and isinstance(kind, str) and kind != name:
                issues.append(
                    {
                        "path": join_path(join_path("$.providers", name), "kind"),
                        "message": f"a table named after the built-in {name!r} must be of that "
                        f"kind (it configures it); give a {kind!r} provider another name",
                    }
                )
            url = table.get("base_url") if isinstance(table, dict) else None
            if isinstance(url, str) and url and (problem := http_url_problem(url)) is not None:
                where = join_path(join_path("$.providers", name), "base_url")
                issues.append({"path": where, "message": problem})
    instructions = raw.get("instructions")
    files = instructions.get("files") if isinstance(instructions, dict) else None
    for index, name in enumerate(files if isinstance(files, list) else []):
        if isinstance(name, str) and not name.strip():
            issues.append({"path": f"$.instructions.files[{index}]", "message": _NO_FILE_NAME})
    permissions = raw.get("permissions")
    reads = permissions.get("protected_reads") if isinstance(permissions, dict) else None
    if isinstance(reads, list) and all(isinstance(read, str) for read in reads):
        from robotad.session.permissions.sensitive_paths import check_path_patterns

        issues.extend(check_path_patterns(reads, "$.permissions.protected_reads"))
    hooks = raw.get("hooks")
    if isinstance(hooks, dict):
        for event, matchers in hooks.items():
            if isinstance(matchers, list):
                issues.extend(_hook_issues(join_path("$.hooks", str(event)), matchers))
    issues.extend(config_issues(raw.get("mcp_servers")))
    sandbox = raw.get("sandbox")
    roots = sandbox.get("writable_roots") if isinstance(sandbox, dict) else None
    for index, root in enumerate(roots if isinstance(roots, list) else []):
        where = f"$.sandbox.writable_roots[{index}]"
        if isinstance(root, str) and not (root.startswith("/") or root.split("/")[0] == "~"):
            issues.append(
                {"path": where, "message": "expected an absolute path (or one starting with ~/)"}
            )
        elif (
            isinstance(root, str)
            and "\0" not in root  # reported as such; no path can be resolved with one
            and (held := _holds_persistence(root)) is not None
        ):
            issues.append(
                {
                    "path": where,
                    "message": f"is or holds {held}, where files that run later live: a "
                    "sandboxed command may never write there (name a project folder)",
                }
            )
    return issues


#: Why a provider table must have a name: nothing could choose one named ``""`` (every place
#: that names a provider takes a non-empty name), and one named with spaces only would show
#: as a blank wherever a session's provider is shown.
_NO_NAME = (
    "a provider's name cannot be empty or only spaces: it is how default_provider, "
    "session/create (robotactl new --provider) and every session's info name the provider; "
    "give the table a name, such as [providers.local]"
)


#: Why an instruction file name must say something: it is looked for as a file of that name
#: in every folder from the repository root to a session's cwd, and ``" "`` names no file anyone
#: meant (an empty one is refused by its type, which says it must not be empty).
_NO_FILE_NAME = (
    "an instruction file name cannot be empty or only spaces: each is a file name looked for "
    'in every folder from the repository root down to a session\'s cwd, such as "AGENTS.md"'
)


def _holds_persistence(root: str) -> str | None:
    """The persistence folder (``~``, ``~/.ssh``…) `root` is or holds, which the sandbox
    would keep read-only whatever the configuration says (`sandbox.layout`)."""
    import os

    from robotad.sandbox.layout import persistence_inside

    return persistence_inside(os.path.realpath(os.path.expanduser(root)))


def _hook_issues(path: str, matchers: list[Any]) -> list[Issue]:
    issues: list[Issue] = []
    for index, matcher in enumerate(matchers):
        if not isinstance(matcher, dict):
            continue
        where = join_path(path, index)
        pattern = matcher.get("matcher")
        if isinstance(pattern, str) and pattern not in ("", "*"):
            try:
                re.compile(pattern)
            except re.error as exc:
                issues.append(
                    {
                        "path": join_path(where, "matcher"),
                        "message": f"invalid regular expression: {exc.msg}",
                    }
                )
        handlers = matcher.get("hooks")
        for number, handler in enumerate(handlers if isinstance(handlers, list) else []):
            is_command = isinstance(handler, dict) and handler.get("type") == "command"
            if is_command and "command" not in handler:
                at = join_path(join_path(where, "hooks"), number)
                issues.append(
                    {
                        "path": join_path(at, "command"),
                        "message": 'missing required member (for type "command")',
                    }
                )
    return issues


_QUOTED_KEY = re.compile(r'\["((?:[^"\\]|\\.)*)"\]')


def toml_path(path: str) -> str:
    """``$.providers["my local"].model`` → ``providers."my local".model``; ``$`` → ``""``."""
    dotted = _QUOTED_KEY.sub(lambda m: f'."{m.group(1)}"', path)
    return dotted.removeprefix("$").removeprefix(".")


_STEP = re.compile(r'\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')


def in_toml_terms(issue: Issue, root: type) -> Issue:
    """`issue` (``$``-rooted, against the Struct `root`) in a config file's words: a table,
    not an object; an unknown key with the keys its table takes (a typo's fix in sight)."""
    message = issue["message"]
    if message == "unknown member":
        steps = list(_STEP.finditer(issue["path"]))
        keys = _keys_at(steps[:-1], root) if steps else None
        table = "this table" if len(steps) > 1 else "the top level"
        message = "unknown key" + (f" ({table} takes: {', '.join(keys)})" if keys else "")
    elif message == "missing required member":
        message = "missing required key"
    else:
        message = re.sub(r"\b(expected|got) object\b", r"\1 table", message)
    return {**issue, "message": message}


def _keys_at(steps: list[re.Match[str]], root: type) -> list[str] | None:
    """The keys of the fixed-key table `steps` lead to from `root`, or None."""
    info = _table_of(mi.type_info(root))
    for step in steps:
        if isinstance(info, mi.StructType):
            name, _, quoted = step.groups()
            key = json.loads(quoted) if quoted is not None else name
            info = next((f.type for f in info.fields if f.encode_name == key), None)
        elif isinstance(info, mi.DictType):
            info = info.value_type
        elif isinstance(info, mi.ListType):
            info = info.item_type
        else:
            return None
        info = _table_of(info)
    return [f.encode_name for f in info.fields] if isinstance(info, mi.StructType) else None


def _table_of(info: mi.Type | None) -> mi.Type | None:
    """`info` without its constraints, and an optional table as that table."""
    while True:
        if isinstance(info, mi.Metadata):
            info = info.type
        elif isinstance(info, mi.UnionType):
            tables = [t for t in info.types if not isinstance(t, mi.NoneType)]
            if len(tables) != 1:
                return info
            info = tables[0]
        else:
            return info
