"""A rule's pattern never holds the daemon (decision 40): a pattern of several ``*`` backtracks
on a long argument the model chose — ``Read(**/a/**/b/**/c/**)`` took 5.5 s on a 4 KB path
with Python's ``re``, ``Bash(*a*b*c*d)`` minutes on 200 KB — and the enforcer runs on the event
loop every session shares. A match that cannot tell within `MATCH_TIME_LIMIT` fails closed: a
deny or ask rule catches the call, an allow rule does not admit it, a protected path is one.

Nothing here times anything: without the bound each check below runs for minutes, past the
suite's per-test timeout."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from robotad.agent.tool import ToolProfile
from robotad.session.permissions.enforcer import PermissionEnforcer
from robotad.session.permissions.sensitive_paths import SensitivePaths

PROFILES = {
    "Read": ToolProfile("inspect", "file_path", "path"),
    "Bash": ToolProfile("execute", "command", "command"),
}
#: A command that nearly matches ``*a*b*c*d`` everywhere: 200 KB of ``ab``.
LONG_COMMAND = "ab" * 100_000
#: A path that nearly matches ``**/a/**/b/**/c/**`` everywhere.
LONG_PATH = "/a/b" * 2_000 + "/x"


def gate(cwd: Path, **rules: list[str]) -> PermissionEnforcer:
    return PermissionEnforcer(cwd, profiles=PROFILES, home="/home/me", rules=rules)


def test_a_deny_rule_that_cannot_tell_in_time_denies(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    enforcer = gate(tmp_path, allow=["Bash"], deny=["Bash(*a*b*c*d)"])
    with caplog.at_level(logging.WARNING, logger="robotad.session.permissions"):
        decision = enforcer.evaluate("Bash", {"command": LONG_COMMAND})
    assert (decision.outcome, decision.rule) == ("deny", "Bash(*a*b*c*d)")
    assert "Bash(*a*b*c*d) could not be matched against a value of 200000 characters" in (
        caplog.text
    )
    assert "counts as catching it" in caplog.text
    assert enforcer.evaluate("Bash", {"command": "abcd"}).outcome == "deny"
    assert enforcer.evaluate("Bash", {"command": "ls"}).outcome == "allow"


def test_an_ask_rule_that_cannot_tell_in_time_asks(tmp_path: Path) -> None:
    enforcer = gate(tmp_path, allow=["Bash"], ask=["Bash(*a*b*c*d)"])
    decision = enforcer.evaluate("Bash", {"command": LONG_COMMAND})
    assert (decision.outcome, decision.rule) == ("ask", "Bash(*a*b*c*d)")


def test_an_allow_rule_that_cannot_tell_in_time_does_not_admit(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    enforcer = gate(tmp_path, allow=["Bash(*a*b*c*d)"])
    with caplog.at_level(logging.WARNING, logger="robotad.session.permissions"):
        decision = enforcer.evaluate("Bash", {"command": LONG_COMMAND})
    assert decision.outcome == "ask"  # the default mode's answer for a command
    assert decision.rule is None
    assert "counts as not catching it" in caplog.text
    assert enforcer.evaluate("Bash", {"command": "a b c d"}).outcome == "allow"


def test_a_path_rule_that_cannot_tell_in_time_fails_closed(tmp_path: Path) -> None:
    enforcer = gate(tmp_path, deny=["Read(**/a/**/b/**/c/**)"])
    decision = enforcer.evaluate("Read", {"file_path": str(tmp_path) + LONG_PATH})
    assert (decision.outcome, decision.rule) == ("deny", "Read(**/a/**/b/**/c/**)")
    assert enforcer.evaluate("Read", {"file_path": "x/a/b/c/d"}).outcome == "deny"
    assert enforcer.evaluate("Read", {"file_path": "x/a/b/d"}).outcome == "allow"


def test_a_protected_path_pattern_that_cannot_tell_in_time_protects(tmp_path: Path) -> None:
    paths = SensitivePaths(str(tmp_path), home="/home/me", protected_reads=["**/a/**/b/**/c/**"])
    assert paths.protected_read(LONG_PATH) == "**/a/**/b/**/c/**"
    assert paths.protected_read("/a/b/d") is None
