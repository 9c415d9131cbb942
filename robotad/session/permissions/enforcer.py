"""The permission enforcer: rules, modes and remembered consent, as plain evaluation.

`PermissionEnforcer.evaluate(tool, arguments)` decides one call in this order (G-111): a
matching deny rule denies, then a matching ask rule asks, then a matching allow rule allows,
and otherwise the mode table decides by the tool's risk class (G-112; ``network`` is
PROTOCOL.md §10.7):

================== ======= ======= ======= =======
mode               inspect modify  execute network
================== ======= ======= ======= =======
plan               allow   deny    deny    ask
default            allow   ask     ask     ask
acceptEdits        allow   allow*  ask     ask
bypassPermissions  allow   allow   allow   allow
auto               allow   ask*    ask*    ask*
================== ======= ======= ======= =======

Sensitive paths (§10.7, `SensitivePaths`) ask in every mode but ``bypassPermissions``, even
where the mode would allow: a read (an ``inspect`` tool's path) of a protected secret, and a
write (a ``modify`` tool's path) to a persistence path. Only an allow rule that names the path
(an argument pattern that is not just wildcards) admits such a call without asking; a bare
``Read`` rule does not. ``allow*``: ``acceptEdits`` allows a write only inside the workspace
(the cwd tree and ``additional_dirs``) and asks outside it. A mode's ``deny`` stays a deny.

A tool whose profile is ``confined`` (Bash in a sandboxed session) is allowed where the table
says ask: the sandbox bounds it. Rules still come first, and ``plan`` still denies.

``ask*``: auto mode lets the classifier stand in for the person (`Decision.classifier_eligible`)
unless a person is required — a critical removal, a protected or sensitive path (G-122); an ask
rule always goes to a person (G-121). A tool with no registered profile is judged as ``execute``.

Arguments are judged in their effective form: a path argument is canonicalised against the
session's cwd first (G-116, `canonical_arguments`), and a pattern's wildcard-free leading
folders are moved into it where the profile says they move the search (Glob's
``pattern: "~/.ssh/*"`` is judged as ``path: "~/.ssh"``). A path is also judged with its symlinks
resolved: a deny or ask rule catches either spelling, an allow rule must admit both, so a link
inside an allowed tree cannot lead an allow rule somewhere else. A shell command is judged part
by part (`shell_text.split_compound`): a deny or ask rule catches any part, an allow rule admits a
compound command only when every part is admitted or the rule names the exact command. Deny
and ask rules also see each part as the program it runs (`shell_text.command_spellings`:
``(rm x)``, ``\\rm x``, ``/bin/rm x``, ``FOO=1 rm x`` read ``rm x``), and a part that
redirects output to a file is admitted only by a rule naming it exactly, never a prefix.

The enforcer never prompts, runs a classifier or records a denial by itself; the Session does
those and calls `note_denial` for every call finally refused, whoever refused it.

Its size is one concept: the evaluation order (deny, ask, allow, mode table) with consent and
the mode guard, which must be read as one.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Literal, get_args

import msgspec
from msgspec import Struct

from protocol.errors import Issue, NotAllowed, TransitionRefused
from protocol.shapes import PermissionMode, utc_now
from robotad.agent.tool import ArgumentError, Risk, ToolProfile
from robotad.mcp.naming import rule_covers
from robotad.session.errors import InvalidSetting
from robotad.session.permissions.consent import consent_pattern
from robotad.session.permissions.hazards import ProtectedPaths, is_critical_removal
from robotad.session.permissions.patterns import (
    ANY_TOOL,
    MATCH_TIME_LIMIT,
    WILDCARD,
    Matcher,
    Rule,
    compile_pattern,
    compile_rule,
    parse_rule,
    parse_rules,
)
from robotad.session.permissions.program_options import writes_or_runs
from robotad.session.permissions.sensitive_paths import SensitivePaths
from robotad.session.permissions.shell_text import (
    command_spellings,
    rough_parts,
    split_compound,
)
from robotad.tools.glob_pattern import split_anchor
from robotad.tools.paths import canonical_path

__all__ = [
    "MODE_TABLE",
    "Decision",
    "Denial",
    "ModeGuard",
    "Outcome",
    "PermissionEnforcer",
    "PermissionMode",
    "PersistRule",
    "RuleKind",
    "parse_permission_mode",
]

log = logging.getLogger("robotad.session.permissions")

RuleKind = Literal["allow", "ask", "deny"]
Outcome = Literal["allow", "ask", "deny"]
Source = Literal["rule", "mode"]

#: Refuses a mode transition by returning a reason, or allows it by returning None.
ModeGuard = Callable[[PermissionMode, PermissionMode], str | None]
#: Durably stores a project-scoped rule for the session's canonical cwd; raises on failure.
PersistRule = Callable[[str, RuleKind], Awaitable[None]]

RULE_KINDS: Final[tuple[RuleKind, ...]] = ("allow", "ask", "deny")
MODES: Final[tuple[PermissionMode, ...]] = get_args(PermissionMode)

MODE_TABLE: Final[Mapping[PermissionMode, Mapping[Risk, Outcome]]] = {
    "plan": {"inspect": "allow", "modify": "deny", "execute": "deny", "network": "ask"},
    "default": {"inspect": "allow", "modify": "ask", "execute": "ask", "network": "ask"},
    "acceptEdits": {"inspect": "allow", "modify": "allow", "execute": "ask", "network": "ask"},
    "bypassPermissions": {
        "inspect": "allow",
        "modify": "allow",
        "execute": "allow",
        "network": "allow",
    },
    "auto": {"inspect": "allow", "modify": "ask", "execute": "ask", "network": "ask"},
}

#: The tool whose deny rules a folder search also honours: what Read may not show, no search
#: shows either.
_READ_TOOL: Final = "Read"
#: Tools that show a file's contents as Read does: a deny rule of Read holds for them too.
_SHOWS_CONTENTS: Final = frozenset({"Grep"})

_VERB: Final[Mapping[Outcome, str]] = {"allow": "allows", "ask": "asks before", "deny": "denies"}


class Decision(Struct, frozen=True):
    """One evaluation. `rule` is the deciding pattern when `source` is ``"rule"``.
    `classifier_eligible` is True only for an ``ask`` in auto mode that needs no person.
    `real_path` is the path argument with its symlinks resolved, as judged (None for a call
    without a path): the file the call may reach, whatever its links say later."""

    outcome: Outcome
    reason: str
    source: Source
    rule: str | None = None
    classifier_eligible: bool = False
    real_path: str | None = None


class Denial(Struct, frozen=True):
    """A call this session refused, with why."""

    tool: str
    arguments: dict[str, Any]
    reason: str
    at: datetime


def parse_permission_mode(value: object, path: str = "$.mode") -> PermissionMode:
    """`value` as a permission mode, or `InvalidSetting` at `path`."""
    for mode in MODES:
        if value == mode:
            return mode
    raise InvalidSetting([{"path": path, "message": f"unknown permission mode {value!r}"}])


class PermissionEnforcer:
    """Decides tool calls for one session. `profiles` is read live, so a tool registered later
    is judged by its profile from then on. Construction refuses every malformed rule at
    ``$.permissions.<kind>[i]`` in one `InvalidSetting` (G-108) and auto mode without a
    classifier with `TransitionRefused` (G-107)."""

    def __init__(
        self,
        cwd: str | Path,
        *,
        profiles: Mapping[str, ToolProfile],
        rules: Mapping[str, Sequence[str]] | None = None,
        mode: str = "default",
        session_id: str = "",
        classifier_configured: bool = False,
        persist_project_rule: PersistRule | None = None,
        mode_guard: ModeGuard | None = None,
        protected: ProtectedPaths | None = None,
        sensitive: SensitivePaths | None = None,
        home: str | None = None,
        resolve_links: Callable[[str], str] = os.path.realpath,
        denial_limit: int = 50,
    ) -> None:
        self.cwd = Path(cwd)
        if not self.cwd.is_absolute():
            raise ValueError(f"a session cwd must be absolute, got {cwd!r}")
        self.session_id = session_id
        self.classifier_configured = classifier_configured
        self.persist_project_rule = persist_project_rule
        self._profiles = profiles
        self._home = home or os.path.expanduser("~")
        self._protected = protected or ProtectedPaths.default(home=self._home)
        self._resolve = resolve_links
        self._sensitive = sensitive or SensitivePaths(
            str(self.cwd), home=self._home, resolve=resolve_links
        )
        self._guard = mode_guard
        self._denials: collections.deque[Denial] = collections.deque(maxlen=denial_limit)
        # Rules compiled per (tool, profile), rebuilt after any rule is added.
        self._groups: dict[tuple[str, ToolProfile | None], dict[RuleKind, _RuleGroup]] = {}
        #: `_asked_for`'s answers, by (tool, searched folder); cleared when a rule is added.
        self._asked_roots: dict[tuple[str, str], set[str]] = {}
        issues: list[Issue] = []
        self._rules: dict[RuleKind, list[Rule]] = {kind: [] for kind in RULE_KINDS}
        for kind in RULE_KINDS:
            texts = (rules or {}).get(kind, ())
            if not isinstance(texts, list | tuple):
                issues.append({"path": f"$.permissions.{kind}", "message": "must be a list"})
                continue
            try:
                self._rules[kind] = parse_rules(texts, f"$.permissions.{kind}", profiles)
            except InvalidSetting as exc:
                issues.extend(exc.issues)
        unknown = sorted(set(rules or {}) - set(RULE_KINDS))
        issues.extend(
            {"path": f"$.permissions.{k}", "message": "unknown rule kind"} for k in unknown
        )
        try:
            self._mode = parse_permission_mode(mode, "$.permissionMode")
        except InvalidSetting as exc:
            issues.extend(exc.issues)
        if issues:
            raise InvalidSetting(issues)
        if self._mode == "auto" and not classifier_configured:
            raise TransitionRefused(session_id, "auto", "no classifier is configured")

    # -- modes -------------------------------------------------------------------------------

    @property
    def mode(self) -> PermissionMode:
        return self._mode

    def set_mode_guard(self, guard: ModeGuard | None) -> None:
        """Install (or, with None, remove) the synchronous transition guard (G-105, G-106)."""
        self._guard = guard

    def set_mode(self, mode: str) -> PermissionMode:
        """Enter `mode`, or raise: `InvalidSetting` for an unknown mode, `TransitionRefused` when
        the guard refuses or auto mode has no classifier. A refusal leaves the mode intact."""
        new = parse_permission_mode(mode)
        if new == "auto" and not self.classifier_configured:
            raise TransitionRefused(self.session_id, new, "no classifier is configured")
        if new != self._mode and self._guard is not None:
            reason = self._guard(self._mode, new)
            if reason is not None:
                raise TransitionRefused(self.session_id, new, reason)
        self._mode = new
        return new

    # -- rules -------------------------------------------------------------------------------

    def rules(self) -> dict[str, list[str]]:
        """``{allow, ask, deny}``, each in the order added."""
        return {kind: [rule.text for rule in self._rules[kind]] for kind in RULE_KINDS}

    def add_rule(self, text: str, kind: str) -> dict[str, list[str]]:
        """Add a session-scoped rule (a duplicate is a no-op); `InvalidSetting` at ``$.rule`` or
        ``$.kind`` when malformed."""
        rule, rule_kind = self._checked(text, kind)
        self._add(rule, rule_kind)
        return self.rules()

    async def add_project_rule(self, text: str, kind: str) -> dict[str, list[str]]:
        """Persist a rule for this cwd through the installed callback, then apply it here.
        Without a callback, or when it raises, `NotAllowed` and nothing is added (G-114)."""
        rule, rule_kind = self._checked(text, kind)
        await self._persist(rule.text, rule_kind)
        self._add(rule, rule_kind)
        return self.rules()

    async def remember(
        self, tool_name: str, arguments: Mapping[str, Any], scope: Literal["session", "project"]
    ) -> str | None:
        """Record "allow always" for this call as an allow rule projected from its argument
        (`consent_pattern`, G-113) and return the pattern; None when the tool has no argument
        to project from (then nothing is remembered and the answer counts for this call
        only). A project scope that cannot be persisted raises `NotAllowed` and remembers
        nothing, not even for the session (G-114)."""
        args = self.canonical_arguments(tool_name, arguments)
        text = consent_pattern(tool_name, args, self._profiles.get(tool_name), str(self.cwd))
        if text is None:
            return None
        rule = parse_rule(text, self._profiles.get(tool_name))
        if scope == "project":
            await self._persist(text, "allow")
        self._add(rule, "allow")
        return text

    def _checked(self, text: str, kind: str) -> tuple[Rule, RuleKind]:
        issues: list[Issue] = []
        rule: Rule | None = None
        try:
            rule = parse_rules([text], "$.rule", self._profiles)[0]
        except InvalidSetting as exc:
            issues.extend({**issue, "path": "$.rule"} for issue in exc.issues)
        rule_kind = next((k for k in RULE_KINDS if k == kind), None)
        if rule_kind is None:
            issues.append({"path": "$.kind", "message": f"unknown rule kind {kind!r}"})
        if issues or rule is None or rule_kind is None:
            raise InvalidSetting(issues)
        return rule, rule_kind

    async def _persist(self, text: str, kind: RuleKind) -> None:
        if self.persist_project_rule is None:
            raise NotAllowed("project-scoped rules need a persistence callback; none is installed")
        try:
            await self.persist_project_rule(text, kind)
        except Exception as exc:
            raise NotAllowed(f"the project rule could not be saved: {exc}") from exc

    def take_back(self, mode: PermissionMode, rules: Mapping[str, Sequence[str]]) -> None:
        """Undo a change whose save was refused: `mode` again (no guard asked: it was held)
        and no rule that `rules`, what `rules()` said before the change, does not hold."""
        self._mode = mode
        for kind in RULE_KINDS:
            self._rules[kind] = [r for r in self._rules[kind] if r.text in rules.get(kind, ())]
        self._groups.clear()
        self._asked_roots.clear()

    def _add(self, rule: Rule, kind: RuleKind) -> None:
        if all(existing.text != rule.text for existing in self._rules[kind]):
            self._rules[kind].append(rule)
            self._groups.clear()
            self._asked_roots.clear()

    # -- denials -----------------------------------------------------------------------------

    def note_denial(self, tool_name: str, arguments: Mapping[str, Any], reason: str) -> None:
        """Record a refused call (by a rule, the mode, a hook, the classifier or a person)."""
        self._denials.appendleft(Denial(tool_name, dict(arguments), reason, utc_now()))

    def recent_denials(self) -> list[Denial]:
        """Refused calls, newest first, at most `denial_limit` of them."""
        return list(self._denials)

    # -- evaluation --------------------------------------------------------------------------

    def canonical_arguments(self, tool_name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """`arguments` with the tool's path argument canonicalised against the cwd (G-116).
        A value that names no path (empty, NUL, not a string) is left for the tool to refuse."""
        args = dict(arguments)
        profile = self._profiles.get(tool_name)
        if profile is not None and profile.argument_kind == "path" and profile.argument_key:
            key = profile.argument_key
            value = args.get(key)
            if isinstance(value, str):
                with contextlib.suppress(ArgumentError):
                    args[key] = canonical_path(value, self.cwd)
            anchor = profile.anchor_key
            pattern = args.get(anchor) if anchor else None
            root = args.get(key, str(self.cwd))
            if anchor and isinstance(pattern, str) and isinstance(root, str) and root[:1] == "/":
                # Glob's "~/.ssh/*" searches ~/.ssh: that folder is the path rules judge.
                with contextlib.suppress(ValueError):
                    base, rest = split_anchor(pattern, root)
                    if rest != pattern:
                        args[key], args[anchor] = base, rest
        return args

    def evaluate(self, tool_name: str, arguments: Mapping[str, Any]) -> Decision:
        """Decide one call: deny rules, ask rules, allow rules, then the mode table; a
        sensitive path asks unless the mode is ``bypassPermissions`` (see the module doc)."""
        profile = self._profiles.get(tool_name)
        call = _Call(self, tool_name, profile, self.canonical_arguments(tool_name, arguments))
        decision = self._decide(call, tool_name, profile)
        if not call.paths:
            return decision
        return msgspec.structs.replace(decision, real_path=call.paths[-1])

    def _decide(self, call: _Call, tool_name: str, profile: ToolProfile | None) -> Decision:
        if (rule := call.caught_by("deny")) is not None:
            return Decision("deny", f"denied by rule {rule.text}", "rule", rule.text)
        if tool_name in _SHOWS_CONTENTS and (rule := self._read_rule(call, "deny")) is not None:
            return Decision(
                "deny",
                f"denied by rule {rule.text}: {tool_name} shows what Read may not",
                "rule",
                rule.text,
            )
        if (rule := call.caught_by("ask")) is not None:
            return Decision("ask", f"rule {rule.text} asks for approval", "rule", rule.text)
        if tool_name in _SHOWS_CONTENTS and (rule := self._read_rule(call, "ask")) is not None:
            reason = f"rule {rule.text} asks for approval: {tool_name} shows what Read would"
            return Decision("ask", reason, "rule", rule.text)
        bypass = self._mode == "bypassPermissions"
        sensitive = None if bypass else call.sensitive()
        if (rule := call.admitted()) is not None and (sensitive is None or _names_path(rule)):
            return Decision("allow", f"allowed by rule {rule.text}", "rule", rule.text)
        risk: Risk = profile.risk if profile is not None else "execute"
        outcome = MODE_TABLE[self._mode][risk]
        what = f"{risk} tools" if profile is not None else f"unknown tool {tool_name}"
        reason = f"{self._mode} mode {_VERB[outcome]} {what}"
        if outcome != "deny" and sensitive is not None:
            return Decision(
                "ask", f"{sensitive}; it asks in every mode but bypassPermissions", "mode"
            )
        if outcome == "ask" and profile is not None and profile.confined:
            # The sandbox, not a person, bounds a confined call (PROTOCOL.md §10.4).
            return Decision("allow", f"{self._mode} mode allows sandboxed {risk} tools", "mode")
        if outcome == "allow" and self._mode == "acceptEdits" and call.outside_workspace():
            return Decision(
                "ask", f"{reason} only inside the workspace; this path is outside it", "mode"
            )
        if outcome != "ask" or self._mode != "auto":
            return Decision(outcome, reason, "mode")
        hazard = call.hazard()
        if hazard is not None:
            return Decision("ask", f"{reason}: {hazard} needs a person", "mode")
        return Decision("ask", reason, "mode", classifier_eligible=True)

    def withholds(self, tool_name: str, path: str, root: str) -> bool:
        """Whether a search by `tool_name` (Grep walking the folder `root`) must skip the file
        `path`: one a deny rule of `tool_name` or of ``Read`` covers (in every mode: rules
        come first); one an ask rule of either covers, unless every such rule covers `root`
        too (they asked before the search began: ``Grep`` asks for every search, and an
        approved one shows what it found); or a protected secret (§10.7) in any mode but
        bypassPermissions, unless an allow rule names it. Reads rules only; safe to call
        from the search's worker thread."""
        profile = self._profiles.get(tool_name)
        if profile is None or not profile.argument_key:
            return False
        call = _Call(self, tool_name, profile, {profile.argument_key: path})
        if call.caught_by("deny") is not None or self._read_rule_of(path, "deny", tool_name):
            return True
        asking = self._asking(call, tool_name)
        if asking and not asking <= self._asked_for(tool_name, profile, root):
            return True
        if self._mode == "bypassPermissions" or call.sensitive() is None:
            return False
        rule = call.admitted()
        return rule is None or not _names_path(rule)

    def hides(self, tool_name: str, path: str) -> bool:
        """Whether a deny rule of `tool_name` covers `path` (a listing leaves it out: a
        pattern such as ``~/[.]ssh/*`` reaches a folder its path never named)."""
        profile = self._profiles.get(tool_name)
        if profile is None or not profile.argument_key:
            return False
        return (
            _Call(self, tool_name, profile, {profile.argument_key: path}).caught_by("deny")
            is not None
        )

    def _asking(self, call: _Call, tool_name: str) -> set[str]:
        """Every ask rule of `tool_name` or of ``Read`` that catches `call` (by text)."""
        asking = {rule.text for rule in call.caught_all("ask")}
        read = self._profiles.get(_READ_TOOL)
        if tool_name != _READ_TOOL and read is not None and read.argument_key is not None:
            for path in call.paths:
                reading = _Call(self, _READ_TOOL, read, {read.argument_key: path})
                asking |= {rule.text for rule in reading.caught_all("ask")}
        return asking

    def _asked_for(self, tool_name: str, profile: ToolProfile, root: str) -> set[str]:
        """The ask rules a search of `root` by `tool_name` asked under, kept per root until
        the rules change (a folder search asks this for every file it opens)."""
        key = (tool_name, root)
        asked = self._asked_roots.get(key)
        if asked is None:
            argument = {profile.argument_key or "path": root}
            asked = self._asking(_Call(self, tool_name, profile, argument), tool_name)
            if len(self._asked_roots) >= _ASKED_ROOTS_KEPT:
                self._asked_roots.clear()
            self._asked_roots[key] = asked
        return asked

    def _read_rule(self, call: _Call, kind: Literal["deny", "ask"]) -> Rule | None:
        """The `kind` rule of ``Read`` that covers the path `call` reads (as written, or its
        real path), if any."""
        return next((r for p in call.paths if (r := self._read_rule_of(p, kind))), None)

    def _read_rule_of(
        self, path: str, kind: Literal["deny", "ask"], tool_name: str | None = None
    ) -> Rule | None:
        """The `kind` rule of ``Read`` covering `path` (a search must not show what Read may
        not, or would ask for); None when `tool_name`, the searching tool, is Read itself."""
        read = self._profiles.get(_READ_TOOL)
        if tool_name == _READ_TOOL:
            return None
        if read is None or read.argument_kind != "path" or read.argument_key is None:
            return None
        return _Call(self, _READ_TOOL, read, {read.argument_key: path}).caught_by(kind)

    def exempts(self, tool_name: str, host: str) -> bool:
        """Whether an allow rule of `tool_name` names exactly `host` (``WebFetch(domain:HOST)``,
        not a parent domain): the address guard lets a fetch reach it whatever its address
        (§10.7). `host` is spelled as rules spell it (`patterns.url_host`)."""
        return any(
            rule.form == "domain" and rule.tool == tool_name and rule.host == host
            for rule in self._rules["allow"]
        )

    def _groups_for(
        self, tool_name: str, profile: ToolProfile | None
    ) -> dict[RuleKind, _RuleGroup]:
        key = (tool_name, profile)
        groups = self._groups.get(key)
        if groups is None:
            cwd = str(self.cwd)

            def compile_one(rule: Rule) -> Matcher:
                return compile_rule(rule, profile, cwd, home=self._home, resolve=self._resolve)

            groups = {
                kind: _RuleGroup(
                    [
                        r
                        for r in self._rules[kind]
                        if r.tool == ANY_TOOL
                        or rule_covers(r.tool, tool_name, profile.rule_names if profile else ())
                    ],
                    compile_one,
                    too_slow_catches=kind != "allow",
                )
                for kind in RULE_KINDS
            }
            self._groups[key] = groups
        return groups


