"""Decision 68: every name offered for an MCP server's tools keeps ``mcp__SERVER__`` whole, so
a rule ``mcp__SERVER`` and a hook matcher ``mcp__SERVER__.*`` cover each of them; a server name
too long for that is refused (config, ``session/create``) or never started (a stored session);
a rule naming a tool by its full name covers it however its name was cut."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import trio

from protocol.methods import MCP_SERVER_NAME_MAX
from protocol.validate import ValidationFailed
from robotad.agent.tool import ToolProfile
from robotad.config import decode_config
from robotad.mcp.config import ServerSpec, wire_issues
from robotad.mcp.naming import (
    MAX_SERVER_NAME,
    MAX_TOOL_NAME,
    model_tool_name,
    model_tool_names,
    rule_covers,
    rule_names,
    sanitise,
)
from robotad.mcp.server import McpServer
from robotad.session.hooks.config import parse_hooks_config
from robotad.session.permissions.enforcer import PermissionEnforcer

#: The longest server name robotad takes, and one character more.
LONGEST = ("a-server-named-as-long-as-robotad-allows" + "x" * MAX_SERVER_NAME)[:MAX_SERVER_NAME]
TOO_LONG = LONGEST + "y"
#: Two tools whose names share far more than a cut name keeps of them.
WEATHER_BY_NAME = "fetch_the_weather_forecast_for_a_city_by_its_name"
WEATHER_BY_CODE = "fetch_the_weather_forecast_for_a_city_by_its_code"
TOOLS = ["echo", "x", WEATHER_BY_NAME, WEATHER_BY_CODE, "read.file", "read_file", "z" * 200]


def test_the_limit_leaves_room_for_a_tool_part_with_its_hash() -> None:
    """The wire's limit is the one robotad checks; at it, a cut tool part keeps 7 of the
    tool's characters before ``_`` and eight hex digits."""
    assert MAX_SERVER_NAME == MCP_SERVER_NAME_MAX == 41
    cut = model_tool_name(LONGEST, WEATHER_BY_NAME)
    assert len(cut) == MAX_TOOL_NAME
    assert cut.startswith(f"mcp__{LONGEST}__fetch_t_")
    with pytest.raises(ValueError, match="longer than 41"):
        model_tool_name(TOO_LONG, "echo")


def test_every_name_offered_keeps_the_whole_server_prefix() -> None:
    """For every server length robotad takes and tools short and long, each name fits the
    providers' 64, starts with ``mcp__SERVER__`` and is covered by the rule ``mcp__SERVER`` by
    its name alone — and by no other server's rule."""
    for length in range(1, MAX_SERVER_NAME + 1):
        server = LONGEST[:length].rstrip("-") or "s"
        for name in model_tool_names(server, TOOLS):
            assert len(name) <= MAX_TOOL_NAME, name
            assert name.startswith(f"mcp__{server}__"), name
            assert rule_covers(f"mcp__{server}", name)
            assert not rule_covers(f"mcp__{server}x", name)
            if length > 1:
                assert not rule_covers(f"mcp__{server[:-1]}", name)


def _cut_as_before(server: str, tool: str, hashed: bool) -> str:
    """How names were cut before decision 68: the whole name, then ``_`` and the hash."""
    full = f"mcp__{server}__{sanitise(tool)}"
    if len(full) <= MAX_TOOL_NAME and not hashed:
        return full
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:8]
    return f"{full[: MAX_TOOL_NAME - 9]}_{digest}"


def test_names_robotad_took_before_are_offered_as_before() -> None:
    """For every server name robotad takes, each tool keeps the name it had: a session's
    history and the "always" rules written for it keep meaning the same tool."""
    for length in range(1, MAX_SERVER_NAME + 1):
        server = LONGEST[:length].rstrip("-") or "s"
        for tool in TOOLS:
            for hashed in (False, True):
                assert model_tool_name(server, tool, hashed=hashed) == _cut_as_before(
                    server, tool, hashed
                )


def test_long_tools_cut_alike_stay_apart() -> None:
    """Two long tools whose cut names share their head end in different hashes; the same tool
    always gets the same name."""
    by_name, by_code = model_tool_names(LONGEST, [WEATHER_BY_NAME, WEATHER_BY_CODE])
    assert by_name != by_code
    assert by_name[:-8] == by_code[:-8]
    assert model_tool_names(LONGEST, [WEATHER_BY_NAME]) == [by_name]


def _mcp_enforcer(
    tmp_path: Path, server: str, tools: list[str], **rules: list[str]
) -> tuple[PermissionEnforcer, list[str]]:
    """An enforcer over `server`'s `tools` with the profiles `McpTool` gives them (in plan
    mode, so only an allow rule lets a call through), and the tools' offered names."""
    names = model_tool_names(server, tools)
    profiles = {
        name: ToolProfile(risk="execute", rule_names=rule_names(server, tool))
        for name, tool in zip(names, tools, strict=True)
    }
    enforcer = PermissionEnforcer(tmp_path, profiles=profiles, rules=rules, mode="plan")
    return enforcer, names


