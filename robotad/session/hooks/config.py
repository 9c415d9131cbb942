"""Hook configuration: the Claude-Code shape, validated and compiled once.

Shape (``[hooks]`` in config.toml, or the same JSON)::

    {EventName: [{"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "…",
                                                     "timeout": 30}]}]}

``timeout`` is in seconds. A ``matcher`` that is absent, empty or ``"*"`` matches every firing;
otherwise it is a regular expression searched in the tool name for tool events, in ``source``
for SessionStart and in ``trigger`` for PreCompact/PostCompact; other events ignore it. A hook
``type`` with no registered executor is not a configuration error (G-141): it is kept, and
refused when it fires.

Matchers are compiled and matched as permission patterns are (`compile_pattern`, the `regex`
package in its ``re``-compatible mode) and a match may take `MATCH_TIME_LIMIT`: a matcher that
backtracks without end on a long tool name would otherwise hold the event loop every session
shares. `HookGroup.selects` raises TimeoutError past it, and the firing fails on that group
(`robotad.session.hooks.runner`; decision 52). No check at load can tell such a pattern from a
slow-looking valid one, so none is refused for it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal, get_args

from protocol.errors import Issue
from protocol.validate import join_path
from robotad.session.errors import InvalidSetting
from robotad.session.permissions.patterns import MATCH_TIME_LIMIT, compile_pattern

if TYPE_CHECKING:
    import regex

__all__ = [
    "HOOK_EVENTS",
    "MATCH_FIELD",
    "TOOL_EVENTS",
    "HookEvent",
    "HookGroup",
    "HookSpec",
    "HooksConfig",
    "parse_hooks_config",
]

HookEvent = Literal[
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PermissionDecision",
    "PostToolUse",
    "PreModelCall",
    "PostModelCall",
    "PreCompact",
    "PostCompact",
    "Stop",
    "StopFailure",
    "SessionEnd",
]
HOOK_EVENTS: Final[tuple[HookEvent, ...]] = get_args(HookEvent)
TOOL_EVENTS: Final = frozenset({"PreToolUse", "PermissionDecision", "PostToolUse"})
#: The input field a matcher is searched in, per event; other events ignore matchers.
MATCH_FIELD: Final[Mapping[str, str]] = {
    **{event: "tool_name" for event in TOOL_EVENTS},
    "SessionStart": "source",
    "PreCompact": "trigger",
    "PostCompact": "trigger",
}


@dataclass(frozen=True, slots=True)
class HookSpec:
    """One configured hook. `where` locates it in the configuration (``PreToolUse[0].hooks[1]``)
    and names it in reasons, instead of its command, which may hold anything."""

    type: str
    where: str
    command: str | None = None
    timeout: float | None = None


@dataclass(frozen=True, slots=True)
class HookGroup:
    """A matcher and the hooks it selects; `pattern` is None when it matches everything.
    `where` locates the group in the configuration (``PreToolUse[0]``)."""

    matcher: str | None
    pattern: regex.Pattern[str] | None
    hooks: tuple[HookSpec, ...]
    where: str

    def selects(self, target: str | None) -> bool:
        """Whether this group's hooks run for a firing on `target` (None: the event has no
        field to match). Raises TimeoutError when the matcher cannot tell within
        `MATCH_TIME_LIMIT`; the caller decides what that firing then means."""
        if self.pattern is None or target is None:
            return True
        return self.pattern.search(target, timeout=MATCH_TIME_LIMIT) is not None


HooksConfig = Mapping[str, Sequence[HookGroup]]


def parse_hooks_config(raw: object, path: str = "$.hooks") -> dict[str, list[HookGroup]]:
    """Validate and compile a hooks configuration; `InvalidSetting` lists every problem with
    its path (unknown event, bad matcher regex, missing command, bad timeout, unknown key of a
    command hook; a NUL in a command is refused with every other string of the configuration,
    by `config_checks`). A hook of an unknown type is kept as it is, to be refused when it
    fires."""
    if raw is None:
        return {}
    issues: list[Issue] = []
    config: dict[str, list[HookGroup]] = {}
    if not isinstance(raw, dict):
        raise InvalidSetting([{"path": path, "message": "must be an object of events"}])
    for event, groups in raw.items():
        where = join_path(path, str(event))  # quoted when not a bare key: ``hooks.""``
        if event not in HOOK_EVENTS:
            issues.append({"path": where, "message": f"unknown hook event {event!r}"})
            continue
        if not isinstance(groups, list):
            issues.append({"path": where, "message": "must be a list of matcher groups"})
            continue
        config[event] = []
        for g, group in enumerate(groups):
            parsed = _parse_group(group, f"{where}[{g}]", f"{event}[{g}]", issues)
            if parsed is not None:
                config[event].append(parsed)
    if issues:
        raise InvalidSetting(issues)
    return config


def _parse_group(group: object, where: str, name: str, issues: list[Issue]) -> HookGroup | None:
    if not isinstance(group, dict):
        issues.append({"path": where, "message": "must be an object {matcher?, hooks}"})
        return None
    for key in sorted(set(group) - {"matcher", "hooks"}):
        issues.append({"path": join_path(where, str(key)), "message": "unknown key"})
    matcher = group.get("matcher")
    pattern: regex.Pattern[str] | None = None
    if matcher is not None and not isinstance(matcher, str):
        issues.append({"path": f"{where}.matcher", "message": "must be a string"})
    elif matcher not in (None, "", "*"):
        import regex  # lazily, as permission patterns do: only a configured matcher needs it

        try:
            pattern = compile_pattern(str(matcher), dotall=False)
        except regex.error as exc:
            issues.append({"path": f"{where}.matcher", "message": f"invalid regex: {exc}"})
    hooks = group.get("hooks")
    if not isinstance(hooks, list):
        issues.append({"path": f"{where}.hooks", "message": "must be a list of hooks"})
        return None
    specs: list[HookSpec] = []
    for h, hook in enumerate(hooks):
        spec = _parse_hook(hook, f"{where}.hooks[{h}]", f"{name}.hooks[{h}]", issues)
        if spec is not None:
            specs.append(spec)
    return HookGroup(matcher if isinstance(matcher, str) else None, pattern, tuple(specs), name)


def _parse_hook(hook: object, where: str, name: str, issues: list[Issue]) -> HookSpec | None:
    if not isinstance(hook, dict):
        issues.append({"path": where, "message": "must be an object {type, command, timeout?}"})
        return None
    kind = hook.get("type")
    if not isinstance(kind, str) or not kind:
        issues.append({"path": f"{where}.type", "message": "must be a non-empty string"})
        return None
    timeout = hook.get("timeout")
    valid_number = isinstance(timeout, int | float) and not isinstance(timeout, bool)
    if timeout is not None and not (valid_number and math.isfinite(timeout) and timeout > 0):
        issues.append({"path": f"{where}.timeout", "message": "must be a positive number"})
        timeout = None
    if kind != "command":
        return HookSpec(kind, name, None, timeout)
    for key in sorted(set(hook) - {"type", "command", "timeout"}):
        issues.append({"path": join_path(where, str(key)), "message": "unknown key"})
    command = hook.get("command")
    if not isinstance(command, str) or not command.strip():
        issues.append({"path": f"{where}.command", "message": "must be a non-empty string"})
        return None
    return HookSpec(kind, name, command, timeout)
