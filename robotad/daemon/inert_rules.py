"""The MCP rules an earlier robotad took and robotad now refuses, left out where they are found.

Two kinds of rule never matched a call: an argument pattern on an MCP tool or server
(``mcp__files__write(/etc/**)``: MCP tools have no argument a pattern could match, decision 73)
and an MCP tool or server named with ``mcp__`` in another case (``Mcp__files__write``: the name
of every tool offered starts with ``mcp__`` itself and a rule's name is compared exactly,
decision 81). Wherever a rule enters robotad now refuses both, but stored state written before
may hold one — a session's record, a project's rule file, an export of a session not loaded
since. Refusing it there would refuse the session (a project's file, every session of its
folder), for a rule that changes no call. So `kept_rules` takes each out of a list, and
`log_left_out` names it in robotad's log: whose rules they were, the rule, and what to write
instead (`patterns.mcp_rule_refusal`'s words, the same a new rule is refused with). An
import's other rules are still refused at their own paths: `as_given` locates a refusal of
the rules kept at the place each had among the rules given.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from protocol.errors import Issue
from robotad.session.permissions.patterns import mcp_rule_refusal

__all__ = ["LeftOut", "as_given", "kept_rules", "log_left_out", "without_inert_rules"]

log = logging.getLogger("robotad.daemon")

_RULE_KINDS: Final = ("allow", "ask", "deny")


@dataclass(frozen=True, slots=True)
class LeftOut:
    """One rule left out: its kind, its place in that kind's list, its text, and why it never
    applied (what to write)."""

    kind: str
    index: int
    text: str
    refusal: str


def kept_rules(
    rules: Mapping[str, Sequence[str]],
) -> tuple[dict[str, list[str]], list[LeftOut]]:
    """``{allow, ask, deny}`` of `rules` without the rules the module doc names, and those
    rules, in their order. Writes no log (see `log_left_out`)."""
    kept: dict[str, list[str]] = {}
    left_out: list[LeftOut] = []
    for kind in _RULE_KINDS:
        kept[kind] = []
        for index, text in enumerate(rules.get(kind, ())):
            refusal = mcp_rule_refusal(text)
            if refusal is None:
                kept[kind].append(text)
            else:
                left_out.append(LeftOut(kind, index, text, refusal))
    return kept, left_out


def log_left_out(whose: str, left_out: Sequence[LeftOut]) -> None:
    """A warning in robotad's log for each rule of `left_out`, naming `whose` rules it was."""
    for rule in left_out:
        log.warning(
            "%s: the %s rule %r is left out, as it never applied to a call: %s",
            whose,
            rule.kind,
            rule.text,
            rule.refusal,
        )


def without_inert_rules(rules: Mapping[str, Sequence[str]], whose: str) -> dict[str, list[str]]:
    """`kept_rules` of `rules`, each rule left out named in robotad's log (`log_left_out`)."""
    kept, left_out = kept_rules(rules)
    log_left_out(whose, left_out)
    return kept


def as_given(issues: Sequence[Issue], where: str, left_out: Sequence[LeftOut]) -> list[Issue]:
    """`issues` of the rules `kept_rules` kept, each at the place its rule had in the rules
    given: ``{where}.deny[1]`` becomes ``{where}.deny[2]`` when ``deny[0]`` was left out.
    `where` is the path of those rules (``$.artifact.record.settings.permissions``); an issue
    elsewhere is kept as it is."""
    found = re.compile(re.escape(where) + r"\.(allow|ask|deny)\[(\d+)\]")
    located: list[Issue] = []
    for issue in issues:
        match = found.match(issue["path"])
        if match is None:
            located.append(issue)
            continue
        kind, index = match[1], int(match[2])
        for rule in left_out:  # in list order: each one left out before it moves it on
            if rule.kind == kind and rule.index <= index:
                index += 1
        path = f"{where}.{kind}[{index}]{issue['path'][match.end() :]}"
        located.append({**issue, "path": path})
    return located
