"""A sandboxed Bash call in the mode table (PROTOCOL.md §10.4): where a mode would ask, the
sandbox bounds the call instead; rules still come first and ``plan`` still denies."""

from __future__ import annotations

from pathlib import Path

import pytest

from robotad.agent.tool import ToolProfile
from robotad.sandbox import Confinement, SandboxPolicy
from robotad.session.permissions.enforcer import PermissionEnforcer
from robotad.tools import BashTool

PLAIN = ToolProfile("execute", "command", "command")
CONFINED = ToolProfile("execute", "command", "command", confined=True)
WRITE = ToolProfile("modify", "file_path", "path")


def _decide(tmp_path: Path, profile: ToolProfile, mode: str, **rules: list[str]) -> str:
    enforcer = PermissionEnforcer(
        tmp_path,
        profiles={"Bash": profile, "Write": WRITE},
        rules=rules,
        mode=mode,
        classifier_configured=True,
    )
    return enforcer.evaluate("Bash", {"command": "make test"}).outcome


@pytest.mark.parametrize("mode", ["default", "acceptEdits", "auto"])
def test_a_confined_call_runs_without_asking(tmp_path: Path, mode: str) -> None:
    assert _decide(tmp_path, PLAIN, mode) == "ask"
    assert _decide(tmp_path, CONFINED, mode) == "allow"


def test_plan_mode_stays_read_only(tmp_path: Path) -> None:
    assert _decide(tmp_path, CONFINED, "plan") == "deny"


def test_ask_and_deny_rules_still_decide(tmp_path: Path) -> None:
    assert _decide(tmp_path, CONFINED, "default", ask=["Bash(make:*)"]) == "ask"
    assert _decide(tmp_path, CONFINED, "default", deny=["Bash(make:*)"]) == "deny"
    assert _decide(tmp_path, CONFINED, "bypassPermissions", deny=["Bash"]) == "deny"


def test_writes_are_not_waved_through(tmp_path: Path) -> None:
    enforcer = PermissionEnforcer(tmp_path, profiles={"Write": WRITE}, mode="default")
    assert enforcer.evaluate("Write", {"file_path": "a", "content": ""}).outcome == "ask"


def test_bash_is_confined_exactly_when_its_session_is() -> None:
    assert not BashTool().profile.confined
    assert not BashTool(Confinement(SandboxPolicy(mode="off"))).profile.confined
    assert BashTool(Confinement(SandboxPolicy(mode="read-only"))).profile.confined
    assert BashTool.profile == PLAIN  # the class default is untouched