def test_a_server_rule_covers_every_tool_of_the_longest_server(tmp_path: Path) -> None:
    """The reviewer's case: ``deny = ["mcp__SERVER"]`` for a server with a name as long as
    robotad takes denies each of its tools, a cut one included; an allow rule on it lets each
    through."""
    denying, names = _mcp_enforcer(tmp_path, LONGEST, TOOLS, deny=[f"mcp__{LONGEST}"])
    for name in names:
        decision = denying.evaluate(name, {})
        assert (decision.outcome, decision.rule) == ("deny", f"mcp__{LONGEST}"), name
    allowing, _ = _mcp_enforcer(tmp_path, LONGEST, TOOLS, allow=[f"mcp__{LONGEST}"])
    assert {allowing.evaluate(name, {}).outcome for name in names} == {"allow"}


def test_a_rule_naming_a_tools_full_name_covers_that_tool(tmp_path: Path) -> None:
    """A rule may name a tool whose offered name was cut by its full name: it covers that
    tool and not the other whose cut name starts alike. The offered name works as a rule too.
    ``mcp__c__read_file`` names both tools whose names clean to it (``read.file`` too)."""
    full = f"mcp__{LONGEST}__{WEATHER_BY_NAME}"
    enforcer, names = _mcp_enforcer(tmp_path, LONGEST, TOOLS, deny=[full])
    by_name, by_code = names[2], names[3]
    assert enforcer.evaluate(by_name, {}).rule == full
    assert enforcer.evaluate(by_code, {}).source == "mode"  # plan mode's deny, no rule's
    enforcer, _ = _mcp_enforcer(tmp_path, LONGEST, TOOLS, deny=[by_code])
    assert enforcer.evaluate(by_code, {}).rule == by_code
    assert enforcer.evaluate(by_name, {}).source == "mode"
    enforcer, names = _mcp_enforcer(
        tmp_path, "c", ["read_file", "read.file", "echo"], allow=["mcp__c__read_file"]
    )
    assert [enforcer.evaluate(name, {}).outcome for name in names] == ["allow", "allow", "deny"]
    assert names[1] != "mcp__c__read_file"


def test_a_server_rule_holds_no_separator_and_no_trailing_underscore() -> None:
    """By name alone, ``mcp__a_`` names no server (a server name does not end in ``_``), so it
    does not cover ``mcp__a___private``, a tool of server ``a`` whose name starts with ``_``."""
    assert rule_covers("mcp__a", "mcp__a___private")
    assert not rule_covers("mcp__a_", "mcp__a___private")
    assert not rule_covers("mcp__", "mcp____x")
    assert not rule_covers("mcp__a__b", "mcp__a__b__c")


def test_a_hook_matcher_on_the_server_selects_every_tool_of_the_longest_server() -> None:
    """Hook matchers are searched in the offered names: ``mcp__SERVER__.*`` (and
    ``^mcp__SERVER__``) select each tool of the longest server, not another server's."""
    hook = [{"type": "command", "command": "true"}]
    config = parse_hooks_config(
        {
            "PreToolUse": [
                {"matcher": f"mcp__{LONGEST}__.*", "hooks": hook},
                {"matcher": f"^mcp__{LONGEST}__", "hooks": hook},
            ]
        }
    )
    for group in config["PreToolUse"]:
        for name in model_tool_names(LONGEST, TOOLS):
            assert group.selects(name), name
        assert not group.selects(f"mcp__{LONGEST[:-1]}__echo")


def test_config_takes_the_longest_name_and_refuses_one_more_located() -> None:
    """``[mcp_servers.NAME]`` of 41 characters starts; of 42 (or the 57 that once made tools
    no rule of the server covered) it is a start-up error at its path, saying why."""
    config = decode_config(f'[mcp_servers.{LONGEST}]\ncommand = "x"\n')
    assert LONGEST in config.mcp_servers
    fifty_seven = LONGEST + "q" * 16
    with pytest.raises(ValidationFailed) as refused:
        decode_config(
            f'[mcp_servers.{TOO_LONG}]\ncommand = "x"\n[mcp_servers.{fifty_seven}]\ncommand = "x"\n'
        )
    issues = {issue["path"]: issue["message"] for issue in refused.value.issues}
    assert set(issues) == {f'mcp_servers."{TOO_LONG}"', f'mcp_servers."{fifty_seven}"'}
    assert issues[f'mcp_servers."{TOO_LONG}"'].startswith(
        "a server name has at most 41 characters (this one has 42)"
    )


def test_a_session_server_one_character_too_long_is_refused_located() -> None:
    """``session/create``'s check: the longest name passes, one more is refused at its name."""
    servers = [{"name": LONGEST, "command": "x"}, {"name": TOO_LONG, "command": "x"}]
    issues = wire_issues(servers)
    assert [issue["path"] for issue in issues] == ["$.mcpServers[1].name"]
    assert "at most 41 characters" in issues[0]["message"]


async def test_a_stored_server_whose_name_is_too_long_never_starts() -> None:
    """A session stored before such names were refused loads as it was; its server fails
    saying why instead of offering tools its rules would not cover."""
    spec = ServerSpec(name=TOO_LONG, scope="session", command="no-such-command-ever")
    async with trio.open_nursery() as nursery:
        server = McpServer(spec, nursery)
        with trio.fail_after(30):
            await server.ready()
        assert server.status == "failed"
        assert server.tools == []
        assert server.error is not None
        assert server.error.startswith("not started: a server name has at most 41 characters")
        await server.stop()