def _names_path(rule: Rule) -> bool:
    """Whether an allow rule names a path: an argument pattern with literal text (``Read``,
    ``Read(**)`` do not; ``Read(~/.ssh/id_ed25519.pub)`` and ``Read(.env)`` do)."""
    return rule.scoped and any(piece not in (WILDCARD, "/") for piece in rule.pieces)


#: Searched folders whose ask rules `withholds` keeps at once (a search asks about one).
_ASKED_ROOTS_KEPT = 64


class _RuleGroup:
    """The rules of one kind that apply to one tool, compiled for its profile. All regex
    rules are also joined into one alternation, so a value no rule matches costs one scan.

    A rule whose pattern cannot tell within `MATCH_TIME_LIMIT` whether it catches a value
    fails closed (decision 40): a deny or ask rule catches it, an allow rule does not."""

    def __init__(
        self,
        rules: Sequence[Rule],
        compile_one: Callable[[Rule], Matcher],
        *,
        too_slow_catches: bool,
    ) -> None:
        self.bares = [rule for rule in rules if not rule.scoped]
        self.bare = self.bares[0] if self.bares else None
        self.matchers = [compile_one(rule) for rule in rules if rule.scoped]
        self.exact = [
            m for m in self.matchers if m.rule.form == "glob" and WILDCARD not in m.rule.pieces
        ]
        patterns = [f"(?:{m.regex.pattern})" for m in self.matchers if m.regex is not None]
        self.any_regex = compile_pattern("|".join(patterns)) if patterns else None
        self.has_domains = any(m.regex is None for m in self.matchers)
        self.too_slow_catches = too_slow_catches

    def first(self, value: str) -> Rule | None:
        """The first argument-scoped rule matching `value`."""
        return next(self.matching(value), None)

    def matching(self, value: str) -> Iterator[Rule]:
        """Every argument-scoped rule matching `value`, in order (none after one scan of the
        joined alternation when no rule can)."""
        if not self.has_domains and not self._any_may_catch(value):
            return iter(())
        return (m.rule for m in self.matchers if self.catches(m, value))

    def exactly(self, value: str) -> Rule | None:
        """The first rule naming `value` exactly (no wildcard) that catches it."""
        return next((m.rule for m in self.exact if self.catches(m, value)), None)

    def catches(self, matcher: Matcher, value: str) -> bool:
        """Whether `matcher` catches `value`, failing closed when it cannot tell in time."""
        try:
            return matcher.matches(value)
        except TimeoutError:
            log.warning(
                "the rule %s could not be matched against a value of %d characters within "
                "%g s; it counts as %s",
                matcher.rule.text,
                len(value),
                MATCH_TIME_LIMIT,
                "catching it" if self.too_slow_catches else "not catching it",
            )
            return self.too_slow_catches

    def _any_may_catch(self, value: str) -> bool:
        if self.any_regex is None:
            return False
        try:
            return self.any_regex.fullmatch(value, timeout=MATCH_TIME_LIMIT) is not None
        except TimeoutError:
            return True  # each rule on its own then


class _Call:
    """One call's effective values, as the rule checks of `evaluate` read them."""

    def __init__(
        self,
        enforcer: PermissionEnforcer,
        tool_name: str,
        profile: ToolProfile | None,
        arguments: Mapping[str, Any],
    ) -> None:
        self.enforcer = enforcer
        self.groups = enforcer._groups_for(tool_name, profile)
        self.kind = profile.argument_kind if profile is not None else None
        self.risk = profile.risk if profile is not None else None
        value: object = None
        if profile is not None and profile.argument_key is not None:
            value = arguments.get(profile.argument_key)
            if value is None and self.kind == "path":
                value = str(enforcer.cwd)  # an omitted path (Glob, Grep) means the cwd
        self.value = value if isinstance(value, str) else None
        #: The spellings every rule is tried on: both of a path, every part of a command.
        self.paths: list[str] = []
        self.parts: list[str] | None = None
        #: Further spellings of the parts that deny and ask rules also see (`command_spellings`).
        self.respelled: list[str] = []
        if self.value is not None and self.kind == "path":
            try:
                real = enforcer._resolve(self.value)
            except (OSError, ValueError):  # a NUL byte or a loop: no second spelling to judge
                real = self.value
            self.paths = [self.value] if real == self.value else [self.value, real]
        elif self.value is not None and self.kind == "command":
            self.parts = split_compound(self.value)
            pieces = [*(self.parts or [self.value]), *rough_parts(self.value)]
            for piece in dict.fromkeys(pieces):
                self.respelled.extend([piece, *command_spellings(piece)])

    def caught_all(self, kind: RuleKind) -> list[Rule]:
        """Every rule of `kind` catching any spelling or any part of the call."""
        group = self.groups[kind]
        caught = list(group.bares)
        if self.value is not None:
            for spelling in self.paths or [self.value, *(self.parts or ()), *self.respelled]:
                caught.extend(group.matching(spelling))
        return caught

    def caught_by(self, kind: RuleKind) -> Rule | None:
        """The first deny/ask rule catching any spelling or any part of the call."""
        group = self.groups[kind]
        if group.bare is not None:
            return group.bare
        if self.value is None:
            return None
        for spelling in self.paths or [self.value, *(self.parts or ()), *self.respelled]:
            if (rule := group.first(spelling)) is not None:
                return rule
        return None

    def admitted(self) -> Rule | None:
        """The allow rule admitting the call: every spelling of a path, every part of a
        command (or the exact command), the value otherwise."""
        group = self.groups["allow"]
        if group.bare is not None:
            return group.bare
        if self.value is None:
            return None
        if self.kind == "command":
            exact = group.exactly(self.value)
            if exact is not None or not self.parts:
                return exact
        spellings = self.paths or self.parts or [self.value]
        hits = [self._admitting(group, spelling) for spelling in spellings]
        return None if None in hits else hits[0]

    def _admitting(self, group: _RuleGroup, spelling: str) -> Rule | None:
        """The allow rule admitting one spelling. A command part writing a file (by
        redirection or an option) or running a program an option names is admitted only by a
        rule naming it exactly: ``Bash(echo:*)`` must not admit ``echo x >> ~/.bashrc``, nor
        ``Bash(rg:*)`` ``rg --pre ./x foo``."""
        if self.kind == "command" and writes_or_runs(spelling):
            return group.exactly(spelling)
        return group.first(spelling)

    def sensitive(self) -> str | None:
        """Why a path call needs a person in every mode but bypassPermissions, if it does: a
        read of a protected secret, or a write to a persistence path (§10.7)."""
        if self.kind != "path" or self.risk not in ("inspect", "modify"):
            return None
        sensitive = self.enforcer._sensitive
        check = sensitive.protected_read if self.risk == "inspect" else sensitive.persistence
        for path in self.paths:
            pattern = check(path)
            if pattern is not None:
                what = (
                    "reading a protected secret"
                    if self.risk == "inspect"
                    else ("writing a persistence path")
                )
                return f"{path} matches {pattern}: {what}"
        return None

    def outside_workspace(self) -> bool:
        """Whether a write leaves the workspace: any spelling of its path outside it."""
        if self.kind != "path" or self.risk != "modify":
            return False
        return any(not self.enforcer._sensitive.in_workspace(path) for path in self.paths)

    def hazard(self) -> str | None:
        """What makes this call need a person in auto mode, if anything (G-122)."""
        protected = self.enforcer._protected
        if self.kind == "path" and any(protected.covers(path) for path in self.paths):
            return "a protected path"
        if self.kind == "command" and self.value is not None:
            cwd, home = str(self.enforcer.cwd), self.enforcer._home
            if is_critical_removal(self.value, cwd, home):
                return "a critical removal"
            if protected.touched_by(self.value, cwd):
                return "a protected path"
            if self.enforcer._sensitive.touched_by(self.value):
                return "a secret or persistence path"
        return None
